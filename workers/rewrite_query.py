"""Fix the query like `set_query`, then make a follow-up question stand alone with the chat's help.

MemoryScope 0.1.1 shipped this as its contrib example (`rewrite_query`), used at the head of
`retrieve_memory` in place of `set_query`:
`rewrite_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank`.
"""

from __future__ import annotations

import logging
import re
from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext, Message
from memoryscope.errors import ModelError
from memoryscope.llm_output import strip_markup
from memoryscope.models.base import GenerationModel
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker
from memoryscope.workers._consolidation import truncate_middle
from memoryscope.workers.set_query import SetQueryWorker

__all__ = ["RewriteQueryWorker", "parse_rewrite"]

logger = logging.getLogger(__name__)

# A chat message longer than this is shown by its head and tail, as MemoryScope 0.1.1 did.
_MAX_MESSAGE_CHARS = 200
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# What a model may put before its answer: a bullet, then a label such as `Rewrite:` or `改写：`.
_LABEL = re.compile(
    r"^\s*(?:[-*•>]\s*)?(?:(?:rewrite|rewritten(?:\s+(?:question|query))?|standalone\s+(?:question|query)|question|query"
    r"|answer|output|改写后的问题|改写|重写|问题|回答|答案)\s*[:：])?\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'`“”‘’「」『』"
# "None", "None.", "None - it stands alone", "无", "无。": the question needs no rewrite. A question
# that merely starts with such a word ("None of my friends ...", "无人机 ...") is not matched.
_NO_REWRITE = re.compile(
    r"^(?:none|null|n/?a|no\s+rewrite(?:\s+is)?\s+needed|无需(?:改写|重写)?|不需要(?:改写|重写)?|无|没有)"
    r"(?:$|[^\w\s]|\s+[^\w\s])",
    re.IGNORECASE,
)


@register_worker("rewrite_query")
class RewriteQueryWorker(LLMWorker, SetQueryWorker):
    """Do what `set_query` does, then rewrite a follow-up that leans on `chat_history`.

    "And what about her?" means nothing to retrieval on its own. When the caller gives the
    chat's recent turns (`chat_history`, oldest first), the last `rewrite_history_count` of them,
    each labelled with its speaker, are shown to the generation model with the query, and its
    standalone question replaces `query`. The model answers "None" ("无") when the question
    already stands alone; that, an empty answer or a failed call keeps the query as it was: a
    rewrite is a hint, never a reason for retrieval to fail. Without history, with
    `rewrite_history_count: 0` or without a configured LLM, no model is called and the worker is
    plain `set_query`.
    """

    reads: ClassVar[tuple[str, ...]] = (*SetQueryWorker.reads, "chat_history")
    writes: ClassVar[tuple[str, ...]] = SetQueryWorker.writes
    needs_generation_model: ClassVar[bool] = False  # without its LLM it is plain `set_query`
    prompt_name: ClassVar[str] = "rewrite_query"

    class Params(SetQueryWorker.Params, LLMWorkerParams):
        generation_model: str = Field(
            "generation_model", description="Key under `model:` of the LLM that rewrites follow-up questions."
        )
        rewrite_history_count: int = Field(
            2, ge=0, description="How many of the latest chat messages the LLM sees to rewrite the query; 0 turns rewriting off."
        )

    params: Params

    def llm_enabled(self) -> bool:
        return self.params.rewrite_history_count > 0

    def run(self, ctx: MemoryContext) -> None:
        SetQueryWorker.run(self, ctx)  # named: `super()` is LLMWorker here, which leaves `run` to its workers
        if self._model is None or not ctx.query:
            return
        history = self._history_lines(ctx)
        if not history:
            return
        rewritten = self._ask(self._model, ctx.query, history)
        if rewritten:
            logger.debug("worker %s: query %r rewritten as %r", self.name, ctx.query, rewritten)
            ctx.query = rewritten

    def _history_lines(self, ctx: MemoryContext) -> list[str]:
        """`speaker: text` for the latest chat messages, oldest first, one line each."""
        turns = [m for m in ctx.chat_history if m.role in ("user", "assistant") and m.content.strip()]
        if turns and turns[-1].role == "user" and turns[-1].content.strip() == ctx.query:
            turns.pop()  # the caller included the turn that asks the query itself
        colon = "：" if self._language == "zh" else ": "
        lines = []
        for message in turns[-self.params.rewrite_history_count :]:
            text = " ".join(truncate_middle(message.content.strip(), _MAX_MESSAGE_CHARS).split())
            lines.append(f"{self._speaker(ctx, message)}{colon}{text}")
        return lines

    def _speaker(self, ctx: MemoryContext, message: Message) -> str:
        if message.role == "assistant":
            return self._prompts["assistant"]
        return message.name or ctx.user_name or self._prompts["user_label"]

    def _ask(self, model: GenerationModel, query: str, history: list[str]) -> str | None:
        """The standalone question, or None to keep `query` (the reason is logged)."""
        messages = self.prompt_messages(history="\n".join(history), query=query)
        try:
            reply = model.chat(messages)
        except ModelError as error:
            logger.warning("worker %s: query kept as it was, the rewrite call failed (%s)", self.name, error)
            return None
        rewritten = parse_rewrite(reply)
        if rewritten is None:
            logger.debug("worker %s: the model says %r stands alone", self.name, query)
        elif not rewritten:
            logger.warning("worker %s: query kept as it was, no rewrite in the model's answer %r", self.name, reply[:200])
        return rewritten or None


def parse_rewrite(reply: str) -> str | None:
    """The rewritten question in a model's answer, without labels (`Rewrite:`), quotes or
    markdown emphasis (`**Rewrite:**`); None when the model says no rewrite is needed ("None",
    "无"); "" when the answer holds nothing."""
    for raw_line in _THINKING.sub("", reply).splitlines():
        line = raw_line.strip()
        if line.startswith("```"):
            continue
        candidate = _LABEL.sub("", strip_markup(line), count=1).strip().strip(_QUOTES).strip()
        if not candidate:
            continue  # a label alone on its line: the answer follows
        if _NO_REWRITE.match(candidate):
            return None
        return " ".join(candidate.split())
    return ""
