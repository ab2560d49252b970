"""Workflow strings parse once into immutable plans and print back canonically."""

from __future__ import annotations

import dataclasses

import pytest

from memoryscope.errors import ConfigError, WorkflowSyntaxError
from memoryscope.workflow import Parallel, Sequence, Step, parse_workflow

VALID = [
    ("a", "a"),
    ("set_query", "set_query"),
    ("_private,x1", "_private,x1"),
    ("a,b,c", "a,b,c"),
    ("a,[b|c,d],e", "a,[b|c,d],e"),
    ("a,[b|[c|d],e],f", "a,[b|[c|d],e],f"),
    ("[x]", "[x]"),
    ("[a|b]", "[a|b]"),
    ("[[a|b]|[c|d]]", "[[a|b]|[c|d]]"),
    (" a , [ b | c , d ] , e ", "a,[b|c,d],e"),
    ("\ta,\n[b|c]\n", "a,[b|c]"),
    (
        "set_query, [retrieve_memory | extract_time], semantic_rank",
        "set_query,[retrieve_memory|extract_time],semantic_rank",
    ),
]


@pytest.mark.parametrize(("text", "canonical"), VALID)
def test_valid_strings_print_back_canonically(text: str, canonical: str) -> None:
    plan = parse_workflow(text)
    assert str(plan) == canonical
    assert plan.canonical() == canonical
    assert parse_workflow(canonical) == plan


def test_structure_of_a_mixed_workflow() -> None:
    """`a,[b|c,d],e`: a; then b beside the sequence c,d; then e."""
    expected = Sequence(
        (
            Step("a"),
            Parallel((Sequence((Step("b"),)), Sequence((Step("c"), Step("d"))))),
            Step("e"),
        )
    )
    assert parse_workflow("a,[b|c,d],e") == expected


def test_single_branch_is_kept_as_written() -> None:
    plan = parse_workflow("a,[x]")
    assert plan.items[1] == Parallel((Sequence((Step("x"),)),))
    assert str(plan) == "a,[x]"


def test_step_names_in_spelling_order_with_duplicates() -> None:
    assert parse_workflow("a,[b|[c|d],e],f,a").step_names() == ("a", "b", "c", "d", "e", "f", "a")


def test_plans_are_immutable_and_hashable() -> None:
    plan = parse_workflow("a,[b|c]")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.items = ()  # type: ignore[misc]  # checking that the frozen dataclass refuses
    assert hash(plan) == hash(parse_workflow(" a , [b|c] "))


def test_has_parallel() -> None:
    assert not parse_workflow("a,b").has_parallel()
    assert parse_workflow("a,[b]").has_parallel()


INVALID = [
    ("", 1, "empty workflow"),
    ("   ", 1, "empty workflow"),
    ("a,", 2, "trailing ','"),
    ("a, ", 2, "trailing ','"),
    ("a,,b", 3, "expected a worker name, found ','"),
    (",a", 1, "expected a worker name, found ','"),
    ("[a", 1, "unclosed '['"),
    ("a,[b|c", 3, "unclosed '['"),
    ("[[a|b]", 1, "unclosed '['"),
    ("[a|[b", 4, "unclosed '['"),
    ("a]", 2, "unexpected ']'"),
    ("[a]]", 4, "unexpected ']'"),
    ("]", 1, "unexpected ']'"),
    ("[a|]", 4, "empty branch"),
    ("[|a]", 2, "empty branch"),
    ("[]", 2, "empty branch"),
    ("[a||b]", 4, "empty branch"),
    ("[a,]", 3, "trailing ','"),
    ("[a,|b]", 3, "trailing ','"),
    ("a b", 3, "missing ',' before 'b'"),
    ("a[b]", 2, "missing ',' before '['"),
    ("[a]b", 4, "missing ',' before 'b'"),
    ("a|b", 2, "'|' outside '[...]'"),
    ("1a", 1, "cannot start with a digit"),
    ("a,set-query", 6, "unexpected '-'"),
    ("a,é", 3, "unexpected 'é'"),
    ("[" * 40 + "a" + "]" * 40, 33, "nested deeper"),
]


@pytest.mark.parametrize(("text", "column", "fragment"), INVALID)
def test_invalid_strings_point_at_the_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(WorkflowSyntaxError) as caught:
        parse_workflow(text)
    assert caught.value.column == column
    assert fragment in str(caught.value)


def test_syntax_error_names_the_yaml_path_and_shows_a_caret() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_workflow("a,[b|]", where="operation.retrieve_memory.workflow")
    error = caught.value
    assert isinstance(error, WorkflowSyntaxError)
    assert error.problems[0][0] == "operation.retrieve_memory.workflow"
    assert str(error).endswith("a,[b|]\n         ^")


@pytest.mark.parametrize("name", ["", "a b", "1a", "a,b", "[a]"])
def test_a_step_refuses_a_name_the_grammar_could_not_spell(name: str) -> None:
    with pytest.raises(ValueError, match="invalid worker name"):
        Step(name)


def test_empty_sequence_and_parallel_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one item"):
        Sequence(())
    with pytest.raises(ValueError, match="at least one branch"):
        Parallel(())
