"""The check walks a plan as the runner will and reports every problem at once."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError
from memoryscope.worker import Worker
from memoryscope.workflow import check_plan, parse_workflow, validate_plan

WHERE = "operation.retrieve_memory.workflow"


@dataclass(frozen=True)
class Spec:
    """A worker as the check sees it: its declared fields, nothing else."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


WORKERS = {
    "set_query": Spec(reads=("query",), writes=("query_time",)),
    "extract_time": Spec(reads=("query", "query_time"), writes=("time_range",)),
    "retrieve_memory": Spec(reads=("query",), writes=("retrieved",)),
    "semantic_rank": Spec(reads=("query", "retrieved"), writes=("ranked",)),
    "fuse_rerank": Spec(reads=("ranked", "time_range"), writes=("memories",)),
    "print_memory": Spec(reads=("memories",), writes=("result",)),
    "count": Spec(writes=("details",)),
    "stop_early": Spec(writes=("stop_reason",)),
    "read_details": Spec(reads=("details", "stop_reason")),
    "rank_again": Spec(reads=("retrieved",), writes=("ranked",)),
}
GIVEN = ("user_name", "query")


def problems(workflow: str, given: tuple[str, ...] = GIVEN) -> list[str]:
    found = check_plan(parse_workflow(workflow), WORKERS, given, WHERE)
    if any(path != WHERE for path, _ in found):
        raise AssertionError(f"every problem should name the workflow's YAML path: {found}")
    return [message for _, message in found]


def test_a_sound_workflow_has_no_problems() -> None:
    workflow = "set_query,[extract_time|retrieve_memory,semantic_rank],fuse_rerank,print_memory"
    assert problems(workflow) == []


def test_unknown_worker_names_the_closest_known_one() -> None:
    [message] = problems("set_query,semantic_rnak")
    assert "unknown worker 'semantic_rnak'" in message
    assert "Did you mean 'semantic_rank'?" in message
    assert "Known: count, extract_time" in message


def test_read_before_write_names_worker_field_and_later_writer() -> None:
    [message] = problems("semantic_rank,retrieve_memory")
    assert "worker 'semantic_rank' reads 'retrieved'" in message
    assert "'retrieve_memory' writes it later" in message


def test_read_of_a_field_written_in_a_sibling_branch() -> None:
    [message] = problems("[retrieve_memory|semantic_rank]")
    assert "worker 'semantic_rank' reads 'retrieved'" in message
    assert "'retrieve_memory' writes it in a parallel branch" in message


def test_read_of_a_field_nothing_writes_lists_what_the_caller_gives() -> None:
    [message] = problems("retrieve_memory", given=("user_name",))
    assert "worker 'retrieve_memory' reads 'query'" in message
    assert "the caller gives: user_name" in message


def test_a_worker_reading_what_it_writes_still_needs_an_earlier_writer() -> None:
    workers = {"refine": Spec(reads=("ranked",), writes=("ranked",))}
    [(_, message)] = check_plan(parse_workflow("refine"), workers, (), WHERE)
    assert "worker 'refine' reads 'ranked', but no earlier step writes it" in message


def test_steps_in_one_branch_run_in_order() -> None:
    assert problems("[retrieve_memory,semantic_rank|set_query,extract_time]") == []


def test_steps_after_a_parallel_see_every_branch() -> None:
    assert problems("[retrieve_memory,semantic_rank|set_query,extract_time],fuse_rerank") == []


def test_parallel_branches_writing_one_field_name_both_workers() -> None:
    [message] = problems("retrieve_memory,[semantic_rank|rank_again]")
    assert "parallel branches write the same field 'ranked'" in message
    assert "'semantic_rank' (branch 1) and 'rank_again' (branch 2)" in message


def test_three_conflicting_branches_are_one_problem() -> None:
    [message] = problems("retrieve_memory,[semantic_rank|rank_again|semantic_rank]")
    assert message.count("branch") == 4  # "parallel branches" + three "(branch n)"


