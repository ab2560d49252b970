"""The workflow engine: parse a workflow string once, check it, run it on a context.

Typical use, with `workers` the built workers by name:

    plan = parse_workflow("set_query,[retrieve_memory|extract_time],semantic_rank", where)
    validate_plan(plan, workers, given=("user_name", "query"), where=where)
    runner = WorkflowRunner("retrieve_memory", plan, workers)
    result = runner.run(MemoryContext(user_name="ann", query="tea?"))
"""

from memoryscope.workflow.check import MERGED_FIELDS, WorkerSpec, check_plan, validate_plan
from memoryscope.workflow.plan import Item, Parallel, Sequence, Step, parse_workflow
from memoryscope.workflow.runner import RunResult, WorkflowRunner

__all__ = [
    "MERGED_FIELDS",
    "Item",
    "Parallel",
    "RunResult",
    "Sequence",
    "Step",
    "WorkerSpec",
    "WorkflowRunner",
    "check_plan",
    "parse_workflow",
    "validate_plan",
]
