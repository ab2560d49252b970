"""Chinese time expressions in realistic sentences, read on Saturday 2024-10-26 21:26:20 in Shanghai."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from memoryscope.timeparse import find_time_expressions, has_unresolved_time_word, resolve_time_range

SHANGHAI = ZoneInfo("Asia/Shanghai")
UTC = ZoneInfo("UTC")
NOW = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)  # 星期六


def at(text: str, zone: ZoneInfo = SHANGHAI) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


# (sentence, matched text, start, end, granularity); end is exclusive.
CASES = [
    ("我上周六去爬山了", "上周六", "2024-10-19", "2024-10-20", "day"),
    ("我今天去了公园", "今天", "2024-10-26", "2024-10-27", "day"),
    ("今晚吃火锅", "今晚", "2024-10-26 18:00", "2024-10-27 06:00", "range"),
    ("昨天下雨了", "昨天", "2024-10-25", "2024-10-26", "day"),
    ("前天我去了医院", "前天", "2024-10-24", "2024-10-25", "day"),
    ("大前天我们吵了一架", "大前天", "2024-10-23", "2024-10-24", "day"),
    ("明天要开会", "明天", "2024-10-27", "2024-10-28", "day"),
    ("后天出发去北京", "后天", "2024-10-28", "2024-10-29", "day"),
    ("我上周去了上海", "上周", "2024-10-14", "2024-10-21", "week"),
    ("上星期买了一台电脑", "上星期", "2024-10-14", "2024-10-21", "week"),
    ("上个礼拜见过他", "上个礼拜", "2024-10-14", "2024-10-21", "week"),
    ("本周的计划是什么", "本周", "2024-10-21", "2024-10-28", "week"),
    ("这周有点忙", "这周", "2024-10-21", "2024-10-28", "week"),
    ("下周见", "下周", "2024-10-28", "2024-11-04", "week"),
    ("上星期六我在家", "上星期六", "2024-10-19", "2024-10-20", "day"),
    ("这周日去看电影", "这周日", "2024-10-27", "2024-10-28", "day"),
    ("星期天我去了教堂", "星期天", "2024-10-20", "2024-10-21", "day"),
    ("周末去哪儿玩了", "周末", "2024-10-26", "2024-10-28", "range"),
    ("上周末我们去露营", "上周末", "2024-10-19", "2024-10-21", "range"),
    ("上个月搬家了", "上个月", "2024-09-01", "2024-10-01", "month"),
    ("这个月花了很多钱", "这个月", "2024-10-01", "2024-11-01", "month"),
    ("下个月要考试", "下个月", "2024-11-01", "2024-12-01", "month"),
    ("去年去了日本", "去年", "2023-01-01", "2024-01-01", "year"),
    ("今年的目标是什么", "今年", "2024-01-01", "2025-01-01", "year"),
    ("明年打算结婚", "明年", "2025-01-01", "2026-01-01", "year"),
    ("前年我在深圳工作", "前年", "2022-01-01", "2023-01-01", "year"),
    ("三周前我感冒了", "三周前", "2024-09-30", "2024-10-07", "week"),
    ("这本书是三个星期前买的", "三个星期前", "2024-09-30", "2024-10-07", "week"),
    ("两天前见过他", "两天前", "2024-10-24", "2024-10-25", "day"),
    ("5天前下过雨", "5天前", "2024-10-21", "2024-10-22", "day"),
    ("十五天前体检了", "十五天前", "2024-10-11", "2024-10-12", "day"),
    ("半个月前我去了杭州", "半个月前", "2024-10-07", "2024-10-14", "week"),
    ("一个月前换了工作", "一个月前", "2024-09-01", "2024-10-01", "month"),
    ("3小时前吃过饭", "3小时前", "2024-10-26 18:00", "2024-10-26 19:00", "hour"),
    ("两三天前收到了快递", "两三天前", "2024-10-23", "2024-10-25", "range"),
    ("前几天下了场雨", "前几天", "2024-10-21", "2024-10-26", "range"),
    ("最近三天都在加班", "最近三天", "2024-10-23", "2024-10-27", "range"),
    ("去年三月去了云南", "去年三月", "2023-03-01", "2023-04-01", "month"),
    ("三月份去了日本", "三月份", "2024-03-01", "2024-04-01", "month"),
    ("我3月去过西安", "3月", "2024-03-01", "2024-04-01", "month"),
    ("5月7日那天我们见了面", "5月7日", "2024-05-07", "2024-05-08", "day"),
    ("5月7号我交了论文", "5月7号", "2024-05-07", "2024-05-08", "day"),
    ("我是2023年5月7日搬的家", "2023年5月7日", "2023-05-07", "2023-05-08", "day"),
    ("2023年我在读研", "2023年", "2023-01-01", "2024-01-01", "year"),
    ("上个月5号交了房租", "上个月5号", "2024-09-05", "2024-09-06", "day"),
    ("昨晚睡得很晚", "昨晚", "2024-10-25 18:00", "2024-10-26 06:00", "range"),
    ("今天早上喝了咖啡", "今天早上", "2024-10-26 05:00", "2024-10-26 12:00", "range"),
    ("下午3点开了个会", "下午3点", "2024-10-26 15:00", "2024-10-26 16:00", "hour"),
    ("昨天上午10点去了银行", "昨天上午10点", "2024-10-25 10:00", "2024-10-25 11:00", "hour"),
    ("昨天晚上8点半看了电影", "昨天晚上8点半", "2024-10-25 20:30", "2024-10-25 20:31", "minute"),
    ("去年夏天去了海边", "去年夏天", "2023-06-01", "2023-09-01", "range"),
    ("国庆节去哪了", "国庆节", "2024-10-01", "2024-10-08", "range"),
    ("去年年底换了手机", "去年年底", "2023-09-01", "2024-01-01", "range"),
    ("我上周一起吃饭的朋友叫什么", "上周", "2024-10-14", "2024-10-21", "week"),  # 一起 is "together"
    ("三月以来我一直在学吉他", "三月", "2024-03-01", "2024-10-27", "range"),
    ("自从去年以来我胖了五斤", "去年", "2023-01-01", "2024-10-27", "range"),
    ("昨天晚上12点才到家", "昨天晚上12点", "2024-10-26 00:00", "2024-10-26 01:00", "hour"),  # midnight
    ("下下周要出差", "下下周", "2024-11-04", "2024-11-11", "week"),
    ("上周三下午我们开了会", "上周三下午", "2024-10-16 12:00", "2024-10-16 18:00", "range"),
    ("二〇二三年五月七日那天下了雨", "二〇二三年五月七日", "2023-05-07", "2023-05-08", "day"),
]


@pytest.mark.parametrize(("sentence", "text", "start", "end", "granularity"), CASES, ids=[case[0] for case in CASES])
def test_expression_in_sentence(sentence: str, text: str, start: str, end: str, granularity: str) -> None:
    mentions = find_time_expressions(sentence, NOW)
    assert len(mentions) == 1, mentions
    mention = mentions[0]
    assert (mention.text, mention.start, mention.end, mention.granularity) == (text, at(start), at(end), granularity)
    assert sentence[mention.span[0] : mention.span[1]] == text
    assert find_time_expressions(sentence, NOW, "zh") == mentions


PLANS = [
    ("我打算三月去日本", "三月", "2025-03-01", "2025-04-01"),
    ("我准备周五去看电影", "周五", "2024-11-01", "2024-11-02"),
    ("我计划5号出发", "5号", "2024-11-05", "2024-11-06"),
]


@pytest.mark.parametrize(("sentence", "text", "start", "end"), PLANS, ids=[case[0] for case in PLANS])
def test_plans_read_plain_dates_forward(sentence: str, text: str, start: str, end: str) -> None:
    """With 打算 / 准备 / 计划 a plain weekday, month or day of the month is the next one."""
    [mention] = find_time_expressions(sentence, NOW)
    assert (mention.text, mention.start, mention.end) == (text, at(start), at(end))


def test_bare_day_of_month_is_the_latest_one() -> None:
    [mention] = find_time_expressions("我28号交了房租", NOW)
    assert (mention.start, mention.end) == (at("2024-09-28"), at("2024-09-29"))


NO_TIME = [
    "我喜欢吃火锅",
    "晚上月亮很圆",  # 上月 inside 晚上月亮
    "这周围很安静",  # 这周 inside 这周围
    "我有一点累",  # 一点 is "a bit"
    "每周六游泳",  # a habit
    "一周一次",
    "我跑了3点5公里",
    "他是我最好的朋友",
]


@pytest.mark.parametrize("sentence", NO_TIME)
def test_sentence_without_a_placeable_time_gives_nothing(sentence: str) -> None:
    assert find_time_expressions(sentence, NOW) == []


@pytest.mark.parametrize(
    ("sentence", "unresolved"),
    [
        ("最近怎么样", True),
        ("前阵子我去了杭州", True),
        ("过年的时候你回家了吗", True),
        ("小时候我住在乡下", True),
        ("最近三天都在加班", False),  # 最近 is part of a placed expression
        ("三天以前我去了医院", False),
        ("我喜欢吃火锅", False),
    ],
)
def test_unresolved_time_words(sentence: str, unresolved: bool) -> None:
    assert has_unresolved_time_word(sentence) is unresolved


def test_chinese_rules_are_off_for_english_only() -> None:
    assert find_time_expressions("我昨天去了公园", NOW, "en") == []


@pytest.mark.parametrize(
    ("sentence", "start", "end"),
    [
        ("昨天", "2025-01-01", "2025-01-02"),
        ("上周六", "2024-12-28", "2024-12-29"),
        ("本周", "2024-12-30", "2025-01-06"),
        ("上个月", "2024-12-01", "2025-01-01"),
        ("去年", "2024-01-01", "2025-01-01"),
        ("三月", "2024-03-01", "2024-04-01"),
        ("12月25日", "2024-12-25", "2024-12-26"),
        ("一个月前", "2024-12-01", "2025-01-01"),
    ],
)
def test_year_boundary(sentence: str, start: str, end: str) -> None:
    thursday = at("2025-01-02 09:00", UTC)
    assert resolve_time_range(sentence, thursday) == (at(start, UTC), at(end, UTC))


def test_month_end_and_leap_day() -> None:
    march_31 = at("2024-03-31 09:00", UTC)
    assert resolve_time_range("一个月前", march_31) == (at("2024-02-01", UTC), at("2024-03-01", UTC))
    assert resolve_time_range("上个月30号", march_31) is None  # February has no 30th
    assert resolve_time_range("2月29号", at("2025-01-31 09:00", UTC)) == (at("2024-02-29", UTC), at("2024-03-01", UTC))
