"""English time expressions in realistic sentences, read on Saturday 2024-10-26 21:26:20 in Shanghai."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memoryscope.timeparse import TimeMention, find_time_expressions, has_unresolved_time_word, resolve_time_range

SHANGHAI = ZoneInfo("Asia/Shanghai")
NEW_YORK = ZoneInfo("America/New_York")
UTC = ZoneInfo("UTC")
NOW = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)  # a Saturday


def at(text: str, zone: ZoneInfo = SHANGHAI) -> datetime:
    """`"2024-10-19"` or `"2024-10-19 15:30"` as an aware datetime in `zone`."""
    return datetime.fromisoformat(text).replace(tzinfo=zone)


def only(sentence: str, reference: datetime = NOW) -> TimeMention:
    mentions = find_time_expressions(sentence, reference, "en")
    if len(mentions) != 1:
        raise AssertionError(f"expected one mention in {sentence!r}, got {mentions}")
    return mentions[0]


# (sentence, matched text, start, end, granularity); end is exclusive.
CASES = [
    ("I went hiking last Saturday", "last Saturday", "2024-10-19", "2024-10-20", "day"),
    ("what did I do three weeks ago?", "three weeks ago", "2024-09-30", "2024-10-07", "week"),
    ("I had dinner with Ann yesterday", "yesterday", "2024-10-25", "2024-10-26", "day"),
    ("the day before yesterday I was sick", "the day before yesterday", "2024-10-24", "2024-10-25", "day"),
    ("what am I cooking today?", "today", "2024-10-26", "2024-10-27", "day"),
    ("I'm seeing a film tonight", "tonight", "2024-10-26 18:00", "2024-10-27 06:00", "range"),
    ("this morning I ran 5k", "this morning", "2024-10-26 05:00", "2024-10-26 12:00", "range"),
    ("we went dancing last night", "last night", "2024-10-25 18:00", "2024-10-26 06:00", "range"),
    ("the dentist is tomorrow", "tomorrow", "2024-10-27", "2024-10-28", "day"),
    ("the trip starts the day after tomorrow", "the day after tomorrow", "2024-10-28", "2024-10-29", "day"),
    ("I was busy last week", "last week", "2024-10-14", "2024-10-21", "week"),
    ("what did I do this week?", "this week", "2024-10-21", "2024-10-28", "week"),
    ("next week I fly to Paris", "next week", "2024-10-28", "2024-11-04", "week"),
    ("where did I go last weekend?", "last weekend", "2024-10-19", "2024-10-21", "range"),
    ("I repainted the fence this weekend", "this weekend", "2024-10-26", "2024-10-28", "range"),
    ("I moved house last month", "last month", "2024-09-01", "2024-10-01", "month"),
    ("my rent went up this month", "this month", "2024-10-01", "2024-11-01", "month"),
    ("I start a new job next month", "next month", "2024-11-01", "2024-12-01", "month"),
    ("I visited Japan last year", "last year", "2023-01-01", "2024-01-01", "year"),
    ("I want to run a marathon next year", "next year", "2025-01-01", "2026-01-01", "year"),
    ("I called my sister last Monday", "last Monday", "2024-10-14", "2024-10-15", "day"),
    ("I saw him last Thursday", "last Thursday", "2024-10-17", "2024-10-18", "day"),
    ("we play chess next Friday", "next Friday", "2024-11-01", "2024-11-02", "day"),
    ("what did I eat on Saturday?", "Saturday", "2024-10-26", "2024-10-27", "day"),
    ("on Tuesday I fixed the bike", "Tuesday", "2024-10-22", "2024-10-23", "day"),
    ("this past Saturday we had a party", "this past Saturday", "2024-10-19", "2024-10-20", "day"),
    ("I saw Tom a couple of days ago", "a couple of days ago", "2024-10-23", "2024-10-25", "range"),
    ("I bought shoes a few days ago", "a few days ago", "2024-10-21", "2024-10-25", "range"),
    ("I got a haircut 3 days ago", "3 days ago", "2024-10-23", "2024-10-24", "day"),
    ("I hurt my knee twenty-one days ago", "twenty-one days ago", "2024-10-05", "2024-10-06", "day"),
    ("we adopted a cat a month ago", "a month ago", "2024-09-01", "2024-10-01", "month"),
    ("half a year ago I quit smoking", "half a year ago", "2024-04-01", "2024-05-01", "month"),
    ("two years ago I lived in Berlin", "two years ago", "2022-01-01", "2023-01-01", "year"),
    ("two hours ago I ate a sandwich", "two hours ago", "2024-10-26 19:00", "2024-10-26 20:00", "hour"),
    ("I'll call the bank back in 5 days", "in 5 days", "2024-10-31", "2024-11-01", "day"),
    ("I went to Rome in March", "in March", "2024-03-01", "2024-04-01", "month"),
    ("we met last November", "last November", "2023-11-01", "2023-12-01", "month"),
    ("I graduated in March 2023", "in March 2023", "2023-03-01", "2023-04-01", "month"),
    ("early March I was in Oslo", "early March", "2024-03-01", "2024-03-11", "range"),
    ("my exam was on May 7", "May 7", "2024-05-07", "2024-05-08", "day"),
    ("I passed my driving test May 7th", "May 7th", "2024-05-07", "2024-05-08", "day"),
    ("what happened on December 3rd?", "December 3rd", "2023-12-03", "2023-12-04", "day"),
    ("my niece was born 7 May 2023", "7 May 2023", "2023-05-07", "2023-05-08", "day"),
    ("the invoice is dated 2023-05-07", "2023-05-07", "2023-05-07", "2023-05-08", "day"),
    ("the form says 05/07/2023", "05/07/2023", "2023-05-07", "2023-05-08", "day"),
    ("we moved here in 2022", "in 2022", "2022-01-01", "2023-01-01", "year"),
    ("I met her in late 2022", "late 2022", "2022-09-01", "2023-01-01", "range"),
    ("we swam a lot last summer", "last summer", "2024-06-01", "2024-09-01", "range"),
    ("I plan to ski this winter", "this winter", "2024-12-01", "2025-03-01", "range"),
    ("I was sick earlier this week", "earlier this week", "2024-10-21", "2024-10-26", "range"),
    ("what did I do over the weekend?", "over the weekend", "2024-10-26", "2024-10-28", "range"),
    ("at 3pm yesterday I called mom", "3pm yesterday", "2024-10-25 15:00", "2024-10-25 16:00", "hour"),
    ("yesterday at 9:30 am I had a meeting", "yesterday at 9:30 am", "2024-10-25 09:30", "2024-10-25 09:31", "minute"),
    ("yesterday afternoon I took a nap", "yesterday afternoon", "2024-10-25 12:00", "2024-10-25 18:00", "range"),
    ("Saturday night we went out", "Saturday night", "2024-10-26 18:00", "2024-10-27 06:00", "range"),
    ("in the past 3 days I slept badly", "the past 3 days", "2024-10-23", "2024-10-27", "range"),
    ("the week before last I was in Rome", "the week before last", "2024-10-07", "2024-10-14", "week"),
    ("I've been learning piano since March", "March", "2024-03-01", "2024-10-27", "range"),
    ("what did I get for Christmas?", "Christmas", "2023-12-25", "2023-12-26", "day"),
]


@pytest.mark.parametrize(("sentence", "text", "start", "end", "granularity"), CASES, ids=[case[0] for case in CASES])
def test_expression_in_sentence(sentence: str, text: str, start: str, end: str, granularity: str) -> None:
    mention = only(sentence)
    assert (mention.text, mention.start, mention.end, mention.granularity) == (text, at(start), at(end), granularity)
    assert sentence[mention.span[0] : mention.span[1]] == text
    assert mention.start.tzinfo == SHANGHAI and mention.end.tzinfo == SHANGHAI


PLANS = [
    ("I'll see her on Friday", "Friday", "2024-11-01", "2024-11-02"),
    ("we are going to Japan in March", "in March", "2025-03-01", "2025-04-01"),
    ("my dentist appointment will be on Nov 3", "Nov 3", "2024-11-03", "2024-11-04"),
    ("I'm training for the half marathon at the end of November.", "the end of November", "2024-11-21", "2024-12-01"),
    ("I will go hiking over the weekend", "over the weekend", "2024-10-26", "2024-10-28"),
    ("I'm going to Harbin this winter", "this winter", "2024-12-01", "2025-03-01"),
]


@pytest.mark.parametrize(("sentence", "text", "start", "end"), PLANS, ids=[case[0] for case in PLANS])
def test_plans_read_plain_dates_forward(sentence: str, text: str, start: str, end: str) -> None:
    """With "will" / "going to" / "'ll" a plain weekday, month or date is the next one, not the last."""
    mention = only(sentence)
    assert (mention.text, mention.start, mention.end) == (text, at(start), at(end))


NO_TIME = [
    "What is my favourite food?",
    "I may go hiking with Ann",
    "we marched with the band",
    "I usually wake up at 7am",
    "every Saturday I swim in the lake",
    "I paid 2000 dollars for the bike",
    "I ran 5 km in 30 minutes",
    "I love the morning light",
    "recently I bought a car",
]


@pytest.mark.parametrize("sentence", NO_TIME)
def test_sentence_without_a_placeable_time_gives_nothing(sentence: str) -> None:
    assert find_time_expressions(sentence, NOW) == []
    assert resolve_time_range(sentence, NOW) is None


def test_several_mentions_come_in_text_order_and_range_covers_them() -> None:
    sentence = "I flew out last Monday and came back yesterday"
    assert [mention.text for mention in find_time_expressions(sentence, NOW)] == ["last Monday", "yesterday"]
    assert resolve_time_range(sentence, NOW) == (at("2024-10-14"), at("2024-10-26"))


def test_english_inside_chinese_text() -> None:
    assert resolve_time_range("我last week去了北京", NOW) == (at("2024-10-14"), at("2024-10-21"))


@pytest.mark.parametrize(
    ("sentence", "unresolved"),
    [
        ("what did I do around the holidays?", True),
        ("I bought a car recently", True),
        ("many years ago I lived in Rome", True),
        ("back then I had a dog", True),
        ("I bought shoes a few days ago", False),
        ("I was sick earlier this week", False),
        ("what is my favourite food?", False),
        ("I went hiking last Saturday", False),
    ],
)
def test_unresolved_time_words(sentence: str, unresolved: bool) -> None:
    assert has_unresolved_time_word(sentence) is unresolved


def test_unknown_language_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown language"):
        find_time_expressions("yesterday", NOW, "fr")


# -- month ends, year boundaries, DST -----------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "reference", "start", "end"),
    [
        ("a month ago", "2024-03-31 09:00", "2024-02-01", "2024-03-01"),  # Mar 31 - 1 month = Feb 29
        ("a month ago", "2023-03-31 09:00", "2023-02-01", "2023-03-01"),  # ... = Feb 28
        ("in a month", "2023-01-31 09:00", "2023-02-01", "2023-03-01"),
        ("on Feb 29", "2025-01-31 09:00", "2024-02-29", "2024-03-01"),  # the latest Feb 29 there was
        ("yesterday", "2024-03-01 09:00", "2024-02-29", "2024-03-01"),
        ("last month", "2024-03-31 09:00", "2024-02-01", "2024-03-01"),
    ],
)
def test_month_lengths(sentence: str, reference: str, start: str, end: str) -> None:
    assert resolve_time_range(sentence, at(reference, UTC)) == (at(start, UTC), at(end, UTC))


@pytest.mark.parametrize(
    ("sentence", "start", "end"),
    [
        ("yesterday", "2025-01-01", "2025-01-02"),
        ("last week", "2024-12-23", "2024-12-30"),
        ("this week", "2024-12-30", "2025-01-06"),  # weeks start on Monday, across the new year
        ("last Saturday", "2024-12-28", "2024-12-29"),
        ("last month", "2024-12-01", "2025-01-01"),
        ("last December", "2024-12-01", "2025-01-01"),
        ("last year", "2024-01-01", "2025-01-01"),
        ("in March", "2024-03-01", "2024-04-01"),  # a month not reached yet this year is last year's
        ("a month ago", "2024-12-01", "2025-01-01"),
        ("last winter", "2023-12-01", "2024-03-01"),  # the winter now running has not ended
    ],
)
def test_year_boundary(sentence: str, start: str, end: str) -> None:
    thursday = at("2025-01-02 09:00", UTC)
    assert resolve_time_range(sentence, thursday) == (at(start, UTC), at(end, UTC))


def test_day_across_spring_forward_is_23_hours() -> None:
    start, end = resolve_time_range("what did I do yesterday?", datetime(2024, 3, 11, 10, tzinfo=NEW_YORK)) or (None, None)
    assert (start, end) == (datetime(2024, 3, 10, tzinfo=NEW_YORK), datetime(2024, 3, 11, tzinfo=NEW_YORK))
    assert start is not None and end is not None
    assert start.utcoffset() == timedelta(hours=-5) and end.utcoffset() == timedelta(hours=-4)
    assert end.timestamp() - start.timestamp() == 23 * 3600


def test_day_across_fall_back_is_25_hours() -> None:
    start, end = resolve_time_range("yesterday", datetime(2024, 11, 4, 10, tzinfo=NEW_YORK)) or (None, None)
    assert start is not None and end is not None
    assert (start.isoformat(), end.isoformat()) == ("2024-11-03T00:00:00-04:00", "2024-11-04T00:00:00-05:00")
    assert end.timestamp() - start.timestamp() == 25 * 3600


def test_week_across_dst_starts_and_ends_at_local_midnight() -> None:
    start, end = resolve_time_range("last week", datetime(2024, 3, 11, 10, tzinfo=NEW_YORK)) or (None, None)
    assert start is not None and end is not None
    assert (start.isoformat(), end.isoformat()) == ("2024-03-04T00:00:00-05:00", "2024-03-11T00:00:00-04:00")


def test_hours_ago_counts_elapsed_time_across_dst() -> None:
    mention = only("2 hours ago", datetime(2024, 3, 10, 4, 30, tzinfo=NEW_YORK))  # 04:30 EDT = 01:30 EST + 2h
    assert (mention.start.isoformat(), mention.end.isoformat()) == ("2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00")
    assert mention.end.timestamp() - mention.start.timestamp() == 3600


def test_clock_time_inside_the_spring_forward_gap_moves_past_it() -> None:
    mention = only("at 2:30am on March 10, 2024", datetime(2024, 3, 11, 10, tzinfo=NEW_YORK))
    assert mention.start.isoformat() == "2024-03-10T03:30:00-04:00"
