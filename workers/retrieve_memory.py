"""Fetch the candidate memories for a query: one scoped search, one query embedding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from operator import ge
from typing import ClassVar, Literal, cast

import numpy as np
from pydantic import Field, model_validator
from typing_extensions import Self  # typing.Self needs Python 3.11; we support 3.10

from memoryscope.context import MemoryContext, SearchFilter
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode, TimeRange
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["RetrieveMemoryWorker"]

_KNOWLEDGE = (MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED, MemoryType.INSIGHT)


@dataclass(frozen=True)
class _Group:
    """One kind of memory to fetch: which types, in which status, at most how many."""

    memory_types: tuple[MemoryType, ...]
    status: MemoryStatus
    top_k: int


@dataclass(frozen=True)
class _Search:
    """One store search covering several groups of one status; its hits are then capped per group."""

    groups: tuple[_Group, ...]

    @property
    def memory_types(self) -> tuple[MemoryType, ...]:
        return tuple(memory_type for group in self.groups for memory_type in group.memory_types)

    @property
    def status(self) -> MemoryStatus:
        return self.groups[0].status

    @property
    def top_k(self) -> int:
        return sum(group.top_k for group in self.groups)


@register_worker("retrieve_memory")
class RetrieveMemoryWorker(Worker):
    """Search the user's memories for `query`, keeping at most a top-k per kind of memory.

    Kinds: observations (with the user's own `obs_customized`), insights, conversation messages
    (the user's and, as a chat stores both sides, the assistant's replies: `meta["role"]`;
    `fuse_rerank`'s `fuse_assistant_ratio` weighs the replies in the final order) and, when
    asked, expired memories. The valid kinds are fetched by ONE store search for the
    sum of their top-ks, then each kind is cut at its own top-k. One search instead of one per
    kind keeps retrieval (on the user's path) as fast as a single store search, and its scores
    compare across kinds; the price is that a kind that ranks low may get fewer than its top-k
    (relevance first). Expired memories (for listing and deleting) take a second search. The
    query is embedded once with the store's model (or `query_vector` is used, or a vector in
    `embedded` made for exactly this query text, as a chat turn gives). With an empty
    query the newest memories of each kind are listed instead.

    Every call is scoped to the context's `user_name` + `target_name` + `workspace`.
    `retrieved` (and `memories`, so a listing workflow such as `set_query,retrieve_top_memory,
    print_memory` has its answer) holds the hits best first (newest first for a listing), each
    with the store's score (None for a listing).

    `time_range` is read only with `time_filter: narrow` or `include`, and only when an earlier
    step (not a parallel branch) wrote it: `boost` leaves time to `fuse_rerank` alone.
    `include` (the default config's) makes sure memories from the asked time are candidates
    however they rank among all the user's memories: "What did Maria start, as mentioned on 3
    June?" finds the message of 3 June that never says "June". On LoCoMo it raised recall@10 from
    0.802 to 0.811 (benchmarks/README.md, §1); it costs two more searches, filtered by time, for
    a query that names a time, none for the others.

    A caller's `search_filter` (the simple API's `search`) narrows every search: only its memory
    types, only its time range (a hard limit, never widened), only memories whose metadata
    passes its conditions; its `any_target` / `any_workspace` search the user's memories of
    every target / workspace (never another user's).
    """

    reads: ClassVar[tuple[str, ...]] = ("query", "query_vector", "embedded", "search_filter")
    # Read when present, never required: the default workflow runs extract_time beside this step.
    optional_reads: ClassVar[tuple[str, ...]] = ("time_range",)
    writes: ClassVar[tuple[str, ...]] = ("retrieved", "memories")

    class Params(WorkerParams):
        retrieve_obs_top_k: int = Field(
            50, ge=0, description="How many valid observations (and obs_customized) to fetch; 0 skips them."
        )
        retrieve_ins_top_k: int = Field(20, ge=0, description="How many valid insights to fetch; 0 skips them.")
        retrieve_conversation_top_k: int = Field(
            50, ge=0, description="How many stored conversation messages to fetch; 0 skips them."
        )
        retrieve_expired_top_k: int = Field(
            0, ge=0, description="How many expired memories to fetch (for listing and deleting); 0 skips them."
        )
        search_mode: SearchMode = Field(
            SearchMode.HYBRID, description="`hybrid` (vectors + keywords), `dense` (vectors) or `keyword` (BM25)."
        )
        time_filter: Literal["boost", "narrow", "include"] = Field(
            "boost",
            description="`boost`: search all times, fuse_rerank favours the asked time. `narrow`: search only "
            "memories whose event_time or message_time is in `time_range`, widening when too few match. "
            "`include`: search all times and the asked time, so memories from then are always candidates. "
            "`narrow` and `include` need extract_time as an earlier step, not a parallel branch.",
        )
        narrow_min_hits: int = Field(
            3, ge=1, description="With `narrow`: fewer hits than this in a search adds that search's unfiltered hits."
        )
        embedding_model: str | None = Field(
            None,
            description="Key under `model:` that embeds the query; it must be the store's model. "
            "Default: the store's own embedding model.",
        )

        @model_validator(mode="after")
        def _fetches_something(self) -> Self:
            if not (
                self.retrieve_obs_top_k
                or self.retrieve_ins_top_k
                or self.retrieve_conversation_top_k
                or self.retrieve_expired_top_k
            ):
                raise ValueError("every retrieve_*_top_k is 0, so nothing would be retrieved")
            return self

    params: Params

    def bind(self, env: Env) -> None:
        where = f"worker.{self.name}"
        self._store: MemoryStore = env.require_store(where)
        self._embedder: EmbeddingModel | None = None
        if self.params.search_mode is not SearchMode.KEYWORD:
            # None: the store embeds the query itself, once per search
            self._embedder = env.query_embedding_model(self.params.embedding_model, f"{where}.embedding_model")
        p = self.params
        valid = (
            _Group((MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED), MemoryStatus.VALID, p.retrieve_obs_top_k),
            _Group((MemoryType.INSIGHT,), MemoryStatus.VALID, p.retrieve_ins_top_k),
            _Group((MemoryType.CONVERSATION,), MemoryStatus.VALID, p.retrieve_conversation_top_k),
        )
        expired = _Group(_KNOWLEDGE, MemoryStatus.EXPIRED, p.retrieve_expired_top_k)
        self._groups = tuple(group for group in (*valid, expired) if group.top_k > 0)
        # One search for all valid kinds (the latency-critical one), one more for expired memories.
        searches = (_Search(tuple(group for group in valid if group.top_k > 0)), _Search((expired,)))
        self._searches = tuple(search for search in searches if search.top_k > 0)

    def run(self, ctx: MemoryContext) -> None:
        narrowing = ctx.search_filter or SearchFilter()
        scope = MemoryFilter(
            user_name=ctx.user_name,
            target_name=None if narrowing.any_target else ctx.target_name,
            workspace=None if narrowing.any_workspace else ctx.workspace,
            time_range=narrowing.time_range,
            metadata=narrowing.metadata,
        )
        if not ctx.query:
            groups = [narrowed for group in self._groups if (narrowed := _narrowed(group, narrowing.memory_types))]
            found = [node for group in groups for node in self._list(scope, group)]
            nodes = sorted(_unique(found), key=lambda node: node.created_at, reverse=True)
        else:
            vector = self._query_vector(ctx)
            timed = self.params.time_filter != "boost" and scope.time_range is None
            narrow = ctx.time_range if timed else None
            found = []
            for search in self._searches:
                kept = tuple(narrowed for group in search.groups if (narrowed := _narrowed(group, narrowing.memory_types)))
                if kept:
                    found += self._search(scope, _Search(kept), ctx.query, vector, narrow)
            # one search's hits (the usual case) come distinct and best first already
            nodes = found if _best_first(found) else sorted(_unique(found), key=_score, reverse=True)
        ctx.retrieved = tuple(nodes)
        ctx.memories = ctx.retrieved

    def _query_vector(self, ctx: MemoryContext) -> np.ndarray | None:
        if self.params.search_mode is SearchMode.KEYWORD:
            return None
        if ctx.query_vector is not None:
            return ctx.query_vector
        embedder = self._embedder
        if embedder is None:
            return None
        # `embedded` holds the store model's vectors: another model's query is embedded here. A step
        # before this one may have changed the query (set_query trims it): the text must match.
        if embedder is self._store.embedding_model:
            given = next((item.vector for item in ctx.embedded if item.is_query and item.text == ctx.query), None)
            if given is not None:
                return given
        return embedder.embed_query(ctx.query)

    def _list(self, scope: MemoryFilter, group: _Group) -> list[MemoryNode]:
        memory_filter = _filter(scope, group.memory_types, group.status)
        return self._store.scan(memory_filter, limit=group.top_k, newest_first=True)

    def _search(
        self, scope: MemoryFilter, search: _Search, query: str, vector: np.ndarray | None, narrow: TimeRange | None
    ) -> list[MemoryNode]:
        """The search's hits, each kind cut at its top-k; with a time range to `narrow` to, the
        hits from then (`narrow`: only those, unless too few; `include`: beside all times')."""
        everywhere = _filter(scope, search.memory_types, search.status)
        if narrow is None or (narrow.start is None and narrow.end is None):
            return _capped(self._search_one(everywhere, query, vector, search.top_k), search.groups)
        hits: list[MemoryNode] = []
        for time_field in ("event_time", "message_time"):
            in_range = TimeRange(field=time_field, start=narrow.start, end=narrow.end)
            hits += self._search_one(_filter(scope, search.memory_types, search.status, in_range), query, vector, search.top_k)
        then = _capped(sorted(_unique(hits), key=_score, reverse=True), search.groups)
        if self.params.time_filter == "include":
            return _unique(then + _capped(self._search_one(everywhere, query, vector, search.top_k), search.groups))
        if len(then) < self.params.narrow_min_hits:
            hits = _unique(then + self._search_one(everywhere, query, vector, search.top_k))
            return _capped(sorted(hits, key=_score, reverse=True), search.groups)
        return then

    def _search_one(self, memory_filter: MemoryFilter, query: str, vector: np.ndarray | None, top_k: int) -> list[MemoryNode]:
        return self._store.search(memory_filter, query=query, vector=vector, mode=self.params.search_mode, top_k=top_k)


def _filter(
    scope: MemoryFilter, memory_types: tuple[MemoryType, ...], status: MemoryStatus, time_range: TimeRange | None = None
) -> MemoryFilter:
    return MemoryFilter(
        user_name=scope.user_name,
        target_name=scope.target_name,
        workspace=scope.workspace,
        memory_types=memory_types,
        status=status,
        time_range=time_range or scope.time_range,
        metadata=scope.metadata,
    )


def _narrowed(group: _Group, memory_types: tuple[MemoryType, ...] | None) -> _Group | None:
    """`group` with only the memory types a caller asked for (all when None); None when none is left."""
    if memory_types is None:
        return group
    kept = tuple(memory_type for memory_type in group.memory_types if memory_type in memory_types)
    return _Group(kept, group.status, group.top_k) if kept else None


def _capped(hits: Sequence[MemoryNode], groups: Sequence[_Group]) -> list[MemoryNode]:
    """`hits` (best first) with at most each group's `top_k` of its kind."""
    group_of = {memory_type: index for index, group in enumerate(groups) for memory_type in group.memory_types}
    taken = [0] * len(groups)
    kept: list[MemoryNode] = []
    for node in hits:
        index = group_of.get(node.memory_type)
        if index is not None and taken[index] < groups[index].top_k:
            taken[index] += 1
            kept.append(node)
    return kept


def _score(node: MemoryNode) -> float:
    return node.score if node.score is not None else float("-inf")


def _best_first(nodes: Sequence[MemoryNode]) -> bool:
    """Whether `nodes` are already as `sorted(_unique(nodes), key=_score, reverse=True)` would
    give them: distinct memories whose scores never rise (a stable sort then moves nothing).
    Checked in passes that run in C (13 µs for 110 hits, against 21 µs to sort them). A score
    that is None or NaN (`>=` is False) says no."""
    given = [node.score for node in nodes]
    if None in given or len({node.memory_id for node in nodes}) != len(nodes):
        return False
    scores = cast("list[float]", given)  # no None: checked above
    return all(map(ge, scores, islice(scores, 1, None)))


def _unique(nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
    """One node per memory_id, keeping its best score, in first-seen order."""
    best: dict[str, MemoryNode] = {}
    for node in nodes:
        seen = best.get(node.memory_id)
        if seen is None or _score(node) > _score(seen):
            best[node.memory_id] = node
    return list(best.values())
