"""LoCoMo question answering: F1, BLEU-1 and LLM-judge accuracy J of any config (BENCHMARKS.md §6).

    python -m benchmarks.locomo_qa --data DIR [--config NAME|PATH] [--conversations N | NAME ...]
        [--top-k K] [--judge-runs 3] [--concurrency 4] [--limit-questions N] [--batch-size 2]
        --out FILE.json [--details FILE.jsonl] [--resume]

For each conversation: its turns go into a fresh temporary store through the config's own
ingest path, and the config's backend operations (consolidation, reflection) run as its
scheduler would, on demand (`benchmarks/_qa_ingest.py`). Then every question of categories 1-4
(5, adversarial, is skipped) is answered: retrieval is `MemoryScope.search(question,
user_id=<conversation>, top_k=K, query_time=<last session's time>)`, the config's own retrieve
operation, for every config (an agent config's `archival_memory_search` runs the same search);
the memories, time-stamped, go into one call of the answer model with a fixed prompt
(`benchmarks/_qa_prompts.py`). The answer is scored against the gold answer by LoCoMo's token F1
and by BLEU-1 (`benchmarks/_qa_metrics.py`), and labelled CORRECT or WRONG by the judge model
`--judge-runs` times (mem0's protocol); J is the share labelled CORRECT, its mean and spread
over the runs. A judge reply that is neither counts as WRONG and is counted as unparseable.

Models come from the environment: the answer model is the config's chat's generation model
(`default`/`agent`: MEMORYSCOPE_LLM_API_BASE, _API_KEY, _MODEL), the judge MEMORYSCOPE_JUDGE_API_BASE,
_API_KEY, _MODEL, each defaulting to the answer model's (`benchmarks/_qa_models.py`). LLM calls
and tokens are counted by the models' usage counters: ingest (with the backend operations) per
ingested turn, and answering, judging and retrieval's own LLM steps per question.

Answers and judge labels of up to `--concurrency` questions are asked at once (threads;
retrieval itself runs one at a time). Every answered question is appended to the details file
(default: the `--out` path with `.details.jsonl`), which `--resume` reads to skip what is done
(`benchmarks/_qa_checkpoint.py`); the JSON report is computed from that file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from benchmarks._common import Progress, machine, run_stamp, write_json
from benchmarks._locomo import Conversation, Question, load_conversations
from benchmarks._qa_checkpoint import Checkpoint
from benchmarks._qa_ingest import ingest_conversation, llm_keys, llm_usage, usage_delta
from benchmarks._qa_metrics import WRONG, bleu1, judge_label, locomo_f1
from benchmarks._qa_models import answer_model_key, build_answer_model, build_judge_model, describe
from benchmarks._qa_prompts import ANSWER_PROMPT, JUDGE_PROMPT, answer_prompt, judge_prompt, memory_lines
from benchmarks._qa_report import ANCHORS, CATEGORIES, answering_summary, categories_table, ingest_summary, print_report
from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.models.token_count import count_tokens

__all__ = ["main", "METRICS", "RETRIEVAL"]

RETRIEVAL = (
    "MemoryScope.search(question, user_id=<conversation>, top_k=K, query_time=<time of the last session>): "
    "the config's retrieve operation, for every config"
)
METRICS = {
    "f1": "LoCoMo's token F1: commas deleted, lowercased, ASCII punctuation deleted, a/an/the/and removed, "
    "whitespace tokens, Porter-stemmed (NLTK); category 1 split at commas (mean over gold parts of the best "
    "predicted part), category 3 gold cut at its first ';'",
    "bleu1": "clipped unigram precision x brevity penalty (1 if the answer is longer than the gold, else "
    "exp(1 - gold/answer length)) on the same tokens, not stemmed; no smoothing",
    "j": "share of answers the judge labels CORRECT, per run; mean and population std (ddof=0) over the runs; "
    "a reply naming neither CORRECT nor WRONG (or both) counts as WRONG and as unparseable",
    "memory_tokens_per_question": "cl100k_base tokens of the memory lines put in the answer prompt",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for option in ("top_k", "judge_runs", "concurrency", "limit_questions"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be 1 or more")
    if args.batch_size < 0:
        parser.error("--batch-size must be 0 (a whole session) or more")
    started = time.perf_counter()
    conversations = _chosen(parser, load_conversations(args.data), args.conversations)
    config = load_config(args.config)
    key = answer_model_key(config)
    answer_model, judge_model = build_answer_model(config, key), build_judge_model(config, key)
    top_k = args.top_k or config.settings.output_memory_max_count
    run = {
        "record": "run",
        "config": args.config,
        "top_k": top_k,
        "judge_runs": args.judge_runs,
        "batch_size": args.batch_size,
        "answer_model": describe(answer_model, key),
        "judge_model": describe(judge_model),
        "prompts": {"answer": ANSWER_PROMPT, "judge": JUDGE_PROMPT},
    }
    details = Path(args.details) if args.details else Path(args.out).with_suffix(".details.jsonl")
    checkpoint = Checkpoint(details, run, args.resume)
    try:
        done = checkpoint.answered
        plan = [(c, [(qid, q) for qid, q in _questions(c)[: args.limit_questions] if qid not in done]) for c in conversations]
        todo = [(conversation, questions) for conversation, questions in plan if questions]
        skipped = len(conversations) - len(todo)
        print(f"{len(conversations)} conversations ({skipped} already answered), "
              f"{sum(len(qs) for _, qs in todo)} questions to answer", file=sys.stderr)  # fmt: skip
        failed = _run(args, config.services, todo, top_k, answer_model, judge_model, checkpoint) if todo else 0
        result = _result(args, run, conversations, checkpoint, failed, details)
    finally:
        checkpoint.close()
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    write_json(args.out, result)
    print_report(result)
    print(f"wrote {args.out} and {details}", file=sys.stderr)
    if failed:
        print(f"{failed} questions failed (see the warnings above); run again with --resume to answer them", file=sys.stderr)
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.locomo_qa", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of LoCoMo JSON files (any names)")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--conversations", nargs="+", help="how many (the first N files) or which (file stems); default all")
    parser.add_argument(
        "--top-k", type=int, default=None, help="memories per question (default: the config's global.output_memory_max_count)"
    )
    parser.add_argument("--judge-runs", type=int, default=3, help="judge labels per answer (default 3)")
    parser.add_argument("--concurrency", type=int, default=4, help="questions answered and judged at once (default 4)")
    parser.add_argument("--limit-questions", type=int, default=None, help="only the first N questions (1-4) of each conversation")
    parser.add_argument(
        "--batch-size", type=int, default=2, help="messages per ingest call (default 2: one exchange; 0: a whole session)"
    )
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--details", help="JSON-lines file of every question, also the checkpoint (default: OUT.details.jsonl)")
    parser.add_argument("--resume", action="store_true", help="keep the answers already in the details file; do the rest")
    return parser


def _chosen(parser: argparse.ArgumentParser, found: list[Conversation], wanted: list[str] | None) -> list[Conversation]:
    if not wanted:
        return found
    if len(wanted) == 1 and wanted[0].isdigit():
        return found[: int(wanted[0])]
    by_name = {conversation.name: conversation for conversation in found}
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        parser.error(f"no conversation {', '.join(unknown)}; found: {', '.join(by_name)}")
    return [by_name[name] for name in wanted]


def _questions(conversation: Conversation) -> list[tuple[str, Question]]:
    """The questions to answer, with their ids: categories 1-4 with a gold answer (evidence is not
    needed to answer, so questions whose evidence ids were unusable are kept)."""
    listed = conversation.questions + conversation.questions_without_evidence
    return [
        (f"{conversation.name}#{index}", question)
        for index, question in enumerate(listed)
        if question.category in CATEGORIES and question.answer.strip()
    ]


def _run(
    args: argparse.Namespace,
    services: Any,
    todo: list[tuple[Conversation, list[tuple[str, Question]]]],
    top_k: int,
    answer_model: GenerationModel,
    judge_model: GenerationModel,
    checkpoint: Checkpoint,
) -> int:
    """Ingest and answer each conversation in turn, in one fresh store; how many questions failed."""
    failed = 0
    with tempfile.TemporaryDirectory(prefix="memoryscope-qa-") as folder:
        overrides: dict[str, Any] = {"memory_store.path": str(Path(folder) / "memories.db")}
        # the backend operations run on demand when due (see _qa_ingest), never in the background
        overrides.update({f"memory_service.{name}.enable_scheduler": False for name in services})
        overrides["global.output_memory_max_count"] = top_k
        with MemoryScope(args.config, overrides=overrides) as scope:
            for number, (conversation, questions) in enumerate(todo, start=1):
                print(f"conversation {number}/{len(todo)}: {conversation.name}", file=sys.stderr)
                progress = Progress(f"{conversation.name} ingest", len(conversation.turns), "turns")
                record = ingest_conversation(scope, conversation, args.batch_size, progress)
                progress.close()
                if conversation.name not in checkpoint.ingested:
                    checkpoint.write(record)
                failed += _answer(args, scope, conversation, questions, top_k, answer_model, judge_model, checkpoint)
    return failed


def _answer(
    args: argparse.Namespace,
    scope: MemoryScope,
    conversation: Conversation,
    questions: list[tuple[str, Question]],
    top_k: int,
    answer_model: GenerationModel,
    judge_model: GenerationModel,
    checkpoint: Checkpoint,
) -> int:
    """Answer and judge the questions, `--concurrency` at once; a `usage` record at the end."""
    keys = llm_keys(scope)
    before = llm_usage(scope, keys), answer_model.usage.snapshot(), judge_model.usage.snapshot()
    retrieval_lock = threading.Lock()
    progress = Progress(f"{conversation.name} answer", len(questions), "questions")
    answered = failed = 0
    with ThreadPoolExecutor(max(1, args.concurrency), thread_name_prefix="locomo-qa") as pool:
        futures = {
            pool.submit(_one, scope, conversation, qid, question, top_k, args.judge_runs, answer_model, judge_model,
                        retrieval_lock): qid
            for qid, question in questions
        }  # fmt: skip
        for future in as_completed(futures):
            try:
                record = future.result()
            except Exception as error:  # one failed call must not lose the others; --resume retries it
                failed += 1
                print(f"warning: question {futures[future]} failed: {type(error).__name__}: {error}", file=sys.stderr)
            else:
                checkpoint.write(record)
                answered += 1
            progress.advance()
    progress.close()
    if answered:
        checkpoint.write({
            "record": "usage",
            "conversation": conversation.name,
            "questions": answered,
            "failed": failed,
            "retrieval": usage_delta(llm_usage(scope, keys), before[0]),
            "answer": usage_delta(answer_model.usage.snapshot(), before[1]),
            "judge": usage_delta(judge_model.usage.snapshot(), before[2]),
        })  # fmt: skip
    return failed


def _one(
    scope: MemoryScope,
    conversation: Conversation,
    qid: str,
    question: Question,
    top_k: int,
    judge_runs: int,
    answer_model: GenerationModel,
    judge_model: GenerationModel,
    retrieval_lock: threading.Lock,
) -> dict[str, Any]:
    with retrieval_lock:  # the store and the local embedding model serve one search at a time here
        found = scope.search(question.text, user_id=conversation.name, top_k=top_k, query_time=conversation.last_session_time)
    lines = memory_lines([record.node for record in found], scope.config.settings)
    prompt = answer_prompt(conversation.speakers, lines, conversation.last_session_time, question.text)
    answer = answer_model.chat([ChatMessage("user", prompt)]).strip()
    asked = [ChatMessage("user", judge_prompt(question.text, question.answer, answer))]
    replies = [judge_model.chat(asked) for _ in range(judge_runs)]
    labels = [judge_label(reply) for reply in replies]
    return {
        "record": "question",
        "conversation": conversation.name,
        "question_id": qid,
        "category": question.category,
        "question": question.text,
        "gold": question.answer,
        "answer": answer,
        "f1": round(locomo_f1(answer, question.answer, question.category), 6),
        "bleu1": round(bleu1(answer, question.answer), 6),
        "judge": [label or WRONG for label in labels],
        "judge_unparseable": sum(label is None for label in labels),
        "judge_replies": [reply[:300] for reply in replies],
        "memories": len(lines),
        "memory_tokens": count_tokens("\n".join(lines)),
        "memory_lines": lines,
    }


def _result(
    args: argparse.Namespace,
    run: dict[str, Any],
    conversations: list[Conversation],
    checkpoint: Checkpoint,
    failed: int,
    details: Path,
) -> dict[str, Any]:
    names = {conversation.name for conversation in conversations}
    questions = checkpoint.of_kind("question", names)
    listed = [q for c in conversations for q in c.questions + c.questions_without_evidence]
    return {
        "config": args.config,
        "conversations": len(conversations),
        "conversation_names": [conversation.name for conversation in conversations],
        "questions": len(questions),
        "top_k": run["top_k"],
        "judge_runs": run["judge_runs"],
        "batch_size": run["batch_size"],
        "concurrency": args.concurrency,
        "limit_questions": args.limit_questions,
        "categories": categories_table(questions, run["judge_runs"]),
        "ingest": ingest_summary(checkpoint.of_kind("ingest", names)),
        "answering": answering_summary(checkpoint.of_kind("usage", names), run["judge_runs"]),
        "answer_model": run["answer_model"],
        "judge_model": run["judge_model"],
        "prompts": run["prompts"],
        "retrieval": RETRIEVAL,
        "metrics": METRICS,
        "data_notes": {
            "category_5_skipped": sum(q.category == 5 for q in listed),
            "questions_without_gold_answer_skipped": sum(q.category in CATEGORIES and not q.answer.strip() for q in listed),
            "questions_failed_this_run": failed,
        },
        "anchors": ANCHORS,
        "details": str(details),
        "date": run_stamp(),
        "machine": machine(),
    }


if __name__ == "__main__":
    sys.exit(main())
