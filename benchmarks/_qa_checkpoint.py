"""The details file of `benchmarks.locomo_qa`, which is also its checkpoint.

JSON lines, each with a `"record"` kind:
- `run`: the settings the answers depend on (config, top_k, judge_runs, batch_size, the answer
  and judge models, the prompts); first in the file. `--resume` refuses a file written with
  other settings, naming what differs.
- `ingest`: one conversation's ingest (turns, seconds, backend runs and errors, LLM usage); one
  per conversation (a conversation ingested again to finish its questions keeps its first).
- `question`: one answered question (its answer, scores, judge labels and replies, the memories).
- `usage`: the answer, judge and retrieval LLM usage of one conversation's answering in one run.

Records are appended and flushed one by one, so a stopped run loses at most the question being
written; `--resume` skips questions already there, and conversations all of whose questions are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

__all__ = ["Checkpoint", "COMPARED"]

# What must match for answers of two runs to be scored together (a model's endpoint may differ).
COMPARED = ("config", "top_k", "judge_runs", "batch_size", "answer_model", "judge_model", "prompts")


class Checkpoint:
    """Open with `Checkpoint(path, run, resume)`; `write(record)`; `close()`."""

    def __init__(self, path: Path, run: dict[str, Any], resume: bool) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        if resume and path.exists():
            self.records = _read(path)
            _check_same_run(path, run, self.records)
        else:
            if resume:
                print(f"--resume: {path} does not exist yet; starting afresh", file=sys.stderr)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")
        self._file: IO[str] = path.open("a", encoding="utf-8")
        if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            self._file.write("\n")  # a run stopped mid-line: the next record starts on its own line
        if not any(record.get("record") == "run" for record in self.records):
            self.write(run)

    @property
    def answered(self) -> set[str]:
        return {record["question_id"] for record in self.of_kind("question")}

    @property
    def ingested(self) -> set[str]:
        return {record["conversation"] for record in self.of_kind("ingest")}

    def of_kind(self, kind: str, conversations: set[str] | None = None) -> list[dict[str, Any]]:
        return [
            record
            for record in self.records
            if record.get("record") == kind and (conversations is None or record.get("conversation") in conversations)
        ]

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        self.records.append(record)

    def close(self) -> None:
        self._file.close()


def _read(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            print(f"--resume: {path}:{number} is not a whole JSON line (a stopped run?); ignored", file=sys.stderr)
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _check_same_run(path: Path, run: dict[str, Any], records: list[dict[str, Any]]) -> None:
    earlier = next((record for record in records if record.get("record") == "run"), None)
    if earlier is None:
        return
    differ = [key for key in COMPARED if _comparable(earlier.get(key)) != _comparable(run.get(key))]
    if differ:
        said = "; ".join(f"{key}: {_short(earlier.get(key))} then, {_short(run.get(key))} now" for key in differ)
        raise SystemExit(
            f"locomo_qa --resume: {path} was written with other settings ({said}). Run without --resume to start "
            "afresh, or give another --details file."
        )


def _comparable(value: Any) -> Any:
    """A model's endpoint may move (a local server on another port): its name and backend count."""
    return {k: v for k, v in value.items() if k != "endpoint"} if isinstance(value, dict) and "endpoint" in value else value


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
