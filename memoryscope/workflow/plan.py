"""Workflow strings and the immutable plans they parse into.

`a,[b|c,d],e` means: run `a`; then the branches `b` and `c,d` at the same time; then `e`.

    seq  := item ("," item)*
    item := NAME | "[" seq ("|" seq)* "]"        NAME = [A-Za-z_][A-Za-z0-9_]*

Whitespace around tokens is ignored. A string is parsed once, at load, into a `Sequence` of
`Step`s and `Parallel`s; a bad string raises `WorkflowSyntaxError` pointing at the column to fix.
`str(plan)` is the canonical spelling (no spaces), and parsing it gives back an equal plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn, TypeAlias

from memoryscope.errors import WorkflowSyntaxError

__all__ = ["Item", "Parallel", "Sequence", "Step", "parse_workflow"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_NESTING = 32
_NAME_HINT = "worker names use letters, digits and '_', and do not start with a digit"


@dataclass(frozen=True)
class Step:
    """Run the worker called `name`."""

    name: str

    def __post_init__(self) -> None:
        # Keeps every plan printable as a string that parses back to it.
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"invalid worker name {self.name!r}: {_NAME_HINT}")

    def canonical(self) -> str:
        return self.name

    def step_names(self) -> tuple[str, ...]:
        return (self.name,)

    def __str__(self) -> str:
        return self.canonical()


@dataclass(frozen=True)
class Parallel:
    """Run each branch at the same time, then merge their results in this order."""

    branches: tuple[Sequence, ...]

    def __post_init__(self) -> None:
        if not self.branches:
            raise ValueError("a Parallel needs at least one branch")

    def canonical(self) -> str:
        return "[" + "|".join(branch.canonical() for branch in self.branches) + "]"

    def step_names(self) -> tuple[str, ...]:
        return tuple(name for branch in self.branches for name in branch.step_names())

    def __str__(self) -> str:
        return self.canonical()


Item: TypeAlias = Step | Parallel


@dataclass(frozen=True)
class Sequence:
    """Run the items one after the other. A whole workflow is a `Sequence`."""

    items: tuple[Item, ...]

    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError("a Sequence needs at least one item")

    def canonical(self) -> str:
        return ",".join(item.canonical() for item in self.items)

    def step_names(self) -> tuple[str, ...]:
        """Every worker name, in the order the string spells them (duplicates kept)."""
        return tuple(name for item in self.items for name in item.step_names())

    def has_parallel(self) -> bool:
        return any(isinstance(item, Parallel) for item in self.items)

    def __str__(self) -> str:
        return self.canonical()


def parse_workflow(text: str, where: str = "") -> Sequence:
    """The plan spelled by `text`; `where` is the YAML path named in a syntax error."""
    return _Parser(text, where).parse()


@dataclass(frozen=True)
class _Token:
    kind: str  # "name", one of ",|[]", or "end"
    text: str
    column: int  # 1-based, in the original string


def _tokenize(text: str, where: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
            continue
        if char in ",|[]":
            tokens.append(_Token(char, char, position + 1))
            position += 1
            continue
        match = _NAME.match(text, position)
        if match is None:
            problem = "a worker name cannot start with a digit" if char.isdigit() else f"unexpected {char!r}"
            raise WorkflowSyntaxError(text, position + 1, f"{problem} ({_NAME_HINT})", where)
        tokens.append(_Token("name", match.group(), position + 1))
        position = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


class _Parser:
    """Recursive descent over the tokens; errors name what was expected where."""

    def __init__(self, text: str, where: str) -> None:
        self._text = text
        self._where = where
        self._tokens = _tokenize(text, where)
        self._index = 0
        self._open_brackets: list[_Token] = []  # innermost last, for "unclosed '['"

    def parse(self) -> Sequence:
        plan = self._sequence()
        token = self._peek()
        if token.kind != "end":  # _sequence stops only at end, '|' or ']'
            if token.kind == "]":
                self._fail(token, "unexpected ']' (no '[' to close)")
            self._fail(token, "'|' outside '[...]' (parallel branches go inside brackets: [a|b])")
        return plan

    def _sequence(self) -> Sequence:
        items = [self._item()]
        while True:
            token = self._peek()
            if token.kind == ",":
                self._index += 1
                items.append(self._item())
            elif token.kind in ("name", "["):
                shown = token.text if token.kind == "name" else "["
                self._fail(token, f"missing ',' before {shown!r}")
            elif token.kind == "end" and self._open_brackets:
                self._fail(self._open_brackets[-1], "unclosed '['")
            else:
                return Sequence(tuple(items))

    def _item(self) -> Item:
        token = self._peek()
        if token.kind == "name":
            self._index += 1
            return Step(token.text)
        if token.kind == "[":
            self._index += 1
            return self._parallel(token)
        self._fail_expected_name(token)

    def _parallel(self, opening: _Token) -> Parallel:
        if len(self._open_brackets) >= _MAX_NESTING:  # a clean error instead of a RecursionError
            self._fail(opening, f"brackets nested deeper than {_MAX_NESTING} levels")
        self._open_brackets.append(opening)
        branches = [self._sequence()]
        while self._peek().kind == "|":
            self._index += 1
            branches.append(self._sequence())
        # _sequence returns inside brackets only at '|' or ']', and the loop consumed every '|'.
        self._index += 1
        self._open_brackets.pop()
        return Parallel(tuple(branches))

    def _fail_expected_name(self, token: _Token) -> NoReturn:
        previous = self._tokens[self._index - 1] if self._index > 0 else None
        after = previous.kind if previous is not None else "start"
        if previous is not None and after == "," and token.kind in ("end", "]", "|"):
            self._fail(previous, "trailing ',' (a worker name must follow it)")
        if token.kind == "end":
            if self._open_brackets:
                self._fail(self._open_brackets[-1], "unclosed '['")
            raise WorkflowSyntaxError(self._text, 1, "empty workflow (expected a worker name)", self._where)
        if token.kind in ("]", "|") and after in ("[", "|"):
            self._fail(token, "empty branch (expected a worker name)")
        if token.kind == "]":
            self._fail(token, "unexpected ']' (expected a worker name)")
        self._fail(token, f"expected a worker name, found {token.text!r}")

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _fail(self, token: _Token, message: str) -> NoReturn:
        raise WorkflowSyntaxError(self._text, token.column, message, self._where)
