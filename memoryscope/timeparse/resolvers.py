"""What the English and Chinese rules resolve to, written once for both languages.

Conventions (the same in both languages):

- Weeks run Monday to Sunday; a weekend is the Saturday and Sunday of its week.
- A calendar position given without saying which one (a plain weekday, a month, a month and
  day, a season, a holiday, "over the weekend") is the most recent one that has started by the
  reference day: memories are mostly about the past. "Saturday" on a Saturday is that same day.
  When the text speaks of the future ("will", "going to", "'ll", "plan to", 打算, 计划, 准备,
  要去 ...) it is the first one not over yet instead ("I'll see her on Friday").
- "last Saturday" / 上周六 is the Saturday of the previous week; "this Saturday" / 这周六 the
  one of the current week (it may be ahead); "next Saturday" / 下周六 the one of next week.
  "this past Saturday" is the latest one before today; "this coming Saturday" the first after.
- "N days/weeks/months/years ago" is the whole day/week/month/year containing the reference
  moved back N units; a vague count ("a few", "几") gives the range from the farthest to the
  nearest unit. "Half a month" is 15 days (a week granularity), "half a year" 6 months.
- "the past N days" / 最近N天 runs from the start of the day N days back to the end of today.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, timedelta

from memoryscope.timeparse.calendar_math import (
    SEASON_START_MONTH,
    add_months,
    at,
    day_interval,
    days_interval,
    month_interval,
    season_interval,
    shift_absolute,
    week_interval,
    week_start,
    year_interval,
)
from memoryscope.timeparse.engine import Ref, Resolution, occurrence
from memoryscope.timeparse.numbers import Quantity

__all__ = [
    "relative",
    "window",
    "week",
    "weekend",
    "recent_weekend",
    "the_weekend",
    "coming_weekend",
    "month_offset",
    "year_offset",
    "weekday",
    "month_of_year",
    "month_day",
    "month_part",
    "year_part",
    "season",
    "holiday",
    "earlier_or_later",
    "on_day",
]

# Counts beyond these are not times people talk about ("2023 years ago" is a misread year).
_LIMITS = {
    "minute": 100_000, "hour": 10_000, "day": 3660, "week": 520, "half_month": 240, "month": 1200, "half_year": 200, "year": 150,
}  # fmt: skip


def on_day(ref: Ref, day: date) -> Resolution:
    return Resolution(day_interval(day, ref.zone), "day", day=day)


def _unit_containing(ref: Ref, count: int, unit: str) -> Resolution:
    """The whole `unit` that contains the reference moved by `count` units."""
    today = ref.today
    if unit == "day":
        return on_day(ref, today + timedelta(days=count))
    if unit in ("week", "half_month"):
        days = 7 * count if unit == "week" else 15 * count
        return Resolution(week_interval(today + timedelta(days=days), ref.zone), "week")
    if unit in ("month", "half_year"):
        moved = add_months(today, count if unit == "month" else 6 * count)
        return Resolution(month_interval(moved.year, moved.month, ref.zone), "month")
    if unit == "year":
        return Resolution(year_interval(today.year + count, ref.zone), "year")
    step = timedelta(hours=1) if unit == "hour" else timedelta(minutes=1)
    moved_moment = shift_absolute(ref.moment, step * count)
    if unit == "hour":
        floor = moved_moment.replace(minute=0, second=0, microsecond=0)
        return Resolution((floor, shift_absolute(floor, step)), "hour")
    floor = moved_moment.replace(second=0, microsecond=0)
    return Resolution((floor, shift_absolute(floor, step)), "minute")


def relative(ref: Ref, quantity: Quantity, unit: str, sign: int) -> Resolution | None:
    """`quantity` units ago (sign -1) or from now (sign +1)."""
    if quantity.high > _LIMITS[unit] or quantity.low < 0:
        return None
    near = _unit_containing(ref, sign * quantity.low, unit)
    if quantity.exact:
        return near
    far = _unit_containing(ref, sign * quantity.high, unit)
    if near.interval is None or far.interval is None:
        return None
    return Resolution((min(near.interval[0], far.interval[0]), max(near.interval[1], far.interval[1])), "range")


def window(ref: Ref, quantity: Quantity, unit: str, sign: int) -> Resolution | None:
    """The past (sign -1) or next (sign +1) `quantity` units, today included."""
    count = quantity.high
    if count > _LIMITS[unit] or count <= 0:
        return None
    if unit in ("hour", "minute"):
        far = _unit_containing(ref, sign * count, unit).interval
        now = _unit_containing(ref, 0, unit).interval
        if far is None or now is None:
            return None
        return Resolution((far[0], now[1]) if sign < 0 else (now[0], far[1]), "range")
    today = ref.today
    if unit in ("day", "week", "half_month"):
        moved = today + timedelta(days=sign * count * {"day": 1, "week": 7, "half_month": 15}[unit])
    else:
        moved = add_months(today, sign * count * {"month": 1, "half_year": 6, "year": 12}[unit])
    first, last = (moved, today) if sign < 0 else (today, moved)
    return Resolution(days_interval(first, last, ref.zone), "range")


def week(ref: Ref, offset: int) -> Resolution:
    return Resolution(week_interval(ref.today + timedelta(days=7 * offset), ref.zone), "week")


def weekend(ref: Ref, offset: int) -> Resolution:
    saturday = week_start(ref.today) + timedelta(days=7 * offset + 5)
    return Resolution(days_interval(saturday, saturday + timedelta(days=1), ref.zone), "range")


def recent_weekend(ref: Ref) -> Resolution:
    """This one when today is in it, else the one just past ("this past weekend")."""
    return weekend(ref, 0 if ref.today.weekday() >= 5 else -1)


def the_weekend(ref: Ref) -> Resolution:
    """ "Over the weekend" / plain 周末: the recent one, or for plans this week's."""
    return weekend(ref, 0) if ref.ahead else recent_weekend(ref)