def test_conflict_with_a_nested_branch_is_found() -> None:
    [message] = problems("retrieve_memory,[[semantic_rank|set_query]|rank_again]")
    assert "'semantic_rank' (branch 1) and 'rank_again' (branch 2)" in message


def test_details_and_stop_reason_never_conflict_and_are_always_readable() -> None:
    assert problems("[count|count],[stop_early|stop_early],read_details") == []


@dataclass(frozen=True)
class MisdeclaredSpec:
    reads: tuple[str, ...] = ("quer",)
    writes: tuple[str, ...] = ("rankd", "memories")


def test_declared_fields_must_be_context_fields() -> None:
    workers: dict[str, Spec | MisdeclaredSpec] = {"bad": MisdeclaredSpec(), **WORKERS}
    found = check_plan(parse_workflow("bad,print_memory"), workers, GIVEN, WHERE)
    messages = [message for _, message in found]
    assert messages == [
        "worker 'bad' (MisdeclaredSpec) reads 'quer', which is not a MemoryContext field. Did you mean 'query'?",
        "worker 'bad' (MisdeclaredSpec) writes 'rankd', which is not a MemoryContext field. Did you mean 'ranked'?",
    ]  # its valid write, `memories`, still counts for print_memory


def test_a_string_instead_of_a_tuple_is_named() -> None:
    workers = {"lonely": Spec(reads="query")}  # type: ignore[arg-type]  # the mistake under test
    [(_, message)] = check_plan(parse_workflow("lonely"), workers, GIVEN, WHERE)
    assert "reads must be a tuple of field names, not the string 'query'" in message


def test_given_fields_must_be_context_fields() -> None:
    assert problems("set_query", given=("query", "usr_name")) == [
        "the caller gives 'usr_name', which is not a MemoryContext field. Did you mean 'user_name'?"
    ]


def test_all_problems_are_reported_at_once_and_once_each() -> None:
    workers: dict[str, Spec | MisdeclaredSpec] = {"bad": MisdeclaredSpec(), **WORKERS}
    workflow = "bad,fuse_rerank,[semantic_rank|rank_again],bad,sematic_rank"
    found = check_plan(parse_workflow(workflow), workers, GIVEN, WHERE)
    messages = "\n".join(message for _, message in found)
    assert len(found) == 8, messages
    for fragment in (
        "reads 'quer'",
        "writes 'rankd'",
        "worker 'fuse_rerank' reads 'ranked'",
        "worker 'fuse_rerank' reads 'time_range'",
        "worker 'semantic_rank' reads 'retrieved'",
        "worker 'rank_again' reads 'retrieved'",
        "parallel branches write the same field 'ranked'",
        "unknown worker 'sematic_rank'",
    ):
        assert fragment in messages


def test_validate_raises_one_config_error_listing_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_plan(parse_workflow("semantic_rank,nope"), WORKERS, GIVEN, WHERE)
    assert len(caught.value.problems) == 2
    assert "2 problems in config" in str(caught.value)
    assert f"{WHERE}: unknown worker 'nope'" in str(caught.value)


def test_validate_is_silent_for_a_sound_workflow() -> None:
    validate_plan(parse_workflow("retrieve_memory,semantic_rank"), WORKERS, GIVEN, WHERE)


class RankWorker(Worker):
    reads = ("query", "retrieved")
    writes = ("ranked",)

    def run(self, ctx: MemoryContext) -> None:
        ctx.ranked = ctx.retrieved


def test_worker_classes_and_instances_both_work_as_specs() -> None:
    plan = parse_workflow("rank")
    assert check_plan(plan, {"rank": RankWorker}, ("query", "retrieved"), WHERE) == []
    instance = RankWorker("rank", RankWorker.Params())
    [(_, message)] = check_plan(plan, {"rank": instance}, ("query",), WHERE)
    assert "worker 'rank' reads 'retrieved'" in message
