"""A client for `memoryscope serve`: the simple memory API (`memoryscope.memory_api`), over HTTP.

    with MemoryScopeClient("http://127.0.0.1:8000", api_key=KEY) as client:
        client.add("I moved to Hangzhou last week", user_id="lin")          # kept; consolidation learns from it
        client.add("prefers tea", user_id="lin", infer=False, metadata={"source": "crm"})
        hits = client.search("where does Lin live?", user_id="lin", top_k=5)
        hits[0].memory, hits[0].score, hits[0].text                         # RemoteMemory, as MemoryRecord
        client.chat("where do I live?", user_id="lin").content
        for delta in client.chat("and since when?", user_id="lin", stream=True):
            print(delta, end="")

`AsyncMemoryScopeClient` has the same verbs as coroutines (`async with`, `await client.search(...)`;
`export` is an async iterator). As in the library, `get` of an unknown memory is None and `delete`
of one False; a user with no memories has none to list (`get_all`, `search`, `profile`: [];
`delete_all`: 0). Every other error the server answers raises `MemoryScopeClientError` with the
server's `code` and message; so does a server that cannot be reached (code "unreachable") or that
does not answer within `timeout` (code "timeout"). Datetimes are sent as ISO 8601 (a naive one is
read in the server's configured zone). Needs only httpx (`pip install 'memoryscope[server]'`, or
just httpx); nothing of the engine or the server is imported.
"""

from memoryscope.client._async import AsyncMemoryScopeClient
from memoryscope.client._records import ChatResult, MemoryScopeClientError, RemoteMemory, RemoteProfile
from memoryscope.client._streams import AsyncChatStream, ChatStream
from memoryscope.client._sync import MemoryScopeClient

__all__ = [
    "MemoryScopeClient",
    "AsyncMemoryScopeClient",
    "RemoteMemory",
    "RemoteProfile",
    "ChatResult",
    "ChatStream",
    "AsyncChatStream",
    "MemoryScopeClientError",
]
