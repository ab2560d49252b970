"""Dates a model wrote ("2024-10-19", "2024/10/19", "2024.10.19", "2024年10月19日", "2024-10",
"19/10/2024"), read strictly.

A model's date is a hint, never trusted: only years `EARLIEST_YEAR`..`LATEST_YEAR` count, so
every date read here can be given a time of day in any zone and moved by days or months without
leaving what `datetime` can hold (0001-01-01 east of UTC is in year 0 in UTC, which raises
`OverflowError`). A year is read with all its digits: "99999-01-01" is out of range, not 9999.
A date with the year last is read only when it is unambiguous: "19/10/2024" (19 is no month),
"10/19/2024", "10.10.2024"; "10/01/2024" (1 October or 10 January?) gives a `problem` instead,
unless the caller knows the order from another date of the same answer (`day_first`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

__all__ = ["EARLIEST_YEAR", "LATEST_YEAR", "ModelDate", "read_model_date", "date_texts"]

EARLIEST_YEAR = 1900
LATEST_YEAR = 2200

# Year last (`19/10/2024`, same separator twice) first, so its day is not read as a year; then year first.
_DATE = re.compile(
    r"(?<!\d)(?:(?P<a>\d{1,2})\s*(?P<sep>[-/.])\s*(?P<b>\d{1,2})\s*(?P=sep)\s*(?P<last_year>\d{4})(?!\d)"
    r"|(?P<year>\d{1,9})\s*[-/.年]\s*(?P<month>\d{1,2})(?!\d)(?:\s*[-/.月]\s*(?P<day>\d{1,2})(?!\d))?)"
)


@dataclass(frozen=True)
class ModelDate:
    """The day a model's text names, or None; `problem` says why a date-shaped text gave none
    ("" when the text named no date at all: "", "unknown", "recently"). `day_first` tells how a
    year-last date showed its order (True: "19/10/2024", False: "10/19/2024"; None otherwise)."""

    day: date | None
    problem: str = ""
    day_first: bool | None = None


def read_model_date(text: str, *, need_day: bool = False, day_first: bool | None = None) -> ModelDate:
    """The first date in `text`: `2024-10` is its first day unless `need_day`; impossible dates
    ("2024-13-45"), ambiguous ones ("10/01/2024", unless `day_first` says the order) and years
    outside `EARLIEST_YEAR`..`LATEST_YEAR` give a `problem` instead."""
    for match in _dated(text, need_day):
        if match["last_year"] is not None:
            return _year_last(match, day_first)
        return _checked(match.group(0), int(match["year"]), int(match["month"]), int(match["day"] or 1))
    return ModelDate(None)


def date_texts(text: str, *, need_day: bool = False) -> list[str]:
    """The date-shaped parts of `text`, in order, as `read_model_date` would read them one by one."""
    return [match.group(0) for match in _dated(text, need_day)]


def _dated(text: str, need_day: bool) -> Iterator[re.Match[str]]:
    for match in _DATE.finditer(text or ""):
        year_first = match["year"] is not None
        if year_first and (len(match["year"]) < 4 or (need_day and match["day"] is None)):
            continue  # "10/19", "1.5": no year; read on
        yield match


def _year_last(match: re.Match[str], day_first: bool | None) -> ModelDate:
    first, second = int(match["a"]), int(match["b"])
    shown: bool | None = None  # the order the date itself shows: only a part above 12 is a day
    if first > 12 >= second:
        shown = True
    elif second > 12 >= first:
        shown = False
    order = day_first if shown is None else shown
    if order is None and first != second:
        return ModelDate(None, f"ambiguous ({match.group(0)!r}: day or month first?)")
    day, month = (second, first) if order is False else (first, second)
    found = _checked(match.group(0), int(match["last_year"]), month, day)
    return ModelDate(found.day, found.problem, shown)


def _checked(shown: str, year: int, month: int, day: int) -> ModelDate:
    if not EARLIEST_YEAR <= year <= LATEST_YEAR:
        return ModelDate(None, f"out of range ({shown!r}: years {EARLIEST_YEAR}..{LATEST_YEAR} only)")
    try:
        return ModelDate(date(year, month, day))
    except ValueError:
        return ModelDate(None, f"not a date ({shown!r})")
