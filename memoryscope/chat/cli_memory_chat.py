"""`cli_memory_chat`: MemoryScope 0.1.x's terminal chat class — an `api_memory_chat` that streams by
default and whose `run()` is the interactive chat of `memoryscope chat` on this process's terminal."""

from __future__ import annotations

from pydantic import Field

from memoryscope.chat.api_memory_chat import ApiMemoryChat
from memoryscope.chat.base import CHATS
from memoryscope.chat.repl import run_session

__all__ = ["CliMemoryChat"]


@CHATS.register("cli_memory_chat")
class CliMemoryChat(ApiMemoryChat):
    """A chat for the terminal: `run()` reads messages and slash commands until /exit."""

    class Params(ApiMemoryChat.Params):
        stream: bool = Field(True, description="Stream replies by default (the terminal shows them as they come).")

    def run(self) -> int:
        """Chat on stdin/stdout until /exit or the end of input; returns the exit status."""
        return run_session(self, stream=self.stream)
