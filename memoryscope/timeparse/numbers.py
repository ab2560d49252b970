"""Counts written as digits or words, in English and Chinese.

A count may be vague ("a few", "几", "两三"): it is then a range `low..high`, and the time it
names becomes a range too. `half` is kept apart because it changes the unit (half a month is
15 days), which is the rule's business, not the number's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Quantity", "EN_QUANTITY", "ZH_QUANTITY", "english_quantity", "chinese_quantity", "chinese_number"]


@dataclass(frozen=True)
class Quantity:
    """A count between `low` and `high` (equal when exact)."""

    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high


_EN_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
# Vague counts, as the ranges people usually mean by them.
_EN_VAGUE = {"a couple of": (2, 3), "a couple": (2, 3), "couple of": (2, 3), "a few": (2, 5), "few": (2, 5), "several": (3, 7)}

_SMALL_WORDS = "|".join(sorted(_EN_SMALL, key=len, reverse=True))
_TENS_WORDS = "|".join(_EN_TENS)
_VAGUE_WORDS = "|".join(word.replace(" ", r"\s+") for word in sorted(_EN_VAGUE, key=len, reverse=True))
EN_QUANTITY = rf"(?:\d{{1,3}}|(?:{_TENS_WORDS})(?:[-\s](?:{_SMALL_WORDS}))?|{_SMALL_WORDS}|{_VAGUE_WORDS}|a\s+dozen|an|a)"
"""Regex (no groups) for an English count: `3`, `three`, `twenty-one`, `a`, `a couple of`, `a few`."""


def english_quantity(text: str) -> Quantity | None:
    """The count `text` (matched by EN_QUANTITY) stands for."""
    words = " ".join(text.lower().replace("-", " ").split())
    if words.isdigit():
        return Quantity(int(words), int(words))
    if words in ("a", "an"):
        return Quantity(1, 1)
    if words == "a dozen":
        return Quantity(12, 12)
    if words in _EN_VAGUE:
        return Quantity(*_EN_VAGUE[words])
    if words in _EN_SMALL:
        return Quantity(_EN_SMALL[words], _EN_SMALL[words])
    tens, _, unit = words.partition(" ")
    if tens in _EN_TENS and (not unit or (unit in _EN_SMALL and _EN_SMALL[unit] < 10)):
        value = _EN_TENS[tens] + (_EN_SMALL[unit] if unit else 0)
        return Quantity(value, value)
    return None


_ZH_DIGITS = {
    "零": 0, "〇": 0, "○": 0, "一": 1, "二": 2, "两": 2, "俩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_ZH_POWERS = {"十": 10, "百": 100, "千": 1000}
_ZH_VAGUE = {"几": (2, 5), "好几": (3, 7), "十几": (11, 19)}

ZH_QUANTITY = r"(?:十几|好几|几|[0-9０-９]+|[零〇○一二两俩三四五六七八九十百千]+)"
"""Regex (no groups) for a Chinese count: `3`, `三`, `十五`, `两`, `两三` (2..3), `几`, `十几`."""


def chinese_number(text: str) -> int | None:
    """An exact number written in digits or Chinese numerals: `15`, `十五`, `二十一`, `二〇二三`."""
    if text.isdigit():
        return int(text)  # also reads full-width digits
    if not text or any(char not in _ZH_DIGITS and char not in _ZH_POWERS for char in text):
        return None
    if not any(char in _ZH_POWERS for char in text):
        if len(text) == 1:
            return _ZH_DIGITS[text]
        # Read digit by digit only for years (二〇二三); "两三" is a vague count, not 23.
        return int("".join(str(_ZH_DIGITS[char]) for char in text)) if len(text) == 4 else None
    total, digit = 0, None
    for char in text:
        if _ZH_DIGITS.get(char) == 0 and total:  # the 零 in 一百零五 only marks a skipped place
            continue
        if char in _ZH_DIGITS:
            if digit is not None:
                return None  # two digits in a row inside a positional number
            digit = _ZH_DIGITS[char]
        else:
            total += (1 if digit is None else digit) * _ZH_POWERS[char]
            digit = None
    return total + (digit or 0)


def chinese_quantity(text: str) -> Quantity | None:
    """The count `text` (matched by ZH_QUANTITY) stands for, vague counts as ranges."""
    if text in _ZH_VAGUE:
        return Quantity(*_ZH_VAGUE[text])
    if len(text) == 2 and text[0] in _ZH_DIGITS and text[1] in _ZH_DIGITS:
        low, high = _ZH_DIGITS[text[0]], _ZH_DIGITS[text[1]]
        # 一两 / 两三 / 三四 ... and the idiomatic 三五 ("three to five").
        if 0 < low < high and (high == low + 1 or (low, high) == (3, 5)):
            return Quantity(low, high)
        return None
    value = chinese_number(text)
    return None if value is None else Quantity(value, value)
