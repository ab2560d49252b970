"""Reading LoCoMo conversations: sessions and their times, turns, questions with clean evidence.

Accepts any JSON file in a folder, in either layout LoCoMo has been shipped in: one sample per
file (`speaker_a`, `session_N`, `session_N_date_time`, `qa` at the top, or under
`conversation`), or the original `locomo10.json` list of samples. Nothing here knows which
conversations or questions exist.

Evidence ids are cleaned because the data has slips: `"D8:6; D9:17"` (two ids in one string),
`"D:11:26"` (a stray colon), `"D"` (nothing). Every `D<session>:<turn>` found in a string is
kept if the conversation has that turn; the rest are counted as dropped. A question left with
no evidence cannot score recall and is skipped (and counted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["Conversation", "Question", "Turn", "load_conversations", "normalise_evidence", "parse_session_time"]

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_TIME = re.compile(r"(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    time: datetime  # the session's date-time (naive: read in the config's timezone)
    session: int

    @property
    def content(self) -> str:
        """What is stored: the text, and for an image turn what the image shows."""
        return f"{self.text} [image: {self.caption}]" if self.caption else self.text

    @property
    def said(self) -> str:
        """The turn as the LoCoMo paper's retrievers index it: `Ann said, "..." and shared <caption>.`"""
        shared = f" and shared {self.caption}." if self.caption else ""
        return f'{self.speaker} said, "{self.text}"{shared}'


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # cleaned dia_ids that exist in the conversation
    answer: str = ""


@dataclass
class Conversation:
    name: str
    speakers: tuple[str, ...]
    sessions: list[tuple[int, datetime, list[Turn]]]  # (number, time, turns), in session order
    questions: list[Question]
    evidence_dropped: int = 0  # evidence ids that name no turn of this conversation
    questions_without_evidence: list[Question] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [turn for _, _, turns in self.sessions for turn in turns]

    @property
    def last_session_time(self) -> datetime:
        """The time of the last session that has turns (some files list dates of empty sessions)."""
        return self.sessions[-1][1]


def parse_session_time(text: str) -> datetime:
    """`"1:56 pm on 8 May, 2023"` -> 2023-05-08 13:56 (naive)."""
    match = _TIME.search(str(text))
    if match is None:
        raise ValueError(f"unrecognised LoCoMo session time {text!r} (expected like '1:56 pm on 8 May, 2023')")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unknown month {month_name!r} in session time {text!r}")
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute))


def normalise_evidence(raw: Any) -> list[str]:
    """Every `D<s>:<t>` in the evidence strings, as `D<s>:<t>`, in order, without repeats."""
    items = raw if isinstance(raw, list) else [raw]
    found: list[str] = []
    for item in items:
        for session, turn in _EVIDENCE.findall(str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id not in found:
                found.append(dia_id)
    return found


def load_conversations(folder: str | Path) -> list[Conversation]:
    """Every conversation in the `*.json` files of `folder`, in file-name order."""
    root = Path(folder)
    files = sorted(root.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no *.json LoCoMo files in {root}")
    conversations: list[Conversation] = []
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        samples = data if isinstance(data, list) else [data]
        for index, sample in enumerate(samples):
            name = path.stem if len(samples) == 1 else f"{path.stem}-{sample.get('sample_id', index)}"
            conversations.append(_conversation(name, sample))
    return conversations


def _conversation(name: str, sample: dict[str, Any]) -> Conversation:
    body = sample.get("conversation", sample)
    sessions: list[tuple[int, datetime, list[Turn]]] = []
    numbers = sorted(int(m[1]) for key in body if (m := _SESSION.fullmatch(key)) and isinstance(body[key], list))
    for number in numbers:
        raw_turns = body[f"session_{number}"]
        if not raw_turns:
            continue
        moment = parse_session_time(body[f"session_{number}_date_time"])
        turns = [
            Turn(
                dia_id=str(raw["dia_id"]),
                speaker=str(raw.get("speaker", "")),
                text=str(raw.get("text", "")).strip(),
                caption=str(raw.get("blip_caption") or "").strip(),
                time=moment,
                session=number,
            )
            for raw in raw_turns
        ]
        sessions.append((number, moment, turns))
    if not sessions:
        raise ValueError(f"conversation {name!r} has no session with turns")
    known = {turn.dia_id for _, _, turns in sessions for turn in turns}
    speakers = tuple(str(body[key]) for key in ("speaker_a", "speaker_b") if key in body)
    conversation = Conversation(name=name, speakers=speakers, sessions=sessions, questions=[])
    for raw in sample.get("qa", []):
        raw_evidence = raw.get("evidence", [])
        cited = normalise_evidence(raw_evidence)
        evidence = tuple(dia_id for dia_id in cited if dia_id in known)
        unreadable = sum(
            1 for item in (raw_evidence if isinstance(raw_evidence, list) else [raw_evidence]) if not normalise_evidence(item)
        )
        conversation.evidence_dropped += len(cited) - len(evidence) + unreadable
        question = Question(
            text=str(raw.get("question", "")),
            category=int(raw.get("category", 0)),
            evidence=evidence,
            answer=str(raw.get("answer", raw.get("adversarial_answer", ""))),
        )
        if evidence:
            conversation.questions.append(question)
        else:
            conversation.questions_without_evidence.append(question)
    return conversation
