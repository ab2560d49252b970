"""English time expressions. Conventions are those of `resolvers`; every regex is compiled at import.

Words that are also everyday words count only in a time context: a month name needs a
preposition or modifier ("in May", "last March"), a day or a year ("May 7", "March 2023"); a
season needs one too ("last summer", "in the winter"); a bare part of the day ("morning")
counts only next to a day ("yesterday morning"); weekday abbreviations that are words ("sat",
"sun", "wed") are not read as weekdays.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from memoryscope.timeparse import resolvers as r
from memoryscope.timeparse.calendar_math import nth_weekday
from memoryscope.timeparse.engine import Clock, Ref, Resolution, RuleSet
from memoryscope.timeparse.numbers import EN_QUANTITY, Quantity, english_quantity

__all__ = ["RULES", "UNRESOLVED"]

# ASCII: word boundaries must hold next to Chinese characters too ("我last week去了").
RULES = RuleSet(re.IGNORECASE | re.ASCII)

MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9,
    "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
WEEKDAYS = {
    "monday": 0, "tuesday": 1, "tues": 1, "wednesday": 2, "thursday": 3, "thurs": 3,
    "friday": 4, "saturday": 5, "sunday": 6,
}  # fmt: skip
_FULL_MONTHS = "|".join(name for name in MONTHS if len(name) > 4 or name in ("may", "june", "july"))
_SHORT_MONTHS = "|".join(
    sorted((name for name in MONTHS if len(name) <= 4 and name not in ("may", "june", "july")), key=len, reverse=True)
)
_MONTH = rf"(?:(?:{_FULL_MONTHS})\b|(?:{_SHORT_MONTHS})\b\.?)"  # "Nov." keeps its dot, "November." does not
_WEEKDAY = "(?:" + "|".join(sorted(WEEKDAYS, key=len, reverse=True)) + ")"
_DAY_NUMBER = r"(?:3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d{2}"
_QTY = EN_QUANTITY
_UNIT = r"(?:days?|weeks?|fortnights?|months?|years?|hours?|hrs?|minutes?|mins?)"
_S = r"\s+"


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def _unit(word: str) -> str:
    word = word.lower().rstrip("s")
    return {"hr": "hour", "min": "minute", "fortnight": "week"}.get(word, word)


def _quantity(text: str, unit_word: str) -> Quantity | None:
    quantity = english_quantity(text)
    if quantity is not None and unit_word.lower().startswith("fortnight"):
        return Quantity(quantity.low * 2, quantity.high * 2)
    return quantity


# -- days around today ----------------------------------------------------------------------

_DAY_OFFSETS = {
    "the day before yesterday": -2, "day before yesterday": -2, "yesterday": -1, "today": 0, "earlier today": 0,
    "later today": 0, "tomorrow": 1, "the day after tomorrow": 2, "day after tomorrow": 2,
}  # fmt: skip


@RULES.add(r"\b(?:(?:the\s+)?day\s+(?:before\s+yesterday|after\s+tomorrow)|yesterday|today|tomorrow|(?:earlier|later)\s+today)\b")
def _relative_day(match: re.Match[str], ref: Ref) -> Resolution:
    return ref.day(_DAY_OFFSETS[_words(match[0])])


_PART_WORDS = {"morning": "morning", "afternoon": "afternoon", "evening": "evening", "night": "night", "noon": "noon"}


@RULES.add(r"\b(?:tonight|last\s+night|this\s+(?P<part>morning|afternoon|evening))\b")
def _part_of_today(match: re.Match[str], ref: Ref) -> Resolution:
    words = _words(match[0])
    if words in ("tonight", "last night"):
        day = ref.today - timedelta(days=1 if words == "last night" else 0)
        return Resolution.waiting(Clock(part="night"), True).on_day(day, ref.zone)
    return Resolution.waiting(Clock(part=_PART_WORDS[match["part"].lower()]), True).on_day(ref.today, ref.zone)


@RULES.add(r"\b(?P<part>morning|afternoon|evening|night)\b")
def _part_of_day(match: re.Match[str], ref: Ref) -> Resolution:
    return Resolution.waiting(Clock(part=_PART_WORDS[match["part"].lower()]), standalone=False)


@RULES.add(r"\b(?:noon|midday)\b")
def _noon(match: re.Match[str], ref: Ref) -> Resolution:
    return Resolution.waiting(Clock(hour=12, meridiem_given=True), standalone=False)


@RULES.add(r"\b(?P<h>1[0-2]|0?[1-9])(?::(?P<m>[0-5]\d))?\s*(?P<ampm>[ap])\.?m\b\.?")
def _clock_12h(match: re.Match[str], ref: Ref) -> Resolution:
    hour = int(match["h"]) % 12 + (12 if match["ampm"].lower() == "p" else 0)
    minute = int(match["m"]) if match["m"] else None
    return Resolution.waiting(Clock(hour, minute, meridiem_given=True), standalone=True)


@RULES.add(r"(?<![\d:.])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?![\d:])|\b(?P<oh>1[0-2]|0?[1-9])\s+o'?clock\b")
def _clock_24h(match: re.Match[str], ref: Ref) -> Resolution:
    if match["oh"]:
        return Resolution.waiting(Clock(int(match["oh"])), standalone=False)
    hour = int(match["h"])
    # "15:30" says which half of the day; "3:30" may still take it from "afternoon". Alone (no
    # day next to it) a time counts only when the half of the day is known.
    known = hour >= 13 or match["h"].startswith("0")
    return Resolution.waiting(Clock(hour, int(match["m"]), meridiem_given=known), standalone=known)


# -- weeks, weekends, months, years relative to now -----------------------------------------

_CALENDAR_UNIT = r"(?:weeks?|weekends?|months?|years?|days?|hours?)"


@RULES.add(
    rf"\b(?P<the>the\s+)?(?P<mod>this\s+past|this\s+coming|last|this|next|previous|past|coming)"
    rf"(?:\s+(?P<n>{_QTY}))?\s+(?P<unit>{_CALENDAR_UNIT}|fortnights?|minutes?|mins?)\b"
)
def _this_last_next(match: re.Match[str], ref: Ref) -> Resolution | None:
    mod = _words(match["mod"])
    unit_word = match["unit"].lower().rstrip("s")
    if match["n"]:  # "the past 3 days", "next two weeks": a window from/to today
        quantity = _quantity(match["n"], unit_word)
        if quantity is None or mod in ("this", "this coming") or unit_word == "weekend":
            return None
        return r.window(ref, quantity, _unit(unit_word), 1 if mod in ("next", "coming") else -1)
    if unit_word == "weekend":
        if mod in ("this past", "past"):
            return r.recent_weekend(ref)
        if mod == "this coming":
            return r.coming_weekend(ref)
        return r.weekend(ref, {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[mod])
    window_words = mod in ("past", "this past") or (match["the"] and mod == "last")
    if window_words or unit_word in ("day", "hour", "minute", "min", "fortnight"):
        if not window_words:
            return None  # "the next day" is about another day than today
        return r.window(ref, _quantity("1", unit_word) or Quantity(1, 1), _unit(unit_word), -1)
    offset = {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1, "this coming": 1}[mod]
    if unit_word == "week":
        return r.week(ref, offset)
    if unit_word == "month":
        return r.month_offset(ref, offset)
    return r.year_offset(ref, offset)


@RULES.add(r"\bthe\s+(?P<unit>week|weekend|month|year)\s+before\s+last\b")
def _before_last(match: re.Match[str], ref: Ref) -> Resolution:
    unit = match["unit"].lower()
    return {"week": r.week, "weekend": r.weekend, "month": r.month_offset, "year": r.year_offset}[unit](ref, -2)


@RULES.add(r"\b(?:over|on|at|during)\s+the\s+weekend\b")
def _the_weekend(match: re.Match[str], ref: Ref) -> Resolution:
    return r.the_weekend(ref)


@RULES.add(r"\b(?P<which>earlier|later)\s+(?:this|in\s+the)\s+(?P<unit>week|month|year)\b")
def _earlier_this(match: re.Match[str], ref: Ref) -> Resolution:
    return r.earlier_or_later(ref, match["which"].lower(), match["unit"].lower())


# -- weekdays -------------------------------------------------------------------------------

_WEEKDAY_MODES = {
    "last": ("week", -1), "previous": ("week", -1), "this": ("week", 0), "next": ("week", 1),
    "this past": ("past", 0), "past": ("past", 0), "this coming": ("coming", 0), "coming": ("coming", 0),
}  # fmt: skip


@RULES.add(rf"\b(?:(?P<mod>this\s+past|this\s+coming|last|this|next|previous|past|coming)\s+)?(?P<wd>{_WEEKDAY})\b")
def _weekday(match: re.Match[str], ref: Ref) -> Resolution:
    mode, offset = _WEEKDAY_MODES.get(_words(match["mod"] or ""), ("plain", 0))
    return r.weekday(ref, WEEKDAYS[match["wd"].lower()], mode, offset)


# -- counts of units ago / from now ---------------------------------------------------------


@RULES.add(rf"\b(?P<n>{_QTY}|half\s+an?)\s+(?P<unit>{_UNIT})\s+(?P<dir>ago|back|before\s+now|from\s+now|hence)\b")
def _units_ago(match: re.Match[str], ref: Ref) -> Resolution | None:
    direction = 1 if match["dir"].lower() in ("from now", "hence") else -1
    return _count(match["n"], match["unit"], direction, ref)


# "in 5 days" is a date ahead; "in 30 minutes" / "in 2 hours" is as often how long something took.
@RULES.add(rf"\bin\s+(?P<n>{_QTY}|half\s+an?)\s+(?P<unit>days?|weeks?|fortnights?|months?|years?)(?:'?s)?(?:\s+time)?\b")
def _in_units(match: re.Match[str], ref: Ref) -> Resolution | None:
    return _count(match["n"], match["unit"], 1, ref)


def _count(count_text: str, unit_word: str, direction: int, ref: Ref) -> Resolution | None:
    unit = _unit(unit_word)
    if _words(count_text).startswith("half"):
        half_unit = {"month": "half_month", "year": "half_year"}.get(unit)
        return None if half_unit is None else r.relative(ref, Quantity(1, 1), half_unit, direction)
    quantity = _quantity(count_text, unit_word)
    return None if quantity is None else r.relative(ref, quantity, unit, direction)


# -- months, dates, years -------------------------------------------------------------------

_PART_OF_PERIOD = {
    "early": "early", "beginning": "early", "start": "early", "mid": "mid", "middle": "mid", "late": "late", "end": "late",
}  # fmt: skip
_PERIOD_MODS = r"in|during|last|this|next|early|mid|late|(?:the\s+)?(?:beginning|start|middle|end)\s+of(?:\s+the)?"


@RULES.add(
    rf"\b(?:(?P<mod>{_PERIOD_MODS})[-\s]+)?(?P<month>{_MONTH})"
    rf"(?:,?\s+(?:of\s+)?(?P<year>{_YEAR})\b|(?!\s*(?:{_DAY_NUMBER}|\d)\b))"
)
def _month(match: re.Match[str], ref: Ref) -> Resolution | None:
    mod = _period_word(match["mod"])
    if not (mod or match["year"] or _after_since(match)):
        return None  # a bare "may" / "march" is too often not a month
    month = MONTHS[match["month"].lower().rstrip(".")]
    year = int(match["year"]) if match["year"] else None
    mode = mod if mod in ("last", "this", "next") else "plain"
    return r.month_of_year(ref, month, mode, year, _PART_OF_PERIOD.get(mod))


def _period_word(mod: str | None) -> str:
    """The word that matters in a modifier: "the end of the" → "end"."""
    words = [word for word in _words(mod or "").split() if word not in ("the", "of")]
    return words[0] if words else ""


def _after_since(match: re.Match[str]) -> bool:
    return match.string[max(0, match.start() - 6) : match.start()].lower() == "since "


@RULES.add(
    rf"\b(?:{_WEEKDAY},?\s+)?(?:(?P<month>{_MONTH})\s*(?P<day>{_DAY_NUMBER})|(?:the\s+)?(?P<day2>{_DAY_NUMBER})"
    rf"\s+(?:of\s+)?(?P<month2>{_MONTH}))(?:,?\s+(?P<year>{_YEAR}))?\b"
)
def _month_day(match: re.Match[str], ref: Ref) -> Resolution | None:
    month = MONTHS[(match["month"] or match["month2"]).lower().rstrip(".")]
    day = int(re.sub(r"\D", "", match["day"] or match["day2"]))
    return r.month_day(ref, month, day, int(match["year"]) if match["year"] else None)


@RULES.add(
    rf"\b(?:(?P<mod>in|during|back\s+in|the\s+year|early|mid|late|(?:the\s+)?(?:beginning|start|middle|end)\s+of)[-\s]+)?"
    rf"(?P<year>{_YEAR})\b(?![-/.:]\d|\s*(?:dollars|euros|yuan|people|times|km|miles))"
)
def _year(match: re.Match[str], ref: Ref) -> Resolution | None:
    mod = _period_word(match["mod"])
    if not (mod or _after_since(match)):
        return None  # a bare 4-digit number is as often an amount as a year
    year = int(match["year"])
    part = _PART_OF_PERIOD.get(mod)
    if part is not None:
        return r.year_part(ref, year, part)
    return r.year_offset(ref, year - ref.today.year)


# -- seasons and holidays -------------------------------------------------------------------

_SEASONS = {"spring": "spring", "summer": "summer", "autumn": "autumn", "fall": "autumn", "winter": "winter"}
_SEASON_MODES = {"last": "last", "this": "this", "next": "next", "this past": "last", "past": "last"}


@RULES.add(
    r"\b(?:(?P<mod>this\s+past|last|this|next|past|in\s+the|in|during\s+the|during|over\s+the)\s+)?"
    r"(?P<season>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?(?P<year>(?:19|20)\d{2}))?\b"
)
def _season(match: re.Match[str], ref: Ref) -> Resolution | None:
    mod = _words(match["mod"] or "")
    if not mod and not match["year"]:
        return None
    year = int(match["year"]) if match["year"] else None
    return r.season(ref, _SEASONS[match["season"].lower()], _SEASON_MODES.get(mod, "plain"), year)


_HOLIDAYS = {
    "christmas eve": (lambda year: date(year, 12, 24), 1),
    "christmas": (lambda year: date(year, 12, 25), 1),
    "new year's eve": (lambda year: date(year, 12, 31), 1),
    "new year's": (lambda year: date(year, 1, 1), 1),
    "valentine's": (lambda year: date(year, 2, 14), 1),
    "halloween": (lambda year: date(year, 10, 31), 1),
    "thanksgiving": (lambda year: nth_weekday(year, 11, 3, 4), 1),
}


@RULES.add(
    r"\b(?:(?P<mod>last|this|next)\s+)?(?P<name>christmas\s+eve|christmas|xmas|new\s+year'?s\s+eve|new\s+year'?s|"
    r"valentine'?s|halloween|thanksgiving)(?:\s+day)?(?:\s+(?P<year>(?:19|20)\d{2}))?\b"
)
def _holiday(match: re.Match[str], ref: Ref) -> Resolution | None:
    name = _words(match["name"]).replace("xmas", "christmas").replace("years", "year's").replace("valentines", "valentine's")
    first_day, length = _HOLIDAYS[name]
    mode = {"last": "last", "this": "this", "next": "next"}.get(_words(match["mod"] or ""), "plain")
    return r.holiday(ref, first_day, length, mode, int(match["year"]) if match["year"] else None)


# -- words that name a time the rules cannot place (an LLM may) ----------------------------

UNRESOLVED = re.compile(
    r"\b(?:recently|lately|the\s+other\s+(?:day|week|night)|(?:a\s+(?:little\s+)?while|some\s+time|a\s+bit|not\s+long)\s+(?:ago|back)"
    r"|(?:a\s+)?long\s+(?:time\s+)?ago|ages\s+ago|(?:many\s+|some\s+)?(?:years|months|weeks|days)\s+ago|back\s+then|back\s+in\s+the\s+day"
    r"|in\s+the\s+past|previously|last\s+time|earlier|(?:the\s+)?holidays?|holiday\s+season|vacation|spring\s+break|easter"
    r"|(?:chinese|lunar)\s+new\s+year|birthday|anniversary|childhood|when\s+i\s+was|as\s+a\s+(?:kid|child|teenager)"
    r"|in\s+(?:college|high\s+school|university)|that\s+(?:day|night|week|weekend|time|month|year)"
    r"|the\s+(?:day|night|week)\s+(?:before|after)|the\s+(?:next|previous|following)\s+(?:day|week|month)|these\s+days"
    r"|around\s+(?:then|that\s+time))\b",
    re.IGNORECASE | re.ASCII,
)
"""Time words with no fixed place on the calendar: "recently", "around the holidays", "back then"."""
