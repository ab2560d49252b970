"""Calendar arithmetic on dates, and turning dates into zone-aware datetimes.

Everything is computed on plain `date`s first and only then given a wall-clock time in the
reference's zone, so a day is always midnight to midnight even across a DST change (23 or 25
hours long). Weeks start on Monday. Seasons are the northern meteorological ones.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta, timezone, tzinfo

__all__ = [
    "Interval",
    "add_months",
    "at",
    "shift_absolute",
    "day_interval",
    "days_interval",
    "week_start",
    "week_interval",
    "month_interval",
    "months_interval",
    "year_interval",
    "season_start",
    "season_interval",
    "SEASON_OF_MONTH",
    "nth_weekday",
]

Interval = tuple[datetime, datetime]

# Northern meteorological seasons: the month each starts in, and how each month maps to a season.
SEASON_START_MONTH = {"spring": 3, "summer": 6, "autumn": 9, "winter": 12}
SEASON_OF_MONTH = {
    1: "winter", 2: "winter", 3: "spring", 4: "spring", 5: "spring", 6: "summer",
    7: "summer", 8: "summer", 9: "autumn", 10: "autumn", 11: "autumn", 12: "winter",
}  # fmt: skip


def add_months(day: date, months: int) -> date:
    """`day` moved by whole months, clamped to the target month's length (Jan 31 + 1 → Feb 29)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def at(day: date, zone: tzinfo | None, hour: int = 0, minute: int = 0) -> datetime:
    """The wall-clock time `hour:minute` on `day` in `zone`, normalised.

    A wall time that does not exist (inside a spring-forward gap) is moved forward past the gap,
    so comparisons between results are always by absolute time.
    """
    wall = datetime.combine(day, time(hour, minute), tzinfo=zone)
    if zone is None:
        return wall
    return wall.astimezone(timezone.utc).astimezone(zone)


def shift_absolute(moment: datetime, delta: timedelta) -> datetime:
    """`moment + delta` in elapsed time (an hour ago is 60 real minutes ago, DST or not)."""
    zone = moment.tzinfo
    if zone is None:
        return moment + delta
    return (moment.astimezone(timezone.utc) + delta).astimezone(zone)


def day_interval(day: date, zone: tzinfo | None) -> Interval:
    return at(day, zone), at(day + timedelta(days=1), zone)


def days_interval(first: date, last: date, zone: tzinfo | None) -> Interval:
    """From the start of `first` to the end of `last` (both days included)."""
    return at(first, zone), at(last + timedelta(days=1), zone)


def week_start(day: date) -> date:
    """The Monday of `day`'s week."""
    return day - timedelta(days=day.weekday())


def week_interval(day: date, zone: tzinfo | None) -> Interval:
    monday = week_start(day)
    return at(monday, zone), at(monday + timedelta(days=7), zone)


def month_interval(year: int, month: int, zone: tzinfo | None) -> Interval:
    first = date(year, month, 1)
    return at(first, zone), at(add_months(first, 1), zone)


def months_interval(year: int, month: int, count: int, zone: tzinfo | None) -> Interval:
    """`count` whole months starting with `year`-`month`."""
    first = date(year, month, 1)
    return at(first, zone), at(add_months(first, count), zone)


def year_interval(year: int, zone: tzinfo | None) -> Interval:
    return at(date(year, 1, 1), zone), at(date(year + 1, 1, 1), zone)


def season_start(season: str, year: int) -> date:
    """First day of `season` in `year`; winter `year` runs from December `year` to February `year + 1`."""
    return date(year, SEASON_START_MONTH[season], 1)


def season_interval(season: str, year: int, zone: tzinfo | None) -> Interval:
    first = season_start(season, year)
    return at(first, zone), at(add_months(first, 3), zone)


def nth_weekday(year: int, month: int, weekday: int, nth: int) -> date:
    """The `nth` (1-based) `weekday` (Monday = 0) of a month, e.g. US Thanksgiving."""
    first = date(year, month, 1)
    offset = (weekday - first.weekday()) % 7
    return first + timedelta(days=offset + 7 * (nth - 1))
