"""Dates a model wrote ("2024-10-19", "2024/10/19", "2024年10月19日", "2024-10"), read strictly.

A model's date is a hint, never trusted: only years `EARLIEST_YEAR`..`LATEST_YEAR` count, so
every date read here can be given a time of day in any zone and moved by days or months without
leaving what `datetime` can hold (0001-01-01 east of UTC is in year 0 in UTC, which raises
`OverflowError`). A year is read with all its digits: "99999-01-01" is out of range, not 9999.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

__all__ = ["EARLIEST_YEAR", "LATEST_YEAR", "ModelDate", "read_model_date"]

EARLIEST_YEAR = 1900
LATEST_YEAR = 2200

_DATE = re.compile(r"(?<!\d)(\d{1,9})\s*[-/.年]\s*(\d{1,2})(?!\d)(?:\s*[-/.月]\s*(\d{1,2})(?!\d))?")


@dataclass(frozen=True)
class ModelDate:
    """The day a model's text names, or None; `problem` says why a date-shaped text gave none
    ("" when the text named no date at all: "", "unknown", "recently")."""

    day: date | None
    problem: str = ""


def read_model_date(text: str, *, need_day: bool = False) -> ModelDate:
    """The first date in `text`: `2024-10` is its first day unless `need_day`; impossible dates
    ("2024-13-45") and years outside `EARLIEST_YEAR`..`LATEST_YEAR` give a `problem` instead."""
    for match in _DATE.finditer(text or ""):
        if need_day and match[3] is None:
            continue
        if len(match[1]) < 4:
            continue  # "10/19" or "1.5": no year; read on
        shown = match.group(0)
        year = int(match[1])
        if not EARLIEST_YEAR <= year <= LATEST_YEAR:
            return ModelDate(None, f"out of range ({shown!r}: years {EARLIEST_YEAR}..{LATEST_YEAR} only)")
        try:
            return ModelDate(date(year, int(match[2]), int(match[3] or 1)))
        except ValueError:
            return ModelDate(None, f"not a date ({shown!r})")
    return ModelDate(None)
