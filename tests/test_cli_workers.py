"""`memoryscope workers`: every registered worker, its fields and parameters; one in full; JSON."""

from __future__ import annotations

import json

import pytest

from memoryscope.cli import main
from memoryscope.worker import WORKERS
from memoryscope.workers.info_filter import InfoFilterWorker
from memoryscope.workers.read_message import ReadMessageWorker


def block(out: str, name: str) -> str:
    """The lines the listing gives worker `name`."""
    text = "\n" + out
    start = text.index(f"\n{name}: ") + 1
    return text[start : text.find("\n\n", start)]


def test_the_list_gives_each_worker_its_source_fields_and_params(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}: " in out for name in WORKERS.names())
    read_message = block(out, "read_message")
    assert read_message.startswith("read_message: Store `messages` as `conversation` memories, in one atomic write.")
    assert "from built in (memoryscope.workers.read_message.ReadMessageWorker)" in read_message
    assert f"reads {', '.join(ReadMessageWorker.reads)}; writes {', '.join(ReadMessageWorker.writes)}; no LLM" in read_message
    assert "context_messages: int, >= 0; default 2. How many earlier messages to index with a message" in read_message
    assert "; needs an LLM" in block(out, "info_filter")
    assert "optional reads time_range;" in block(out, "fuse_rerank")
    assert out.endswith(f"{len(WORKERS.names())} workers. `memoryscope workers NAME` shows one in full.\n")


def test_one_worker_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers", "info_filter"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("info_filter\n\nLoad the pending conversation memories")
    assert f"writes:         {', '.join(InfoFilterWorker.writes)}\n" in out
    assert "needs an LLM:   yes (skipped when no LLM is configured)\n" in out
    assert "  preserved_scores: tuple[int, ...]; default [2, 3].\n      Scores (0-3) that make a message informative" in out


def test_an_unknown_name_exits_2_with_the_closest_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers", "read_mesage"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown worker 'read_mesage'. Did you mean 'read_message'? Known: ")


def test_json_lists_every_worker_as_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [worker["name"] for worker in shown["workers"]] == WORKERS.names()
    assert shown["broken_entry_points"] == []
    read_message = next(worker for worker in shown["workers"] if worker["name"] == "read_message")
    assert read_message["writes"] == list(ReadMessageWorker.writes)
    assert (read_message["source"], read_message["distribution"], read_message["needs_generation_model"]) == (
        "built in",
        None,
        False,
    )
    assert read_message["params"][0] == {
        "name": "context_messages",
        "type": "int",
        "bounds": [">= 0"],
        "required": False,
        "default": 2,
        "description": ReadMessageWorker.Params.model_fields["context_messages"].description,
    }


def test_json_of_one_worker_gives_choices_and_required_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers", "update_memory", "--json"]) == 0
    method = json.loads(capsys.readouterr().out)["params"][0]
    assert (method["name"], method["type"], method["required"], method["default"]) == (
        "method",
        '"add" | "delete" | "delete_all" | "update" | "pin" | "unpin"',
        True,
        None,
    )


def test_a_dotted_class_path_is_shown_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers", "memoryscope.workers.set_query.SetQueryWorker", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["class"], shown["source"], shown["params"]) == ("memoryscope.workers.set_query.SetQueryWorker", "built in", [])
