"""mem0's API over MemoryScope: change only the import line.

    from memoryscope.mem0 import Memory             # was: from mem0 import Memory

    memory = Memory()                                # offline: embedded SQLite, local embeddings
    memory.add([{"role": "user", "content": "I'm vegetarian"}], user_id="alice")
    hits = memory.search("what can I cook?", filters={"user_id": "alice"}, top_k=3)
    for entry in hits["results"]:
        print(entry["memory"], entry["score"])
    memory.get_all(filters={"user_id": "alice"})["results"]
    memory.update(memory_id, "Alice is vegan"); memory.history(memory_id); memory.delete(memory_id)
    memory.delete_all(user_id="alice"); memory.reset()

- `Memory`, `AsyncMemory` (`memory`): mem0's signatures and answers; `Memory.from_config(dict)`
  reads mem0's config (`config`: the LLM, the embedder, the store, and what is not used).
- `user_id` is the user, `agent_id` the target, `run_id` the workspace (`shapes`): a memory
  carries the ids it was added with; a read or `delete_all` matches every memory that has the
  ids it names (within one user: a memory added with a `user_id` is read by naming it).
- `calls`: the verbs in mem0's shapes, shared with the server's mem0 paths (`POST /memories`,
  `POST /search`, ...; `memoryscope.server.routes_mem0`).

Every call goes through MemoryScope's door (`memoryscope.door`), as every other face does.
"""

from memoryscope.mem0.memory import AsyncMemory, Memory

__all__ = ["Memory", "AsyncMemory"]
