"""Calendar arithmetic under the parser: month arithmetic and localising days."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from memoryscope.timeparse.calendar_math import add_months, at, day_interval, nth_weekday, week_start
from memoryscope.timeparse.numbers import Quantity, chinese_number, chinese_quantity, english_quantity


@pytest.mark.parametrize(
    ("day", "months", "expected"),
    [
        (date(2024, 1, 31), 1, date(2024, 2, 29)),
        (date(2023, 1, 31), 1, date(2023, 2, 28)),
        (date(2024, 3, 31), -1, date(2024, 2, 29)),
        (date(2024, 12, 15), 1, date(2025, 1, 15)),
        (date(2025, 1, 15), -1, date(2024, 12, 15)),
        (date(2024, 10, 26), -22, date(2022, 12, 26)),
    ],
)
def test_add_months_clamps_to_month_length(day: date, months: int, expected: date) -> None:
    assert add_months(day, months) == expected


def test_week_starts_on_monday() -> None:
    assert week_start(date(2024, 10, 27)) == date(2024, 10, 21)  # a Sunday belongs to the week before
    assert week_start(date(2024, 10, 21)) == date(2024, 10, 21)


def test_local_midnight_in_a_zone_that_skips_midnight() -> None:
    # Santiago springs forward at midnight: 2024-09-08 00:00 does not exist, the day starts at 01:00.
    santiago = ZoneInfo("America/Santiago")
    start, end = day_interval(date(2024, 9, 8), santiago)
    assert start.isoformat() == "2024-09-08T01:00:00-03:00"
    assert end.timestamp() - start.timestamp() == 23 * 3600
    assert at(date(2024, 9, 8), None) == datetime(2024, 9, 8)


def test_thanksgiving_is_the_fourth_thursday() -> None:
    assert nth_weekday(2024, 11, 3, 4) == date(2024, 11, 28)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3", Quantity(3, 3)), ("three", Quantity(3, 3)), ("twenty-one", Quantity(21, 21)), ("an", Quantity(1, 1)),
     ("a couple of", Quantity(2, 3)), ("a few", Quantity(2, 5)), ("several", Quantity(3, 7)), ("a dozen", Quantity(12, 12))],
)  # fmt: skip
def test_english_counts(text: str, expected: Quantity) -> None:
    assert english_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("十五", 15), ("二十一", 21), ("两", 2), ("十", 10), ("一百零五", 105), ("二〇二三", 2023), ("１２", 12), ("两三", None)],
)
def test_chinese_numbers(text: str, expected: int | None) -> None:
    assert chinese_number(text) == expected


def test_chinese_vague_counts() -> None:
    assert chinese_quantity("两三") == Quantity(2, 3)
    assert chinese_quantity("三五") == Quantity(3, 5)
    assert chinese_quantity("几") == Quantity(2, 5)
    assert chinese_quantity("十几") == Quantity(11, 19)
    assert chinese_quantity("五三") is None