def coming_weekend(ref: Ref) -> Resolution:
    return weekend(ref, 1 if ref.today.weekday() >= 5 else 0)


def month_offset(ref: Ref, offset: int) -> Resolution:
    moved = add_months(ref.today.replace(day=1), offset)
    return Resolution(month_interval(moved.year, moved.month, ref.zone), "month")


def year_offset(ref: Ref, offset: int) -> Resolution:
    return Resolution(year_interval(ref.today.year + offset, ref.zone), "year")


def weekday(ref: Ref, day_of_week: int, mode: str, week_offset: int = 0) -> Resolution:
    """`day_of_week` (Monday = 0): mode "plain" (on or before today), "past" (before today),
    "coming" (after today), or "week" (in the week `week_offset` weeks from this one)."""
    today = ref.today
    if mode == "plain" and ref.ahead:
        day = today + timedelta(days=(day_of_week - today.weekday()) % 7)
    elif mode == "plain":
        day = today - timedelta(days=(today.weekday() - day_of_week) % 7)
    elif mode == "past":
        day = today - timedelta(days=(today.weekday() - day_of_week - 1) % 7 + 1)
    elif mode == "coming":
        day = today + timedelta(days=(day_of_week - today.weekday() - 1) % 7 + 1)
    else:
        day = week_start(today) + timedelta(days=7 * week_offset + day_of_week)
    return on_day(ref, day)


def _month_span(month: int) -> Callable[[int], tuple[date, date]]:
    def span(year: int) -> tuple[date, date]:
        first = date(year, month, 1)
        return first, add_months(first, 1)

    return span


