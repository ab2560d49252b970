"""MemoryOS's Python API over MemoryScope: `Memoryos(...)`, `add_memory`, `get_response`, ...

    from memoryscope.memoryos import Memoryos           # was: from memoryos import Memoryos

    memo = Memoryos(user_id="ann", assistant_id="tutor", openai_api_key="sk-...",
                    openai_base_url="", data_storage_path="./memoryos_data", llm_model="gpt-4o-mini")
    memo.add_memory("I moved to Kyoto last month", "How exciting! How do you like it?")
    memo.get_response("Where do I live now?")        # the assistant's answer, with memory
    memo.get_user_profile_summary()                  # the evolving profile text ("None" until one is written)
    memo.get_assistant_knowledge_summary()           # [{"knowledge": ..., "timestamp": ...}]
    memo.force_mid_term_analysis()                   # promote the hottest segment now
    memo.get_memory_stats()                          # how much each tier holds
    memo.short_term_memory.get_all()                 # the tiers, read-only, as MemoryOS's dicts

The constructor takes MemoryOS's arguments, with its defaults (`short_term_capacity=10`,
`mid_term_capacity=2000`, ...), and builds the shipped `memoryos` config (the tiers are the
`memoryos_*` workers, see `configs/memoryos.yaml`): an embedded SQLite store in
`data_storage_path`, the LLM at `openai_base_url` (empty: OpenAI's, as in MemoryOS), and the
local embedding model unless an OpenAI-compatible `/embeddings` endpoint serves
`embedding_model_name` (`embedding_api_base=`, or `embeddings_from_llm_endpoint=True`; see
`memoryscope.memoryos._settings`). `mid_term_similarity_threshold` defaults to the config's (tuned
for the local model; MemoryOS's 0.6 is for its own). Everything persists in the store as memory
types of their own; `user_id` is the user, `assistant_id` the target, so users and assistants are
kept apart (assistant knowledge too: it is learnt per user). Pass `config=` (a name or path) and
`overrides=` to run the same API over another store (e.g. Elasticsearch).

`read_mcp_config(path)` reads the `config.json` of MemoryOS's MCP server into these arguments
(`memoryscope mcp --config config.json`).
"""

from memoryscope.memoryos._facade import DEFAULT_ASSISTANT_ID, Memoryos
from memoryscope.memoryos._mcp_config import read_mcp_config
from memoryscope.memoryos._settings import OPENAI_API_BASE
from memoryscope.memoryos._tiers import (
    NO_PROFILE,
    LongTermMemoryView,
    MidTermMemoryView,
    RetrieverView,
    ShortTermMemoryView,
    stamp,
)

__all__ = [
    "Memoryos",
    "DEFAULT_ASSISTANT_ID",
    "OPENAI_API_BASE",
    "read_mcp_config",
    "ShortTermMemoryView",
    "MidTermMemoryView",
    "LongTermMemoryView",
    "RetrieverView",
    "NO_PROFILE",
    "stamp",
]
