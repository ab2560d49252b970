"""`Memoryos`: MemoryOS's class over the door (see `memoryscope.memoryos`)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.door import Message, RunResult, parse_time
from memoryscope.door.inputs import checked_metadata
from memoryscope.errors import InvalidInputError, MemoryScopeError
from memoryscope.memory import utc_now
from memoryscope.memoryos._settings import EMBEDDING, model_settings, tier_settings
from memoryscope.memoryos._tiers import (
    NO_PROFILE,
    UPDATE,
    LongTermMemoryView,
    MidTermMemoryView,
    RetrieverView,
    ShortTermMemoryView,
    run_retrieval,
)
from memoryscope.models.base import ChatMessage

__all__ = ["Memoryos", "DEFAULT_ASSISTANT_ID"]

ADD = "memoryos_add"
FORCE_UPDATE = "memoryos_force_update"
DEFAULT_ASSISTANT_ID = "default_assistant_profile"
_SYSTEM = (
    "You are a helpful assistant with long-term memory of this user. Use what you remember when it helps; "
    "do not make up memories.\n\nWhat you remember (times in brackets):\n{pack}"
)


class Memoryos:
    """One user's memory with one assistant, MemoryOS's way (see `memoryscope.memoryos`).

    MemoryOS's tiers are attributes, read-only views over the store: `short_term_memory`,
    `mid_term_memory`, `user_long_term_memory`, `assistant_long_term_memory`, `retriever`."""

    def __init__(
        self,
        user_id: str,
        openai_api_key: str | None = None,
        data_storage_path: str | Path = "./memoryos_data",
        openai_base_url: str | None = None,
        assistant_id: str = DEFAULT_ASSISTANT_ID,
        short_term_capacity: int = 10,
        mid_term_capacity: int = 2000,
        long_term_knowledge_capacity: int = 100,
        retrieval_queue_capacity: int = 7,
        mid_term_heat_threshold: float = 5.0,
        mid_term_similarity_threshold: float | None = None,
        llm_model: str = "gpt-4o-mini",
        embedding_model_name: str | None = None,
        embedding_model_kwargs: Mapping[str, Any] | None = None,
        *,
        similarity_threshold: float = 0.7,
        embedding_api_base: str | None = None,
        embeddings_from_llm_endpoint: bool = False,
        language: str = "en",
        config: str | Path = "memoryos",
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidInputError(f"Memoryos needs a user_id (a non-empty text), got {user_id!r}")
        if not isinstance(assistant_id, str) or not assistant_id.strip():
            raise InvalidInputError(f"Memoryos needs an assistant_id (a non-empty text), got {assistant_id!r}")
        del embedding_model_kwargs  # MemoryOS's options for its sentence-transformers models; nothing here uses them
        self.user_id = user_id
        self.assistant_id = assistant_id
        self.data_storage_path = str(Path(data_storage_path).expanduser().resolve())
        self.llm_model = llm_model
        self.mid_term_heat_threshold = mid_term_heat_threshold
        self.mid_term_similarity_threshold = mid_term_similarity_threshold
        models = model_settings(
            llm_model=llm_model,
            openai_api_key=openai_api_key,
            openai_base_url=openai_base_url,
            embedding_model_name=embedding_model_name,
            embedding_api_base=embedding_api_base,
            embeddings_from_llm_endpoint=embeddings_from_llm_endpoint,
        )
        settings: dict[str, Any] = {
            "global.language": language,
            **models.overrides,
            **tier_settings(
                short_term_capacity=short_term_capacity,
                mid_term_capacity=mid_term_capacity,
                long_term_knowledge_capacity=long_term_knowledge_capacity,
                retrieval_queue_capacity=retrieval_queue_capacity,
                mid_term_heat_threshold=mid_term_heat_threshold,
                mid_term_similarity_threshold=mid_term_similarity_threshold,
                similarity_threshold=similarity_threshold,
            ),
        }
        store = load_config(config).store
        if store is not None and "path" in type(store.params).model_fields:
            # an embedded store: its file goes in data_storage_path (another store, e.g. Elasticsearch, is as configured)
            settings["memory_store.path"] = str(Path(self.data_storage_path) / "memoryos.db")
        given = dict(overrides or {})
        loaded = load_config(config, overrides={**settings, **given})
        # a key given in code is not "written in the config": that warning is for keys in YAML
        in_code = [f"model.{name}.api_key:" for name in models.keys_in_code if f"model.{name}.api_key" not in given]
        warnings = tuple(warning for warning in loaded.warnings if not warning.startswith(tuple(in_code)))
        self.scope = MemoryScope(config=dataclasses.replace(loaded, warnings=warnings))
        self.service = self.scope.default_service
        self.door = self.scope.door  # a face over the verbs: the user is `user_id`, with `assistant_id` as the target
        self.caller = self.door.caller(user_id, target=assistant_id)
        embedder = self.scope.models.get(EMBEDDING)
        self.embedding_model_name = embedding_model_name if models.embedding_served else getattr(embedder, "model_name", "")
        if embedding_model_name and not models.embedding_served:
            print(
                f"Memoryos: embedding_model_name {embedding_model_name!r} is not loaded here; embedding with "
                f"{self.embedding_model_name!r} instead (give embedding_api_base= to use a served model)",
                file=sys.stderr,
            )
        self.short_term_memory = ShortTermMemoryView(self.door, self.caller, short_term_capacity)
        self.mid_term_memory = MidTermMemoryView(self.door, self.caller, mid_term_capacity)
        self.user_long_term_memory = LongTermMemoryView(self.door, self.caller, long_term_knowledge_capacity)
        self.assistant_long_term_memory = LongTermMemoryView(self.door, self.caller, long_term_knowledge_capacity)
        self.retriever = RetrieverView(self.door, self.caller, retrieval_queue_capacity)

    # -- MemoryOS's API ------------------------------------------------------------------------

    def add_memory(
        self,
        user_input: str,
        agent_response: str,
        timestamp: str | datetime | None = None,
        meta_data: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Keep one turn: a short-term page; the short term's overflow moves to mid term and hot
        segments are promoted, in the same run (one atomic write after the page's). `timestamp`:
        an ISO time ("2024-10-26 21:26:20", in the config's zone when it has none) or a datetime.
        `meta_data` (MemoryOS accepts it and keeps nothing) is kept as the page's metadata, checked
        as every verb checks metadata (JSON values; keys not MemoryScope's own)."""
        said = self._time(timestamp)
        extra = checked_metadata(meta_data)
        messages = (
            Message("user", user_input, said, name=self.user_id, metadata=extra),
            Message("assistant", agent_response, said),
        )
        return self._run(ADD, messages=messages, query_time=said)

    def get_response(
        self,
        query: str,
        relationship_with_user: str = "friend",
        style_hint: str = "",
        user_conversation_meta_data: Mapping[str, Any] | None = None,
    ) -> str:
        """The assistant's answer to `query` with the memory pack in its prompt (and the
        conversation's metadata, when given); the turn is then kept."""
        pack = self.retrieve(query)
        model = self.scope.models.get("generation_model")
        if model is None:
            raise MemoryScopeError("get_response needs an LLM: give openai_base_url (and openai_api_key)")
        system = _SYSTEM.format(pack=pack["text"])
        if relationship_with_user or style_hint:
            system += f"\n\nYou are the user's {relationship_with_user}. {style_hint}".rstrip()
        if user_conversation_meta_data:
            system += "\n\nAbout this conversation: " + ", ".join(f"{k}: {v}" for k, v in user_conversation_meta_data.items())
        answer = str(model.chat([ChatMessage("system", system), ChatMessage("user", query)]))
        self.add_memory(query, answer)
        return answer

    def get_user_profile_summary(self) -> str:
        """The user's profile text, or "None" until a hot segment was promoted (as MemoryOS answers)."""
        return self.user_long_term_memory.get_raw_user_profile(self.user_id)

    def get_assistant_knowledge_summary(self) -> list[dict[str, Any]]:
        """The assistant's knowledge entries, oldest first: `{"knowledge": ..., "timestamp": ...}`."""
        return self.assistant_long_term_memory.get_assistant_knowledge()

    def force_mid_term_analysis(self) -> RunResult:
        """Promote the hottest mid-term segment with pages not yet analysed now, whatever its heat
        (MemoryOS lowers the threshold to 0 for one check): one LLM call updates the profile and
        the knowledge. Nothing to analyse, nothing is called."""
        return self._run(FORCE_UPDATE, query_time=utc_now())

    def get_memory_stats(self) -> dict[str, Any]:
        """How much each tier holds: MemoryOS's `user_id`, `short_term_count`,
        `mid_term_sessions_count`, `has_user_profile`, `assistant_knowledge_count`."""
        profile = self.get_user_profile_summary()
        return {
            "user_id": self.user_id,
            "short_term_count": len(self.short_term_memory.records()),
            "mid_term_sessions_count": len(self.door.get_all(self.caller, types=["memoryos_segment"])),
            "has_user_profile": profile != NO_PROFILE,
            "assistant_knowledge_count": len(self.get_assistant_knowledge_summary()),
        }

    # -- beyond MemoryOS's API -----------------------------------------------------------------

    def retrieve(self, query: str, timestamp: str | datetime | None = None) -> dict[str, Any]:
        """The context pack for `query`: `text` (time-stamped), and the records of each tier
        (`profile`, `knowledge`, `mid_term`, `short_term`, as dicts). A segment the query made hot
        is promoted right after (`memoryos_update`)."""
        context = run_retrieval(self.door, self.caller, query, self._time(timestamp)).context
        long_term = context.long_term_recall
        return {
            "text": context.result,
            "profile": next((node.content for node in long_term if node.memory_type.value == "memoryos_profile"), ""),
            "knowledge": [node.to_dict() for node in long_term if node.memory_type.value == "memoryos_knowledge"],
            "mid_term": [node.to_dict() for node in context.mid_term_recall],
            "short_term": [node.to_dict() for node in context.short_term_recall],
        }

    def get_user_profile(self) -> str:
        """The user's profile text ("" until a hot segment was promoted)."""
        return self.door.profile(self.caller).text

    def update(self, timestamp: str | datetime | None = None) -> RunResult:
        """Run the move and the promotions now, heat taken at `timestamp` (default: now); they also
        run with every `add_memory`."""
        return self._run(UPDATE, query_time=self._time(timestamp))

    def close(self) -> None:
        self.scope.close()

    def __enter__(self) -> Memoryos:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Memoryos user_id='{self.user_id}' assistant_id='{self.assistant_id}' data_path='{self.data_storage_path}'>"

    def _run(self, operation: str, **fields: Any) -> RunResult:
        return self.door.run(self.caller, operation, **fields)

    def _time(self, timestamp: str | datetime | None) -> datetime:
        """A time given (naive: the config's zone, as every face reads it), else now."""
        return parse_time("timestamp", timestamp, self.door.settings.tzinfo) or utc_now()
