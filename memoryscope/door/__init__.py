"""The one door: every operation a user can ask for, as a verb, for a typed caller.

    from memoryscope.door import Caller
    door = scope.door                                   # a MemoryScope's
    ann = door.caller("ann")                            # who asks, and what they may reach
    door.add(ann, "I moved to Kyoto", infer=False)      # runs the add_memory operation
    door.search(ann, "where do I live?", top_k=5)       # runs retrieve_memory
    door.delete(ann, [memory_id])                       # another user's id: not found, by the store's filter

- `verbs`: the table of verbs (input, scope, operation, output, errors, each face's spelling);
- `caller`: `Caller`, the user and what they may reach, turned into the store's filter;
- `door`: `Door`, the writing verbs (each runs an operation of the service); `reading`: the
  reading verbs; `base`: the ground both stand on (the caller's memories by the store's filter);
- `limits`: the sizes every face accepts alike;
- `records`: what verbs answer with (`MemoryRecord`, `Profile`, `Status`, ...);
- `inputs`: messages, metadata, types and times read once for every face;
- `agents`, `sources`: a user's named agents and data sources (MemGPT's); `documents`: files read
  and cut into passages for a source;
- `failures`: one table from error kinds to exit codes, HTTP statuses and MCP errors.

Faces (Python's `MemoryApi`, the CLI, REST, the OpenAI endpoint, MCP, the agent's tools, the peer
facades) import from here, never from `stores/`, `workflow/` or the context.
"""

from memoryscope.context import Message  # a verb's input (`add`, `run(messages=...)`)
from memoryscope.door.agents import AgentRecord
from memoryscope.door.blocks import BlockRecord
from memoryscope.door.caller import ADMIN, READ, WRITE, Caller, Reach
from memoryscope.door.documents import Document, chunk_text, read_documents
from memoryscope.door.door import Door, Limits, MemoryNotFoundError
from memoryscope.door.failures import FAILURES, Failure, failure_of
from memoryscope.door.inputs import MessagesIn, aware, parse_time
from memoryscope.door.records import MemoryRecord, Profile, RunSummary, Status, UndoOutcome, WriteOutcome
from memoryscope.door.sources import SourceLoad, SourceRecord
from memoryscope.door.tiers import Segment, Tiers
from memoryscope.door.verbs import VERB_OPERATIONS, VERBS, Verb, verb_table
from memoryscope.stores.base import TimeRange  # a verb's input (`search(time_range_given=...)`)
from memoryscope.workflow import RunResult  # what `run` answers: the run's context and timings

__all__ = [
    "Caller",
    "Reach",
    "READ",
    "WRITE",
    "ADMIN",
    "Door",
    "Limits",
    "MemoryRecord",
    "Profile",
    "Status",
    "Tiers",
    "BlockRecord",
    "Segment",
    "UndoOutcome",
    "WriteOutcome",
    "RunSummary",
    "MemoryNotFoundError",
    "MessagesIn",
    "aware",
    "parse_time",
    "Failure",
    "FAILURES",
    "failure_of",
    "Verb",
    "VERBS",
    "VERB_OPERATIONS",
    "verb_table",
    "TimeRange",
    "Message",
    "RunResult",
    "AgentRecord",
    "SourceRecord",
    "SourceLoad",
    "Document",
    "read_documents",
    "chunk_text",
]