def month_of_year(
    ref: Ref, month: int, mode: str = "plain", year: int | None = None, part: str | None = None
) -> Resolution | None:
    """A month by name or number: of `year` when given, else picked by `mode` (see `occurrence`;
    "this" means this calendar year's). `part` early/mid/late narrows it to days 1-10/11-20/21-end."""
    if not 1 <= month <= 12:
        return None
    if year is None:
        picked = occurrence(ref.today, "year" if mode == "this" else mode, _month_span(month), ahead=ref.ahead)
        if picked is None:
            return None
        year = picked[0].year
    if part is not None:
        return month_part(ref, year, month, part)
    return Resolution(month_interval(year, month, ref.zone), "month")


def month_part(ref: Ref, year: int, month: int, part: str) -> Resolution:
    last_day = calendar.monthrange(year, month)[1]
    first, last = {"early": (1, 10), "mid": (11, 20), "late": (21, last_day)}[part]
    return Resolution(days_interval(date(year, month, first), date(year, month, last), ref.zone), "range")


def year_part(ref: Ref, year: int, part: str) -> Resolution:
    """Early / mid / late in a year: its first, middle and last four months."""
    first = date(year, {"early": 1, "mid": 5, "late": 9}[part], 1)
    return Resolution((at(first, ref.zone), at(add_months(first, 4), ref.zone)), "range")


def month_day(ref: Ref, month: int, day: int, year: int | None = None) -> Resolution | None:
    """A month and day; without a year, the latest one on or before today (Feb 29 included)."""
    if year is not None:
        try:
            return on_day(ref, date(year, month, day))
        except ValueError:
            return None

    def span(candidate_year: int) -> tuple[date, date] | None:
        try:
            first = date(candidate_year, month, day)
        except ValueError:
            return None
        return first, first + timedelta(days=1)

    picked = occurrence(ref.today, "plain", span, years_back=8, ahead=ref.ahead)
    return None if picked is None else on_day(ref, picked[0])


def season(ref: Ref, name: str, mode: str = "plain", year: int | None = None) -> Resolution:
    """A northern season; winter of `year` runs from December `year` to February `year + 1`."""
    if year is None:

        def span(candidate_year: int) -> tuple[date, date]:
            first = date(candidate_year, SEASON_START_MONTH[name], 1)
            return first, add_months(first, 3)

        picked = occurrence(ref.today, mode, span, ahead=ref.ahead)
        year = picked[0].year if picked is not None else ref.today.year
    return Resolution(season_interval(name, year, ref.zone), "range")


def holiday(
    ref: Ref, first_day: Callable[[int], date], length_days: int = 1, mode: str = "plain", year: int | None = None
) -> Resolution | None:
    """A holiday that falls on `first_day(year)` and lasts `length_days`."""

    def span(candidate_year: int) -> tuple[date, date]:
        first = first_day(candidate_year)
        return first, first + timedelta(days=length_days)

    picked = span(year) if year is not None else occurrence(ref.today, mode, span, ahead=ref.ahead)
    if picked is None:
        return None
    if length_days == 1:
        return on_day(ref, picked[0])
    return Resolution(days_interval(picked[0], picked[1] - timedelta(days=1), ref.zone), "range")


def earlier_or_later(ref: Ref, which: str, unit: str) -> Resolution:
    """ "earlier this week" (from the week's start to before today) or "later this week" (after
    today to the week's end); today itself when that leaves nothing. Units: week, month, year."""
    today = ref.today
    if unit == "week":
        first = week_start(today)
        end = first + timedelta(days=7)
    elif unit == "month":
        first = today.replace(day=1)
        end = add_months(first, 1)
    else:
        first = date(today.year, 1, 1)
        end = date(today.year + 1, 1, 1)
    if which == "earlier" and first < today:
        return Resolution((at(first, ref.zone), at(today, ref.zone)), "range")
    tomorrow = today + timedelta(days=1)
    if which == "later" and tomorrow < end:
        return Resolution((at(tomorrow, ref.zone), at(end, ref.zone)), "range")
    return on_day(ref, today)
