"""The door's data-source verbs: load documents into a named source, list and delete sources,
attach one to an agent, and search the sources an agent has attached (MemGPT's sources).

A source belongs to one user: a state record of kind `data_source` named for it (its id, when
it was made, its documents and how many passages it holds) and its passages, memories of type
`source_passage` of that user (target ""), each with `metadata.data_source` = the source's
name. The store's filter keeps them from every other user. A passage's memory id is fixed by its
source and its text, so loading the same file again adds nothing (`load_source` skips the
passages the source holds already, without embedding them again); a changed file loaded again
replaces the passages it no longer has. Attaching writes a record of
kind `attached_source` under the agent's target (`Caller.target`): the agent's
`archival_memory_search` then finds that source's passages beside its own memories.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from memoryscope.context import Message
from memoryscope.door.agents import checked_name
from memoryscope.door.base import DoorBase
from memoryscope.door.caller import READ, WRITE, Caller
from memoryscope.door.documents import CHUNK_CHARS, OVERLAP_CHARS, Document, chunk_text, text_hash
from memoryscope.door.records import MemoryRecord
from memoryscope.door.relevance import Relevance
from memoryscope.errors import InvalidInputError, NotFoundError, closest
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.progress import Progress
from memoryscope.stores.metadata import metadata_conditions
from memoryscope.stores.state import StateKey, StateOwner

__all__ = ["SourceRecord", "SourceLoad", "SourceVerbs", "SOURCE_KIND", "ATTACHED_KIND", "SOURCE_KEY", "PASSAGE_OPERATION"]

_EPOCH = datetime.min.replace(tzinfo=timezone.utc)  # a damaged record's time: sorted first

SOURCE_KIND = "data_source"
ATTACHED_KIND = "attached_source"
SOURCE_KEY = "data_source"  # the metadata key naming a passage's source
PASSAGE_OPERATION = "add_passages"  # the operation that writes passages (built in: `VERB_OPERATIONS`)
_SOURCE_NAMESPACE = uuid.UUID("6b1f3c52-9e0a-5d47-8a21-3c5e7f9b0d14")  # fixed: a source's id is the same in every process
_BATCH = 50
_PAGE = 1000


@dataclass(frozen=True)
class SourceRecord:
    """A named data source of a user: its id, name, description, when made and last loaded, its
    documents (name -> hash of the text loaded) and how many passages it holds."""

    id: str
    name: str
    user_id: str
    description: str
    created_at: datetime
    updated_at: datetime
    documents: dict[str, str] = field(default_factory=dict)
    passages: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "user_id": self.user_id, "description": self.description,
            "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat(),
            "documents": dict(self.documents), "passages": self.passages,
        }  # fmt: skip


@dataclass(frozen=True)
class SourceLoad:
    """What one load did: the source, how many documents were read, passages added, passages
    skipped because the source held them already, and passages removed because the document
    they came from was loaded again without them (it changed)."""

    source: SourceRecord
    documents: int
    added: int
    already_loaded: int
    removed: int = 0


class SourceVerbs(DoorBase):
    """load_source, list_sources, get_source, delete_source, attach_source, detach_source,
    attached_sources, search_sources (see `memoryscope.door.verbs`)."""

    def load_source(
        self,
        caller: Caller,
        name: str,
        documents: Sequence[Document],
        *,
        description: str | None = None,
        chunk_chars: int = CHUNK_CHARS,
        overlap_chars: int = OVERLAP_CHARS,
        progress: Progress | None = None,
    ) -> SourceLoad:
        """Cut `documents` into passages and add those the source does not hold yet to source
        `name` of the caller's user (made on first load; no documents: made empty), embedded, in
        batches; `progress` counts the passages."""
        caller.require(WRITE, "load_source")
        name = checked_name(name, "data source")
        owner = self._sources_caller(caller)
        passages: dict[str, tuple[str, str, int]] = {}  # hash -> (text, document, position)
        for document in documents:
            for position, text in enumerate(chunk_text(document.text, size=chunk_chars, overlap=overlap_chars)):
                self.limits.check_text(text, "passage")
                passages.setdefault(text_hash(text), (text, document.name, position))
        held = {str(node.meta.get("passage_hash")): node for node in self._passages(owner, name)}
        new = [(digest, *passage) for digest, passage in passages.items() if digest not in held]
        reloaded = {document.name for document in documents}
        stale = [
            node.memory_id for digest, node in held.items() if node.meta.get("document") in reloaded and digest not in passages
        ]
        now = self._now(None)
        tracker = progress or Progress()
        tracker.start(f"load {name}", total=len(new))
        try:
            for start in range(0, len(new), _BATCH):
                batch = new[start : start + _BATCH]
                messages = tuple(
                    Message("user", text, now, message_id=f"{SOURCE_KIND}\x1f{name}\x1f{digest}",
                            metadata={SOURCE_KEY: name, "document": document, "passage": position, "passage_hash": digest})
                    for digest, text, document, position in batch
                )  # fmt: skip
                self._run(owner, PASSAGE_OPERATION, "load_source", new_memories=messages)
                tracker.advance(len(batch))
            for start in range(0, len(stale), _BATCH):  # a changed document: its old passages go
                self._run(owner, "delete_memory", "load_source", memory_ids=tuple(stale[start : start + _BATCH]))
        finally:
            tracker.finish()
        known = self._source_value(owner, name)
        loaded = dict(known.get("documents") or {}) if known else {}
        loaded.update({document.name: text_hash(document.text) for document in documents})
        value = {
            "id": known["id"] if known else uuid.uuid5(_SOURCE_NAMESPACE, f"{caller.user_id}\x1f{name}").hex,
            "name": name,
            "description": description if description is not None else (known or {}).get("description", ""),
            "created_at": known["created_at"] if known else now.isoformat(),
            "updated_at": now.isoformat(),
            "documents": loaded,
            "passages": len(held) + len(new) - len(stale),
        }
        self._require_store().write_state({self._source_key(owner, name): value}, change=ChangeSource("load_source"))
        return SourceLoad(_source_of(caller.user_id, value), len(documents), len(new), len(passages) - len(new), len(stale))

    def list_sources(self, caller: Caller) -> list[SourceRecord]:
        """The caller's user's data sources, oldest first."""
        caller.require(READ, "list_sources")
        records = self._require_store().list_state(self._sources_owner(caller), SOURCE_KIND)
        sources = [_source_of(caller.user_id, record.value) for record in records if not record.value.get("deleted")]
        return sorted(sources, key=lambda source: source.created_at)

    def get_source(self, caller: Caller, name: str | None = None, *, source_id: str | None = None) -> SourceRecord:
        """One data source of the caller's user, by name or id; NotFoundError naming those there are."""
        caller.require(READ, "get_source")
        if (name is None) == (source_id is None):
            raise InvalidInputError("get_source: give the source's name or its id, one of them")
        sources = self.list_sources(caller)
        wanted = checked_name(name, "data source") if name is not None else str(source_id)
        for source in sources:
            if (source.name if name is not None else source.id) == wanted:
                return source
        close = closest(wanted, [source.name for source in sources]) if name is not None else None
        hint = f" Did you mean {close!r}?" if close else ""
        known = ", ".join(source.name for source in sources) or "none yet (`memoryscope load` makes one)"
        raise NotFoundError(
            f"user {caller.user_id!r} has no data source {wanted!r}.{hint} Sources: {known}", code="unknown_source"
        )

    def delete_source(self, caller: Caller, name: str) -> SourceRecord:
        """Delete a data source of the caller's user and its passages (agents it was attached to
        stop finding them)."""
        caller.require(WRITE, "delete_source")
        source = self.get_source(caller, name)
        owner = self._sources_caller(caller)
        ids = [node.memory_id for node in self._passages(owner, source.name)]
        for start in range(0, len(ids), _BATCH):
            self._run(owner, "delete_memory", "delete_source", memory_ids=tuple(ids[start : start + _BATCH]))
        key = self._source_key(owner, source.name)
        self._require_store().write_state(
            {key: {"id": source.id, "name": source.name, "deleted": True}}, change=ChangeSource("delete_source")
        )
        return source

    def attach_source(self, caller: Caller, name: str) -> SourceRecord:
        """Let the agent the caller acts as (its `target`) search data source `name` of its user."""
        caller.require(WRITE, "attach_source")
        source = self.get_source(caller, name)
        self._set_attached(caller, source.name, True)
        return source

    def detach_source(self, caller: Caller, name: str) -> None:
        """Undo `attach_source` (the source and its passages stay)."""
        caller.require(WRITE, "detach_source")
        name = checked_name(name, "data source")
        if name not in self.attached_sources(caller):
            raise NotFoundError(f"data source {name!r} is not attached to this agent", code="unknown_source")
        self._set_attached(caller, name, False)

    def attached_sources(self, caller: Caller) -> list[str]:
        """The names of the sources attached to the agent the caller acts as (that still exist)."""
        caller.require(READ, "attached_sources")
        owner = StateOwner(caller.user_id, caller.write_target, caller.write_workspace)
        records = self._require_store().list_state(owner, ATTACHED_KIND)
        attached = {record.key.name for record in records if record.value.get("attached")}
        return [source.name for source in self.list_sources(caller) if source.name in attached]

    def search_sources(
        self, caller: Caller, query: str, *, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[MemoryRecord]:
        """The passages that best answer `query` among `sources` of the caller's user (default:
        those attached to the agent the caller acts as), best first, each scored in [0, 1] as
        `search` scores memories (`memoryscope.door.relevance`)."""
        caller.require(READ, "search_sources")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search_sources needs a query")
        self.limits.check_text(query, "query")
        top_k = self.limits.check_top_k(top_k)
        names = self.attached_sources(caller) if sources is None else [checked_name(n, "data source") for n in sources]
        if not names:
            return []
        scope = self._sources_caller(caller).memory_filter(
            memory_types=(MemoryType.SOURCE_PASSAGE,), metadata=metadata_conditions({SOURCE_KEY: {"in": names}})
        )
        store, query = self._require_store(), query.strip()
        relevance = Relevance(store, self.settings.language)
        vector = relevance.query_vector(query)
        found = store.search(scope, query=query, vector=vector, top_k=top_k)
        # scored as `search` scores memories, so an agent's own memories and its sources' passages rank on one scale
        scores = relevance.scores(query, vector, found)
        return self._records([node.with_score(score) for node, score in zip(found, scores, strict=True)])

    # -- pieces -------------------------------------------------------------------------------------

    @staticmethod
    def _sources_owner(caller: Caller) -> StateOwner:
        return StateOwner(caller.user_id, "", caller.write_workspace)

    @staticmethod
    def _sources_caller(caller: Caller) -> Caller:
        """The caller as the owner of its user's sources: the user's own target ("")."""
        return replace(caller, target="", workspace=caller.write_workspace)

    def _source_key(self, caller: Caller, name: str) -> StateKey:
        return StateKey(self._sources_owner(caller), SOURCE_KIND, name)

    def _source_value(self, caller: Caller, name: str) -> dict[str, Any] | None:
        found = self._require_store().read_state([self._source_key(caller, name)])
        return None if not found or found[0].value.get("deleted") else dict(found[0].value)

    def _set_attached(self, caller: Caller, name: str, attached: bool) -> None:
        key = StateKey(StateOwner(caller.user_id, caller.write_target, caller.write_workspace), ATTACHED_KIND, name)
        value = {"attached": attached, "at": self._now(None).isoformat()}
        self._require_store().write_state({key: value}, change=ChangeSource("attach_source" if attached else "detach_source"))

    def _passages(self, owner: Caller, name: str) -> list[MemoryNode]:
        scope = owner.memory_filter(
            memory_types=(MemoryType.SOURCE_PASSAGE,), status=MemoryStatus.VALID,
            metadata=metadata_conditions({SOURCE_KEY: name}),
        )  # fmt: skip
        store, found = self._require_store(), list[MemoryNode]()
        while True:
            page = store.scan(scope, limit=_PAGE, offset=len(found))
            found += page
            if len(page) < _PAGE:
                return found


def _source_of(user_id: str, value: dict[str, Any]) -> SourceRecord:
    created = datetime.fromisoformat(value["created_at"]) if isinstance(value.get("created_at"), str) else _EPOCH
    updated = datetime.fromisoformat(value["updated_at"]) if isinstance(value.get("updated_at"), str) else created
    return SourceRecord(
        str(value.get("id", "")), str(value.get("name", "")), user_id, str(value.get("description") or ""),
        created, updated, dict(value.get("documents") or {}), int(value.get("passages") or 0),
    )  # fmt: skip
