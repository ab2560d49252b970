"""The rule engine: run every rule's regex, keep the longest non-overlapping matches, then
attach times of day to the days next to them ("yesterday" + "at 3pm").

A rule is a precompiled regex and a function that turns one match into a `Resolution`, given
the reference (`Ref`). A resolution is either a finished interval (with the single day it
stands for, when it is one, so a time of day can attach to it) or a `Clock`: a time of day that
still needs a day.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, tzinfo
from typing import Literal

from memoryscope.timeparse.calendar_math import Interval, at, day_interval, shift_absolute

__all__ = [
    "Granularity",
    "TimeMention",
    "Ref",
    "Clock",
    "Resolution",
    "Rule",
    "RuleSet",
    "scan",
    "occurrence",
    "PARTS_OF_DAY",
]

Granularity = Literal["day", "week", "month", "year", "hour", "minute", "range"]


@dataclass(frozen=True)
class TimeMention:
    """One time expression found in a text, resolved to `[start, end)` in the reference's zone.

    `granularity` is the calendar unit the span is exactly one of ("day", "week", "month",
    "year", "hour", "minute"), or "range" for anything else (a weekend, a season, "the past
    3 days", "this morning", "a few days ago").
    """

    text: str
    start: datetime
    end: datetime
    granularity: Granularity
    span: tuple[int, int]


@dataclass(frozen=True)
class Ref:
    """The reference moment, its calendar day in its own zone, and whether the text is about
    the future (then a plain "Friday" or "in March" is the next one, not the last one)."""

    moment: datetime
    today: date
    zone: tzinfo | None
    ahead: bool = False

    @classmethod
    def of(cls, moment: datetime, ahead: bool = False) -> Ref:
        return cls(moment, moment.date(), moment.tzinfo, ahead)

    def day(self, offset: int = 0) -> Resolution:
        """The whole day `offset` days from today, as a resolution a time of day can attach to."""
        day = self.today + timedelta(days=offset)
        return Resolution(day_interval(day, self.zone), "day", day=day)


# Parts of the day as [start hour, end hour) on their day; night runs into the next morning.
PARTS_OF_DAY: dict[str, tuple[int, int]] = {
    "early_morning": (0, 6),
    "morning": (5, 12),
    "noon": (11, 14),
    "afternoon": (12, 18),
    "dusk": (17, 20),
    "evening": (18, 24),
    "night": (18, 30),
}
_AFTER_NOON_PARTS = frozenset(("afternoon", "dusk", "evening", "night"))


@dataclass(frozen=True)
class Clock:
    """A time of day without its day: an hour (and minute), a part of the day, or both."""

    hour: int | None = None
    minute: int | None = None
    part: str | None = None
    meridiem_given: bool = False  # "3pm" says which half of the day; "3 o'clock" does not

    def with_part(self, part: str | None) -> Clock:
        return self if part is None or self.part is not None else replace(self, part=part)

    def on(self, day: date, zone: tzinfo | None) -> tuple[Interval, Granularity]:
        if self.hour is None:
            first, last = PARTS_OF_DAY[self.part or "morning"]
            return (at(day, zone, first), at(day + timedelta(days=last // 24), zone, last % 24)), "range"
        hour = self.hour
        if not self.meridiem_given:
            if hour < 12 and (self.part in _AFTER_NOON_PARTS or (self.part == "noon" and hour < 11)):
                hour += 12
            elif hour == 12 and self.part in ("evening", "night"):
                hour = 24  # 晚上12点 is midnight, the start of the next day
        day, hour = day + timedelta(days=hour // 24), hour % 24
        start = at(day, zone, hour, self.minute or 0)
        if self.minute is None:
            return (start, shift_absolute(start, timedelta(hours=1))), "hour"
        return (start, shift_absolute(start, timedelta(minutes=1))), "minute"


@dataclass(frozen=True)
class Resolution:
    """What one match means: an interval, or a clock waiting for a day."""

    interval: Interval | None = None
    granularity: Granularity = "range"
    day: date | None = None  # the single day the interval lies in, so a clock can attach
    clock: Clock | None = None  # set alone: a time of day still to be placed on a day
    standalone: bool = True  # False: only meaningful next to a day (a bare "morning")

    @classmethod
    def waiting(cls, clock: Clock, standalone: bool) -> Resolution:
        return cls(clock=clock, standalone=standalone)

    def on_day(self, day: date, zone: tzinfo | None, part: str | None = None) -> Resolution:
        """This clock placed on `day` (a part of day from the day's side fills in am/pm)."""
        clock = (self.clock or Clock()).with_part(part)
        interval, granularity = clock.on(day, zone)
        return Resolution(interval, granularity, day=day, clock=clock)


Resolver = Callable[[re.Match[str], Ref], Resolution | None]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    resolve: Resolver


class RuleSet:
    """An ordered list of rules; a decorator adds one. Earlier rules win ties in length."""

    def __init__(self, flags: int = 0) -> None:
        self.rules: list[Rule] = []
        self.flags = flags

    def add(self, pattern: str) -> Callable[[Resolver], Resolver]:
        compiled = re.compile(pattern, self.flags)

        def register(resolve: Resolver) -> Resolver:
            self.rules.append(Rule(compiled, resolve))
            return resolve

        return register


def occurrence(
    today: date, mode: str, span_of: Callable[[int], tuple[date, date] | None], years_back: int = 2, ahead: bool = False
) -> tuple[date, date] | None:
    """Pick one yearly occurrence (`span_of(year)` → [first day, end day)) of a recurring time.

    mode "plain": the latest one that has started by today (memories are mostly about the past),
    or with `ahead` (the text speaks of the future) the first one not over yet;
    "last": the latest one over before today; "next": the first one starting after today;
    "this": the one containing today, else the nearest; "year": the one of today's year.
    """
    spans = [span for year in range(today.year - years_back, today.year + 3) if (span := span_of(year))]
    if mode == "year":
        return span_of(today.year)
    if mode == "plain" and ahead:
        upcoming = [span for span in spans if span[1] > today]
        return min(upcoming) if upcoming else None
    if mode == "plain":
        started = [span for span in spans if span[0] <= today]
        return max(started) if started else None
    if mode == "last":
        over = [span for span in spans if span[1] <= today]
        return max(over) if over else None
    if mode == "next":
        later = [span for span in spans if span[0] > today]
        return min(later) if later else None
    for span in spans:
        if span[0] <= today < span[1]:
            return span
    return min(spans, key=lambda span: (span[0] - today) if span[0] > today else (today - span[1]), default=None)


# Between a day and its time of day: "yesterday at 3pm", "3pm on Saturday", "Saturday, in the
# morning", "the morning of May 7", "昨天下午", "昨天的下午".
_CONNECTOR = re.compile(r"\s*,?\s*(?:(?:at|on|in\s+the|around|about|of)\s+)?|[\s的]*", re.IGNORECASE)
# Right before a mention: it is a habit ("every Saturday", "每周六"), not a time.
_HABIT_BEFORE = re.compile(r"(?:\b(?:every|each)\s+|每[个年月周天星期礼拜]{0,2})$", re.IGNORECASE)
_SINCE_BEFORE = re.compile(r"(?:\bsince\s+|自从|自)$", re.IGNORECASE)
_SINCE_AFTER = re.compile(r"\s*(?:以来|至今|到现在|到今天|起(?![床来飞身])|开始)")
# Plans: a plain weekday, month or date then means the next one ("I'll see her on Friday").
_FUTURE_WORDS = re.compile(
    r"\b(?:will|won't|shall|going\s+to|gonna|plan(?:s|ning)?\s+to|planning|intend|upcoming|scheduled|looking\s+forward"
    r"|training\s+for)\b|'ll\b|打算|计划|准备|将要|即将|要去|会去|期待",
    re.IGNORECASE | re.ASCII,
)
# A clock time with no day counts as today, unless the text talks about a habit.
_HABIT_WORDS = re.compile(
    r"\b(?:usually|always|often|normally|typically|every|each|daily)\b|一般|通常|经常|总是|每|平时", re.IGNORECASE | re.ASCII
)


@dataclass
class _Found:
    start: int
    end: int
    resolution: Resolution


def scan(text: str, reference: datetime, rule_sets: Sequence[RuleSet]) -> list[TimeMention]:
    """Every time expression in `text` that the rules resolve, in text order."""
    ref = Ref.of(reference, ahead=_FUTURE_WORDS.search(text) is not None)
    found: list[_Found] = []
    # Near the ends of the calendar (a reference in year 1 or 9999, and a zone that moves it past
    # them) date arithmetic raises: such an expression places nothing, the text is still read.
    for rule_set in rule_sets:
        for rule in rule_set.rules:
            for match in rule.pattern.finditer(text):
                try:
                    resolution = rule.resolve(match, ref)
                except (ValueError, OverflowError):
                    continue
                if resolution is not None:
                    found.append(_Found(match.start(), match.end(), resolution))
    if not found:
        return []
    chosen = _longest_first(found)
    try:
        placed = _place_clocks(text, chosen, ref)
    except (ValueError, OverflowError):
        return []
    mentions = []
    for item in placed:
        if _HABIT_BEFORE.search(text, max(0, item.start - 12), item.start) is not None:
            continue
        try:
            mention = _mention(text, item, ref)
        except (ValueError, OverflowError):
            continue
        if mention is not None:
            mentions.append(mention)
    return mentions


def _longest_first(found: Iterable[_Found]) -> list[_Found]:
    """Keep the longest matches that do not overlap (ties: the earlier rule), in text order."""
    taken: list[_Found] = []
    for item in sorted(found, key=lambda item: item.start - item.end):  # stable: rule order breaks ties
        if all(item.end <= other.start or item.start >= other.end for other in taken):
            taken.append(item)
    return sorted(taken, key=lambda item: item.start)


def _joins(text: str, left: _Found, right: _Found) -> bool:
    return _CONNECTOR.fullmatch(text, left.end, right.start) is not None


def _place_clocks(text: str, items: list[_Found], ref: Ref) -> list[_Found]:
    """Attach each waiting clock to the day just before or after it; alone, it is today (or dropped)."""
    out: list[_Found] = []
    index = 0
    while index < len(items):
        item = items[index]
        resolution = item.resolution
        if resolution.interval is not None:
            out.append(item)
            index += 1
            continue
        before = out[-1] if out and _joins(text, out[-1], item) else None
        after = items[index + 1] if index + 1 < len(items) and _joins(text, item, items[index + 1]) else None
        if before is not None and (day := before.resolution.day) is not None:
            out[-1] = _Found(before.start, item.end, resolution.on_day(day, ref.zone, _part(before.resolution)))
            index += 1
        elif after is not None and (day := after.resolution.day) is not None:
            out.append(_Found(item.start, after.end, resolution.on_day(day, ref.zone, _part(after.resolution))))
            index += 2
        else:
            if resolution.standalone and _HABIT_WORDS.search(text) is None:
                out.append(_Found(item.start, item.end, resolution.on_day(ref.today, ref.zone)))
            index += 1
    return out


def _part(resolution: Resolution) -> str | None:
    return resolution.clock.part if resolution.clock is not None else None


def _mention(text: str, item: _Found, ref: Ref) -> TimeMention | None:
    resolution = item.resolution
    if resolution.interval is None:
        return None
    start, end = resolution.interval
    granularity = resolution.granularity
    if _SINCE_BEFORE.search(text, max(0, item.start - 8), item.start) or _SINCE_AFTER.match(text, item.end):
        tomorrow = at(ref.today + timedelta(days=1), ref.zone)
        if tomorrow > end:
            end, granularity = tomorrow, "range"
    if not start < end:
        return None
    return TimeMention(text[item.start : item.end], start, end, granularity, (item.start, item.end))
