"""Dates written in digits, the same in every language: 2023-05-07, 2023/05/07 14:30, 05/07/2023
(month first, US style), 2023-05 (a month)."""

from __future__ import annotations

import re
from datetime import date

from memoryscope.timeparse import resolvers as r
from memoryscope.timeparse.calendar_math import month_interval
from memoryscope.timeparse.engine import Clock, Ref, Resolution, RuleSet

__all__ = ["RULES"]

RULES = RuleSet(re.ASCII)


@RULES.add(
    r"(?<![\d.])(?P<y>(?:19|20)\d{2})(?P<sep>[-/.])(?P<m>1[0-2]|0?[1-9])(?P=sep)(?P<d>3[01]|[12]\d|0?[1-9])"
    r"(?:[T ]+(?P<H>[01]?\d|2[0-3]):(?P<M>[0-5]\d)(?::[0-5]\d(?:\.\d+)?)?)?(?![\d.])"
)
def _iso_date(match: re.Match[str], ref: Ref) -> Resolution | None:
    try:
        day = date(int(match["y"]), int(match["m"]), int(match["d"]))
    except ValueError:
        return None
    if match["H"] is None:
        return r.on_day(ref, day)
    return Resolution.waiting(Clock(int(match["H"]), int(match["M"]), meridiem_given=True), True).on_day(day, ref.zone)


@RULES.add(r"(?<![\d./-])(?P<m>1[0-2]|0?[1-9])/(?P<d>3[01]|[12]\d|0?[1-9])/(?P<y>(?:19|20)\d{2}|\d{2})(?![\d/])")
def _us_date(match: re.Match[str], ref: Ref) -> Resolution | None:
    year = int(match["y"])
    return r.month_day(ref, int(match["m"]), int(match["d"]), year + 2000 if year < 100 else year)


@RULES.add(r"(?<![\d./-])(?P<y>(?:19|20)\d{2})[-/](?P<m>1[0-2]|0[1-9])(?![\d./-])")
def _year_month(match: re.Match[str], ref: Ref) -> Resolution:
    return Resolution(month_interval(int(match["y"]), int(match["m"]), ref.zone), "month")
