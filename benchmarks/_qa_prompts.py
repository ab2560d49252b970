"""The two prompts of `benchmarks.locomo_qa` (stored in its JSON) and the memory lines they show.

The answer prompt gives the memories retrieval returned, each with its time stamp (temporal
questions need the dates to turn "last week" into a date) and, for a message, its speaker; then
the question and the day it is asked (the time of the conversation's last session, the query
time retrieval used). It asks for a short phrase, as LoCoMo's and mem0's prompts do. The judge
prompt follows mem0's protocol: binary CORRECT / WRONG, generous about wording and date formats.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memoryscope.memory import MemoryNode, MemoryType, format_time

__all__ = ["ANSWER_PROMPT", "JUDGE_PROMPT", "answer_prompt", "judge_prompt", "memory_lines"]

ANSWER_PROMPT = """You are answering a question about a long conversation between {speakers}, from memories of it.

Memories (each starts with the date and time it was said or learnt; "Name: ..." is what that person said):
{memories}

The question is asked on {today}.
Question: {question}

Answer from the memories. When a memory speaks of a relative time ("yesterday", "last week", \
"next month"), work out the date from that memory's time stamp and give the date or period itself \
(e.g. "7 May 2023", "the week before 9 June 2023"), not the relative words. Give a short phrase \
of at most 10 words, with no explanation. If the memories do not say, give your best guess."""

JUDGE_PROMPT = """Grade an answer to a question about a conversation, against the gold answer.

The question: {question}
The gold answer: {gold}
The answer to grade: {answer}

Be generous: the answer is CORRECT when it refers to the same thing as the gold answer, even if \
it is longer, worded differently or gives more detail; a date or time period is CORRECT when it \
is the same date or period written another way (e.g. "May 7th" for "7 May 2023"). It is WRONG \
when it names something else, misses the point, or says it does not know.

Reply with one word: CORRECT or WRONG."""

NO_MEMORIES = "(no memories found)"


def memory_lines(memories: Sequence[MemoryNode], settings: Any) -> list[str]:
    """`[2023-05-08 13:56:00 Mon] Ann: I adopted a kitten` for a message (its speaker in front),
    `[2023-05-08 13:56:00 Mon] Ann adopted a kitten` for anything else."""
    lines = []
    for node in memories:
        stamp = format_time(node.shown_time, settings.language, settings.tzinfo)
        speaker = node.meta.get("speaker") if node.memory_type is MemoryType.CONVERSATION else None
        said = f"{speaker}: {node.content}" if isinstance(speaker, str) and speaker.strip() else node.content
        lines.append(f"[{stamp}] {said}")
    return lines


def answer_prompt(speakers: Sequence[str], lines: Sequence[str], asked_at: datetime, question: str) -> str:
    return ANSWER_PROMPT.format(
        speakers=" and ".join(speakers) or "two people",
        memories="\n".join(lines) or NO_MEMORIES,
        today=f"{asked_at.day} {asked_at:%B %Y}",
        question=question,
    )


def judge_prompt(question: str, gold: str, answer: str) -> str:
    return JUDGE_PROMPT.format(question=question, gold=gold, answer=answer)
