"""Chinese time expressions. Conventions are those of `resolvers`; every regex is compiled at import.

Chinese has no spaces, so the rules guard against words that merely contain a time word:
上/下 that end another word (晚上月亮, 一下周末), 这周围, 这个月亮, 周一 inside 一周一次, 每周六
(a habit). A bare part of the day (下午) counts only next to a day (昨天下午), and an hour in
Chinese numerals without 钟/分/半 only next to a day or a part of the day (一点 is also "a bit").
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from memoryscope.timeparse import resolvers as r
from memoryscope.timeparse.calendar_math import add_months, days_interval
from memoryscope.timeparse.engine import Clock, Ref, Resolution, RuleSet
from memoryscope.timeparse.numbers import ZH_QUANTITY, Quantity, chinese_number, chinese_quantity

__all__ = ["RULES", "UNRESOLVED"]

RULES = RuleSet()

_NUMERAL = "零〇○一二两三四五六七八九十百千"
# Characters that end a word in which 上/下 is not "last/next": 晚上, 马上, 一下, 楼下 ...
_NOT_AFTER = r"(?<![晚早马路身网线楼天世加以桌墙床地手底剩留私乡眼当一])"
_MONTH_NUMBER = r"(?:1[0-2]|0?[1-9]|十[一二]|[一二三四五六七八九十])"
_DAY_NUMBER = r"(?:3[01]|[12]\d|0?[1-9]|三十一?|二十[一二三四五六七八九]?|十[一二三四五六七八九]?|[一二三四五六七八九])"
_YEAR_WORDS = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2, "大后年": 3}
_YEAR_PREFIX = r"(?P<y>大前年|前年|去年|今年|明年|大后年|后年|(?P<yn>[12]\d{3}|[一二][零〇○一二三四五六七八九]{3})年)"
_WEEK_MODS = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
_WEEK_MOD = r"(?P<mod>上上|上|这|本|下下|下)一?个?"
_UNIT = r"(?P<unit>个?(?:小时|钟头)|分钟|天|日|个?(?:星期|礼拜)|周|个?月|年)"
_UNITS = {"小时": "hour", "钟头": "hour", "分钟": "minute", "天": "day", "日": "day", "星期": "week", "礼拜": "week",
          "周": "week", "月": "month", "年": "year"}  # fmt: skip


def _year(match: re.Match[str], ref: Ref) -> int | None:
    """The year a `_YEAR_PREFIX` names, or None when there was none (or it is no number)."""
    if match["y"] is None:
        return None
    if match["yn"] is not None:
        return chinese_number(match["yn"])
    return ref.today.year + _YEAR_WORDS[match["y"]]


def _number(text: str) -> int:
    value = chinese_number(text)
    if value is None:  # the regexes only let numbers through
        raise ValueError(f"not a number: {text!r}")
    return value


# -- days around today ----------------------------------------------------------------------

_DAY_WORDS = {"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "昨儿": -1, "昨儿个": -1, "今天": 0, "今日": 0, "今儿": 0,
              "今儿个": 0, "明天": 1, "明日": 1, "明儿": 1, "明儿个": 1, "后天": 2, "大后天": 3}  # fmt: skip


@RULES.add(r"大前天|前天|昨天|昨日|昨儿个?|今天|今日|今儿个?|明天|明日|明儿个?|大后天|后天")
def _relative_day(match: re.Match[str], ref: Ref) -> Resolution:
    return ref.day(_DAY_WORDS[match[0]])


_DAY_PARTS = {"今早": (0, "morning"), "今晨": (0, "morning"), "今晚": (0, "night"), "今夜": (0, "night"),
              "昨晚": (-1, "night"), "昨夜": (-1, "night"), "前晚": (-2, "night"), "明早": (1, "morning"),
              "明晚": (1, "night")}  # fmt: skip


@RULES.add(r"今早|今晨|今晚|今夜|昨晚|昨夜|前晚|明早|明晚")
def _part_of_near_day(match: re.Match[str], ref: Ref) -> Resolution:
    offset, part = _DAY_PARTS[match[0]]
    return Resolution.waiting(Clock(part=part), True).on_day(ref.today + timedelta(days=offset), ref.zone)


_PARTS = {"凌晨": "early_morning", "清晨": "morning", "早上": "morning", "早晨": "morning", "上午": "morning",
          "中午": "noon", "下午": "afternoon", "傍晚": "dusk", "晚上": "night", "夜里": "night", "夜间": "night"}  # fmt: skip
_PART = "(?P<part>" + "|".join(_PARTS) + ")"
_HOUR = r"(?P<h>2[0-4]|1\d|0?\d|二十[一二三四]?|十[一二]?|[零一二两三四五六七八九])"
_MINUTE = (
    r"(?:(?P<half>半)|(?P<quarter>一刻|三刻)|(?P<m>[0-5]\d|[一二三四五]?十[一二三四五六七八九]?|零?[一二三四五六七八九])分"
    r"|(?P<m2>[0-5]\d)(?!\d))"
)


@RULES.add(rf"{_PART}?{_HOUR}(?P<unit>点钟?|點|时)(?:{_MINUTE})?(?![0-9０-９{_NUMERAL}])")
def _clock(match: re.Match[str], ref: Ref) -> Resolution | None:
    part = _PARTS[match["part"]] if match["part"] else None
    hour = _number(match["h"])
    minute = None
    if match["half"]:
        minute = 30
    elif match["quarter"]:
        minute = 15 if match["quarter"] == "一刻" else 45
    elif match["m"] or match["m2"]:
        minute = _number(match["m"] or match["m2"])
    spoken = not match["h"].isdigit()
    precise = part is not None or match["unit"] == "点钟" or minute is not None
    if spoken and not precise and match["h"] in ("一", "两", "二"):
        return None  # 一点 / 两点 alone are "a bit" / "two points" as often as hours
    if match["unit"] == "时" and not (part or minute is not None or match["h"].isdigit()):
        return None
    # Alone (no day next to it) an hour counts only when the half of the day is known.
    return Resolution.waiting(Clock(hour, minute, part), standalone=part is not None or hour >= 13)


@RULES.add(_PART)
def _part_of_day(match: re.Match[str], ref: Ref) -> Resolution:
    return Resolution.waiting(Clock(part=_PARTS[match["part"]]), standalone=False)


# -- weeks, weekends, weekdays --------------------------------------------------------------


@RULES.add(rf"{_NOT_AFTER}{_WEEK_MOD}(?:周|星期|礼拜)(?![围边到全年期岁刊报会])")
def _week(match: re.Match[str], ref: Ref) -> Resolution:
    return r.week(ref, _WEEK_MODS[match["mod"]])


@RULES.add(rf"{_NOT_AFTER}(?:{_WEEK_MOD})?(?:周末|星期末)")
def _weekend(match: re.Match[str], ref: Ref) -> Resolution:
    if match["mod"] is None:
        return r.the_weekend(ref)
    return r.weekend(ref, _WEEK_MODS[match["mod"]])


_WEEKDAY_NUMBERS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "七": 6}


@RULES.add(rf"(?:{_NOT_AFTER}{_WEEK_MOD}|(?<![{_NUMERAL}几每0-9]))(?:周|星期|礼拜)(?P<d>一(?!起)|[二三四五六日天1-7])")
def _weekday(match: re.Match[str], ref: Ref) -> Resolution:
    day_of_week = int(match["d"]) - 1 if match["d"].isdigit() else _WEEKDAY_NUMBERS[match["d"]]
    if match["mod"] is None:
        return r.weekday(ref, day_of_week, "plain")
    return r.weekday(ref, day_of_week, "week", _WEEK_MODS[match["mod"]])


# -- months and years -----------------------------------------------------------------------

_MONTH_PARTS = {"初": "early", "上旬": "early", "中旬": "mid", "下旬": "late", "底": "late", "末": "late"}
_MONTH_PART = r"(?P<part>初|上旬|中旬|下旬|底|末)"


@RULES.add(rf"{_NOT_AFTER}{_WEEK_MOD}月份?(?:(?P<d>{_DAY_NUMBER})[日号]|{_MONTH_PART})?(?![亮光球饼台])")
def _relative_month(match: re.Match[str], ref: Ref) -> Resolution | None:
    first = add_months(ref.today.replace(day=1), _WEEK_MODS[match["mod"]])
    if match["d"]:
        return r.month_day(ref, first.month, _number(match["d"]), first.year)
    if match["part"]:
        return r.month_part(ref, first.year, first.month, _MONTH_PARTS[match["part"]])
    return r.month_offset(ref, _WEEK_MODS[match["mod"]])


@RULES.add(
    rf"(?<![0-9０-９{_NUMERAL}])(?:{_YEAR_PREFIX})?(?P<m>{_MONTH_NUMBER})月份?(?:(?P<d>{_DAY_NUMBER})[日号]|{_MONTH_PART})?"
)
def _month(match: re.Match[str], ref: Ref) -> Resolution | None:
    year = _year(match, ref)
    if match["y"] is not None and year is None:
        return None
    month = _number(match["m"])
    if match["d"]:
        return r.month_day(ref, month, _number(match["d"]), year)
    part = _MONTH_PARTS[match["part"]] if match["part"] else None
    return r.month_of_year(ref, month, "plain", year, part)


@RULES.add(rf"(?<![0-9０-９{_NUMERAL}月周期拜])(?P<d>{_DAY_NUMBER})号(?![线楼房床门车位台机码院球])")
def _day_of_month(match: re.Match[str], ref: Ref) -> Resolution | None:
    day = _number(match["d"])
    first = ref.today.replace(day=1)
    # This month if the day has come, else the last month that has it (for plans: the next one).
    for step in range(0, 3):
        month = add_months(first, step if ref.ahead else -step)
        candidate = r.month_day(ref, month.month, day, month.year)
        if candidate is None or candidate.day is None:
            continue
        if (candidate.day >= ref.today) if ref.ahead else (candidate.day <= ref.today):
            return candidate
    return None


# Not 2000年前 ("2000 years ago"), 1990年代 (a decade), 2023年级 (a class).
@RULES.add(rf"{_YEAR_PREFIX}(?![代级内里半]|前|后|之前|之后|以前|以后)")
def _year_rule(match: re.Match[str], ref: Ref) -> Resolution | None:
    year = _year(match, ref)
    return None if year is None else r.year_offset(ref, year - ref.today.year)


@RULES.add(rf"{_YEAR_PREFIX}年?(?P<part>初|底|末)")
def _year_part(match: re.Match[str], ref: Ref) -> Resolution | None:
    year = _year(match, ref)
    return None if year is None else r.year_part(ref, year, {"初": "early", "底": "late", "末": "late"}[match["part"]])


@RULES.add(rf"(?:{_YEAR_PREFIX})?(?P<half>上|下)半年")
def _half_year(match: re.Match[str], ref: Ref) -> Resolution | None:
    year = _year(match, ref) if match["y"] else ref.today.year
    if year is None:
        return None
    first = date(year, 1 if match["half"] == "上" else 7, 1)
    return Resolution(days_interval(first, add_months(first, 6) - timedelta(days=1), ref.zone), "range")


# -- counts of units ago / from now ---------------------------------------------------------


def _unit(text: str) -> str:
    return _UNITS[text.lstrip("个")]


@RULES.add(rf"(?<![0-9{_NUMERAL}])(?P<q>{ZH_QUANTITY}|半)个?(?P<half1>半)?{_UNIT}(?P<half>半)?(?P<dir>以前|之前|前|以后|之后|后)")
def _units_ago(match: re.Match[str], ref: Ref) -> Resolution | None:
    unit = _unit(match["unit"])
    sign = -1 if "前" in match["dir"] else 1
    if match["q"] == "半":
        half_unit = {"month": "half_month", "year": "half_year"}.get(unit)
        return None if half_unit is None else r.relative(ref, Quantity(1, 1), half_unit, sign)
    quantity = chinese_quantity(match["q"])
    if quantity is None:
        return None
    if match["half"] or match["half1"]:  # 一个半月前 / 一年半前: 1.5 units, counted in half units
        if unit == "month" and quantity.exact:
            return r.relative(ref, Quantity(2 * quantity.low + 1, 2 * quantity.low + 1), "half_month", sign)
        if unit == "year" and quantity.exact:
            return r.relative(ref, Quantity(2 * quantity.low + 1, 2 * quantity.low + 1), "half_year", sign)
        return None
    return r.relative(ref, quantity, unit, sign)


@RULES.add(r"前(?P<q>几|两|些)(?:天|日子)")
def _days_back(match: re.Match[str], ref: Ref) -> Resolution | None:
    return r.relative(ref, Quantity(1, 2) if match["q"] == "两" else Quantity(1, 5), "day", -1)


@RULES.add(rf"(?P<mod>过去|最近|近|这)的?(?P<q>{ZH_QUANTITY}|些){_UNIT}(?:里|内|中|来|以来)?")
def _window(match: re.Match[str], ref: Ref) -> Resolution | None:
    unit = _unit(match["unit"])
    quantity = Quantity(1, 5) if match["q"] == "些" else chinese_quantity(match["q"])
    if quantity is None:
        return None
    if match["mod"] == "这" and match["q"] == "一":  # 这一周 / 这一个月 / 这一年 are the current ones
        current = {"week": r.week, "month": r.month_offset, "year": r.year_offset}.get(unit)
        return None if current is None else current(ref, 0)
    return r.window(ref, quantity, unit, -1)


# -- seasons and holidays -------------------------------------------------------------------

_SEASONS = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}


@RULES.add(rf"(?:{_YEAR_PREFIX}|(?P<mod>上个|这个|下个))?(?P<s>[春夏秋冬])(?:天|季)")
def _season(match: re.Match[str], ref: Ref) -> Resolution | None:
    name = _SEASONS[match["s"]]
    year = _year(match, ref)
    if match["y"] is not None and year is None:
        return None
    mode = {"上个": "last", "这个": "this", "下个": "next"}.get(match["mod"] or "", "plain")
    return r.season(ref, name, mode, year)


_HOLIDAYS = {
    "元旦": (1, 1, 1), "情人节": (2, 14, 1), "劳动节": (5, 1, 5), "五一": (5, 1, 5), "国庆": (10, 1, 7),
    "国庆节": (10, 1, 7), "万圣节": (10, 31, 1), "平安夜": (12, 24, 1), "圣诞": (12, 25, 1), "圣诞节": (12, 25, 1),
    "跨年夜": (12, 31, 1),
}  # fmt: skip


@RULES.add(rf"(?:{_YEAR_PREFIX})?(?<![{_NUMERAL}])(?P<h>元旦|情人节|劳动节|五一|国庆节?|万圣节|平安夜|圣诞节?|跨年夜)")
def _holiday(match: re.Match[str], ref: Ref) -> Resolution | None:
    month, day, length = _HOLIDAYS[match["h"]]
    year = _year(match, ref)
    if match["y"] is not None and year is None:
        return None
    return r.holiday(ref, lambda candidate: date(candidate, month, day), length, "plain", year)


# -- words that name a time the rules cannot place (an LLM may) ----------------------------

UNRESOLVED = re.compile(
    r"最近|近来|近期|近日|前阵子?|前段时间|前些时候|前一阵|前不久|不久前|早些时候|早前|先前|之前|以前|从前|上次|上回"
    r"|那天|那时候?|那会儿?|当时|当天|那周|那个月|那年|那阵子|那段时间|这阵子|这段时间|一阵子|刚才"
    r"|小时候|年轻时|读书时|大学时|高中时|很久以前|好久以前|多年前|几年前|节假日|假期|放假|休假|过年|春节|除夕|元宵"
    r"|清明|端午|中秋|七夕|重阳|寒假|暑假|生日|周年"
)
"""Chinese time words with no fixed place on the calendar: 最近, 前阵子, 过年的时候, 小时候."""
