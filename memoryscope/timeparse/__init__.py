"""Time expressions in English and Chinese, resolved against a reference moment, by rules.

    >>> from datetime import datetime
    >>> from zoneinfo import ZoneInfo
    >>> now = datetime(2024, 10, 26, 21, 26, 20, tzinfo=ZoneInfo("Asia/Shanghai"))  # a Saturday
    >>> [m.text for m in find_time_expressions("I went hiking last Saturday", now)]
    ['last Saturday']
    >>> resolve_time_range("我上周六去爬山了", now)[0].isoformat()
    '2024-10-19T00:00:00+08:00'

Every result is a half-open interval `[start, end)` of aware datetimes in the reference's zone
("yesterday" is yesterday 00:00 to today 00:00). Days are computed as dates and only then given
midnight in the zone, so a day across a DST change is 23 or 25 hours long. Weeks start on
Monday. How ambiguous expressions are read (a plain "Saturday" is the latest one on or before
the reference; "last Saturday" is the one of the previous week; "three weeks ago" is the whole
week containing the day 21 days back) is written down in `memoryscope.timeparse.resolvers`.

Vague words ("recently", "around the holidays", 前阵子) resolve to nothing;
`has_unresolved_time_word` tells whether a text has one, so a caller can decide to ask an LLM.

The rules are regexes compiled at import; a typical query is scanned in well under a
millisecond.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from memoryscope.timeparse import chinese, english, numeric
from memoryscope.timeparse.engine import Granularity, RuleSet, TimeMention, scan

__all__ = ["TimeMention", "Granularity", "find_time_expressions", "resolve_time_range", "has_unresolved_time_word"]

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ENGLISH: tuple[RuleSet, ...] = (numeric.RULES, english.RULES)
_CHINESE: tuple[RuleSet, ...] = (numeric.RULES, chinese.RULES)
_BOTH: tuple[RuleSet, ...] = (numeric.RULES, english.RULES, chinese.RULES)


def _rule_sets(text: str, language: str | None) -> tuple[RuleSet, ...]:
    if language == "en":
        return _ENGLISH
    if language in ("zh", "cn"):
        return _CHINESE
    if language is not None:
        raise ValueError(f"unknown language {language!r}: use 'en', 'zh' or None (detect)")
    # English words turn up in Chinese text ("我last week去了"), so Chinese text gets both.
    return _BOTH if _CJK.search(text) else _ENGLISH


def find_time_expressions(text: str, reference: datetime, language: str | None = None) -> list[TimeMention]:
    """Every time expression in `text` the rules can place, in text order.

    `reference` is when the text was said (aware; results are in its zone). `language` is
    "en", "zh", or None to decide from the text (any CJK character → Chinese and English rules).
    """
    return scan(text, reference, _rule_sets(text, language))


def resolve_time_range(text: str, reference: datetime, language: str | None = None) -> tuple[datetime, datetime] | None:
    """The smallest `[start, end)` covering every time expression in `text`; None when there is none."""
    mentions = find_time_expressions(text, reference, language)
    if not mentions:
        return None
    return min(mention.start for mention in mentions), max(mention.end for mention in mentions)


_PLACEHOLDER_REFERENCE = datetime(2024, 6, 15, 12, tzinfo=timezone.utc)


def has_unresolved_time_word(text: str, language: str | None = None) -> bool:
    """Whether `text` has a time word the rules cannot place ("recently", "around the holidays",
    最近, 前阵子), outside every expression they did place ("最近三天" is placed)."""
    patterns = []
    if language in (None, "en"):
        patterns.append(english.UNRESOLVED)
    if language in ("zh", "cn") or (language is None and _CJK.search(text)):
        patterns.append(chinese.UNRESOLVED)
    vague = [match.span() for pattern in patterns for match in pattern.finditer(text)]
    if not vague:
        return False
    # Which words were placed does not depend on the reference day, only on the text.
    placed = [mention.span for mention in find_time_expressions(text, _PLACEHOLDER_REFERENCE, language)]
    return any(not any(first <= start and end <= last for first, last in placed) for start, end in vague)
