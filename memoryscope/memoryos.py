"""MemoryOS's Python API over MemoryScope: `Memoryos(...)`, `add_memory`, `get_response`.

    from memoryscope.memoryos import Memoryos

    memo = Memoryos(user_id="ann", assistant_id="tutor", openai_api_key="sk-...",
                    openai_base_url="https://api.openai.com/v1", data_storage_path="./memoryos_data",
                    llm_model="gpt-4o-mini")
    memo.add_memory("I moved to Kyoto last month", "How exciting! How do you like it?")
    memo.get_response("Where do I live now?")        # the assistant's answer, with memory
    memo.get_user_profile()                          # the evolving profile text

The constructor takes MemoryOS's arguments and builds the shipped `memoryos` config (the tiers are
the `memoryos_*` workers, see `configs/memoryos.yaml`): an embedded SQLite store in
`data_storage_path`, the LLM at `openai_base_url`, and the local embedding model unless
`embedding_api_base` names a remote OpenAI-compatible `/embeddings` endpoint. Everything persists
in the store as memory types of their own; `user_id` is the user, `assistant_id` the target, so
users and assistants are kept apart. Pass `config=` (a name or path) and `overrides=` to run the
same API over another store (e.g. Elasticsearch).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.door import Message, RunResult, parse_time
from memoryscope.errors import MemoryScopeError
from memoryscope.memory import utc_now
from memoryscope.models.base import ChatMessage

__all__ = ["Memoryos"]

ADD = "memoryos_add"
RETRIEVE = "memoryos_retrieve"
UPDATE = "memoryos_update"
_SYSTEM = (
    "You are a helpful assistant with long-term memory of this user. Use what you remember when it helps; "
    "do not make up memories.\n\nWhat you remember (times in brackets):\n{pack}"
)


class Memoryos:
    """One user's memory with one assistant, MemoryOS's way (see the module docstring)."""

    def __init__(
        self,
        user_id: str,
        openai_api_key: str | None = None,
        data_storage_path: str | Path = "./memoryos_data",
        openai_base_url: str | None = None,
        assistant_id: str = "default_assistant_profile",
        short_term_capacity: int = 7,
        mid_term_capacity: int = 1000,
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
        language: str = "en",
        config: str | Path = "memoryos",
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(user_id, str) or not user_id.strip():
            raise MemoryScopeError("Memoryos needs a user_id")
        del embedding_model_kwargs  # MemoryOS's options for its sentence-transformers models; nothing here uses them
        self.user_id = user_id
        self.assistant_id = assistant_id
        settings: dict[str, Any] = {
            "global.language": language,
            "model.generation_model.model_name": llm_model,
            "model.generation_model.required": True,
            "worker.memoryos_add_page.short_term_capacity": short_term_capacity,
            "worker.memoryos_mid_term.short_term_capacity": short_term_capacity,
            "worker.memoryos_mid_term.mid_term_capacity": mid_term_capacity,
            "worker.memoryos_long_term.long_term_knowledge_capacity": long_term_knowledge_capacity,
            "worker.memoryos_long_term.mid_term_heat_threshold": mid_term_heat_threshold,
            "worker.memoryos_pack.mid_term_heat_threshold": mid_term_heat_threshold,
            "worker.memoryos_recall_mid.similarity_threshold": similarity_threshold,
            "worker.memoryos_recall_mid.retrieval_queue_capacity": retrieval_queue_capacity,
        }
        if openai_base_url:
            settings["model.generation_model.api_base"] = openai_base_url
        if openai_api_key:
            settings["model.generation_model.api_key"] = openai_api_key
        if mid_term_similarity_threshold is not None:
            settings["worker.memoryos_mid_term.segment_similarity_threshold"] = mid_term_similarity_threshold
        if embedding_api_base:
            settings.update(
                {
                    "model.embedding_model.module_name": "bge_embedding",
                    "model.embedding_model.model_name": embedding_model_name or "text-embedding-3-small",
                    "model.embedding_model.api_base": embedding_api_base,
                }
            )
            if openai_api_key:
                settings["model.embedding_model.api_key"] = openai_api_key
        store = load_config(config).store
        if store is not None and "path" in type(store.params).model_fields:
            # an embedded store: its file goes in data_storage_path (another store, e.g. Elasticsearch, is as configured)
            settings["memory_store.path"] = str(Path(data_storage_path).expanduser() / "memoryos.db")
        self.scope = MemoryScope(config, overrides={**settings, **dict(overrides or {})})
        self.service = self.scope.default_service
        self.door = self.scope.door  # a face over the verbs: the user is `user_id`, with `assistant_id` as the target
        self.caller = self.door.caller(user_id, target=assistant_id)

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
        `meta_data` is accepted as MemoryOS accepts it, and not used (as there)."""
        del meta_data
        said = self._time(timestamp)
        messages = (Message("user", user_input, said, name=self.user_id), Message("assistant", agent_response, said))
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

    # -- beyond MemoryOS's API -----------------------------------------------------------------

    def retrieve(self, query: str, timestamp: str | datetime | None = None) -> dict[str, Any]:
        """The context pack for `query`: `text` (time-stamped), and the records of each tier
        (`profile`, `knowledge`, `mid_term`, `short_term`, as dicts). A segment the query made hot
        is promoted right after (`memoryos_update`)."""
        when = self._time(timestamp)
        result = self._run(RETRIEVE, query=query, query_time=when)
        context = result.context
        if context.memoryos_update_due:
            self._run(UPDATE, query_time=when)
        long_term = context.long_term_recall
        return {
            "text": context.result,
            "profile": next((node.content for node in long_term if node.memory_type == "memoryos_profile"), ""),
            "knowledge": [node.to_dict() for node in long_term if node.memory_type == "memoryos_knowledge"],
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

    def _run(self, operation: str, **fields: Any) -> RunResult:
        return self.door.run(self.caller, operation, **fields)

    def _time(self, timestamp: str | datetime | None) -> datetime:
        """A time given (naive: the config's zone, as every face reads it), else now."""
        return parse_time("timestamp", timestamp, self.door.settings.tzinfo) or utc_now()
