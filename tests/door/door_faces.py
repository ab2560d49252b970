"""The five faces of the one door, each driven as its users drive it, answering alike.

`Answer` is what a face gave back: a value, or the refusal in the face's own medium (an exception
class's kind in Python, an exit code on the command line, an HTTP status and code, an MCP tool
error's kind). `Answer.refused_as(failure)` holds when that medium says what the door's table of
failures says it must for that failure.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memoryscope.app import MemoryScope
from memoryscope.cli import main as cli_main
from memoryscope.client import MemoryScopeClient, MemoryScopeClientError
from memoryscope.door import Failure, failure_of
from memoryscope.errors import MemoryScopeError
from memoryscope.server.access import ApiKey

ZONE = "Asia/Shanghai"  # not the machine's: a time without a zone must be read in the config's
KEYS = {"ann": "ann-secret", "bob": "bob-secret", "cid": "cid-secret"}
EVERY_VERB = frozenset(("add", "add_message", "search", "get", "update", "delete", "pin", "history", "undo", "profile"))


def api_key(user: str) -> ApiKey:
    return ApiKey(f"{user}-app", hashlib.sha256(KEYS[user].encode()).digest(), users=frozenset({user}))


@dataclass(frozen=True)
class Answer:
    value: Any = None
    kind: str | None = None  # Python's exception kind, MCP's error prefix, REST's code
    exit_code: int | None = None
    http_status: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None and self.exit_code in (None, 0) and (self.http_status is None or self.http_status < 400)

    def refused_as(self, failure: Failure) -> bool:
        """The face refused, in its medium, exactly as the door's table says for `failure`."""
        given = {"kind": self.kind, "exit_code": self.exit_code, "http_status": self.http_status}
        expected = {"kind": failure.kind, "exit_code": failure.exit_code, "http_status": failure.http_status}
        return not self.ok and all(expected[name] == value for name, value in given.items() if value is not None)


class Face:
    """A face acting as one user. Each method returns an `Answer`; `verbs` names those it has."""

    name = ""
    verbs: frozenset[str] = frozenset()

    def __init__(self, scope: MemoryScope, base_url: str, store: str, config: str) -> None:
        self.scope, self.base_url, self.store, self.config = scope, base_url, store, config


class PythonFace(Face):
    name = "python"
    verbs = EVERY_VERB | {"delete_all", "export"}

    def call(self, action: Callable[[], Any]) -> Answer:
        try:
            return Answer(action())
        except MemoryScopeError as error:
            return Answer(kind=failure_of(error).kind)

    def add(self, user: str, text: str, **options: Any) -> Answer:
        return self.call(lambda: [record.id for record in self.scope.add(text, user_id=user, infer=False, **options)])

    def add_message(self, user: str, text: str) -> Answer:
        return self.call(lambda: [record.id for record in self.scope.add(text, user_id=user)])

    def search(self, user: str, query: str) -> Answer:
        return self.call(lambda: [record.id for record in self.scope.search(query, user_id=user)])

    def get(self, user: str, memory_id: str) -> Answer:
        found = self.call(lambda: self.scope.get(memory_id, user_id=user))
        return Answer(kind="unknown_memory") if found.ok and found.value is None else found  # None: not found

    def update(self, user: str, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None) -> Answer:
        return self.call(lambda: self.scope.update(memory_id, text, metadata=metadata, user_id=user).id)

    def delete(self, user: str, memory_id: str) -> Answer:
        deleted = self.call(lambda: self.scope.delete(memory_id, user_id=user))
        return Answer(kind="unknown_memory") if deleted.ok and not deleted.value else deleted  # False: not found

    def delete_all(self, user: str | None) -> Answer:
        return self.call(lambda: self.scope.delete_all(user))

    def pin(self, user: str, memory_id: str, pinned: bool = True) -> Answer:
        act = self.scope.pin if pinned else self.scope.unpin
        return self.call(lambda: act(memory_id, user_id=user).pinned)

    def history_runs(self, user: str, memory_id: str) -> Answer:
        return self.call(lambda: [change.run_id for change in self.scope.history(memory_id, user_id=user)])

    def undo(self, user: str, run_id: str) -> Answer:
        return self.call(lambda: self.scope.undo(run_id, user_id=user).to_dict())

    def profile(self, user: str) -> Answer:
        return self.call(lambda: self.scope.profile(user).text)

    def export_actions(self, user: str) -> Answer:
        buffer = io.StringIO()
        answer = self.call(lambda: self.scope.export(buffer, user_id=user))
        return Answer(_actions(buffer.getvalue())) if answer.ok else answer


class CliFace(Face):
    name = "cli"
    verbs = EVERY_VERB | {"delete_all"}  # `memoryscope export` is the store-wide transfer command

    environment: Mapping[str, str | None] = MappingProxyType({})  # what the command reads as its environment (None: unset)

    def run(self, *argv: str) -> Answer:
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
            for name, value in self.environment.items():
                patch.delenv(name, raising=False) if value is None else patch.setenv(name, value)
            code = cli_main([*argv, "--config", self.config, "--store", self.store])
        return Answer(out.getvalue(), exit_code=code)

    def json_lines(self, answer: Answer) -> list[dict[str, Any]]:
        return [json.loads(line) for line in answer.value.splitlines() if line.startswith("{")]

    def add(self, user: str, text: str, **options: Any) -> Answer:
        extra = ["--time", options["time"].isoformat()] if "time" in options else []
        answer = self.run("add", text, "--no-infer", "--user", user, "--json", *extra)
        return Answer([line["id"] for line in self.json_lines(answer)]) if answer.ok else answer

    def add_message(self, user: str, text: str) -> Answer:
        return self.run("add", text, "--user", user, "--json")

    def search(self, user: str, query: str) -> Answer:
        answer = self.run("search", query, "--user", user, "--json")
        return Answer([line["id"] for line in self.json_lines(answer)]) if answer.ok else answer

    def get(self, user: str, memory_id: str) -> Answer:
        answer = self.run("get", memory_id, "--user", user, "--json")
        return Answer(self.json_lines(answer)[0]) if answer.ok else answer

    def update(self, user: str, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None) -> Answer:
        metas = [f"--meta={key}={json.dumps(value)}" for key, value in (metadata or {}).items()]
        flags = [*(["--text", text] if text else []), *metas]
        answer = self.run("update", memory_id, *flags, "--user", user, "--json")
        return Answer(self.json_lines(answer)[0]["id"]) if answer.ok else answer

    def delete(self, user: str, memory_id: str) -> Answer:
        return self.run("delete", memory_id, "--user", user)

    def delete_all(self, user: str | None) -> Answer:
        return self.run("delete", "--all", "--yes", *(["--user", user] if user else []))

    def pin(self, user: str, memory_id: str, pinned: bool = True) -> Answer:
        return self.run("pin" if pinned else "unpin", memory_id, "--user", user)

    def history_runs(self, user: str, memory_id: str) -> Answer:
        answer = self.run("history", memory_id, "--json")
        return Answer([line["run_id"] for line in self.json_lines(answer)]) if answer.ok else answer

    def undo(self, user: str, run_id: str) -> Answer:
        answer = self.run("undo", run_id, "--user", user)
        return Answer({"already_undone": "undone already" in answer.value}) if answer.ok else answer

    def profile(self, user: str) -> Answer:
        answer = self.run("profile", "--user", user, "--json")
        return Answer(self.json_lines(answer)[0]["text"]) if answer.ok else answer



class RestFace(Face):
    name = "rest"
    verbs = EVERY_VERB | {"export"}  # delete_all: the path always names the user

    def request(self, user: str, method: str, path: str, **options: Any) -> Answer:
        headers = {"Authorization": f"Bearer {KEYS[user]}"}
        response = httpx.request(method, f"{self.base_url}{path}", headers=headers, timeout=60, **options)
        if response.status_code >= 400:
            return Answer(kind=response.json()["error"]["code"], http_status=response.status_code)
        if response.headers["content-type"].startswith("application/x-ndjson"):
            return Answer(response.text)
        return Answer(response.json())

    def add(self, user: str, text: str, **options: Any) -> Answer:
        body: dict[str, Any] = {"texts": [text]}
        if "time" in options:
            body["time"] = options["time"].isoformat()
        answer = self.request(user, "POST", f"/v1/users/{user}/memories", json=body)
        return Answer([record["id"] for record in answer.value["added"]]) if answer.ok else answer

    def add_message(self, user: str, text: str) -> Answer:
        return self.request(user, "POST", f"/v1/users/{user}/messages", json={"messages": [{"content": text}]})

    def search(self, user: str, query: str) -> Answer:
        answer = self.request(user, "POST", f"/v1/users/{user}/search", json={"query": query})
        return Answer([record["id"] for record in answer.value["memories"]]) if answer.ok else answer

    def get(self, user: str, memory_id: str) -> Answer:
        return self.request(user, "GET", f"/v1/memories/{memory_id}")

    def update(self, user: str, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None) -> Answer:
        body = {name: value for name, value in (("text", text), ("metadata", metadata)) if value is not None}
        answer = self.request(user, "PATCH", f"/v1/memories/{memory_id}", json=body)
        return Answer(answer.value["id"]) if answer.ok else answer

    def delete(self, user: str, memory_id: str) -> Answer:
        return self.request(user, "DELETE", f"/v1/memories/{memory_id}")


    def pin(self, user: str, memory_id: str, pinned: bool = True) -> Answer:
        answer = self.request(user, "POST" if pinned else "DELETE", f"/v1/memories/{memory_id}/pin")
        return Answer(answer.value["pinned"]) if answer.ok else answer

    def history_runs(self, user: str, memory_id: str) -> Answer:
        answer = self.request(user, "GET", f"/v1/memories/{memory_id}/history")
        return Answer([change["run_id"] for change in answer.value["changes"]]) if answer.ok else answer

    def undo(self, user: str, run_id: str) -> Answer:
        return self.request(user, "POST", f"/v1/runs/{run_id}/undo")

    def profile(self, user: str) -> Answer:
        answer = self.request(user, "GET", f"/v1/users/{user}/profile")
        return Answer(answer.value["text"]) if answer.ok else answer

    def export_actions(self, user: str) -> Answer:
        answer = self.request(user, "GET", f"/v1/users/{user}/export")
        return Answer(_actions(answer.value)) if answer.ok else answer


class ClientFace(Face):
    name = "client"
    verbs = EVERY_VERB | {"export"}

    def call(self, user: str, action: Callable[[MemoryScopeClient], Any]) -> Answer:
        with MemoryScopeClient(self.base_url, KEYS[user], timeout=60) as client:
            try:
                return Answer(action(client))
            except MemoryScopeClientError as error:
                return Answer(kind=error.code, http_status=error.status)

    def add(self, user: str, text: str, **options: Any) -> Answer:
        return self.call(user, lambda client: [memory.id for memory in client.add(text, user, infer=False, **options)])

    def add_message(self, user: str, text: str) -> Answer:
        return self.call(user, lambda client: [memory.id for memory in client.add(text, user)])

    def search(self, user: str, query: str) -> Answer:
        return self.call(user, lambda client: [memory.id for memory in client.search(query, user)])

    def get(self, user: str, memory_id: str) -> Answer:
        found = self.call(user, lambda client: client.get(memory_id))
        return Answer(kind="unknown_memory", http_status=404) if found.ok and found.value is None else found

    def update(self, user: str, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None) -> Answer:
        return self.call(user, lambda client: client.update(memory_id, text, metadata=metadata).id)

    def delete(self, user: str, memory_id: str) -> Answer:
        deleted = self.call(user, lambda client: client.delete(memory_id))
        return Answer(kind="unknown_memory", http_status=404) if deleted.ok and not deleted.value else deleted


    def pin(self, user: str, memory_id: str, pinned: bool = True) -> Answer:
        return self.call(user, lambda client: (client.pin if pinned else client.unpin)(memory_id).pinned)

    def history_runs(self, user: str, memory_id: str) -> Answer:
        return self.call(user, lambda client: [change["run_id"] for change in client.history(memory_id)])

    def undo(self, user: str, run_id: str) -> Answer:
        return self.call(user, lambda client: client.undo(run_id))

    def profile(self, user: str) -> Answer:
        return self.call(user, lambda client: client.profile(user).text)

    def export_actions(self, user: str) -> Answer:
        return self.call(user, lambda client: [line["change"]["action"] for line in client.export(user) if "change" in line])


class McpFace(Face):
    name = "mcp"
    verbs = frozenset(("add_message", "search", "delete", "profile"))  # add_memory keeps a turn (infer), not a memory as given

    def tool(self, user: str, name: str, arguments: dict[str, Any]) -> Answer:
        @asynccontextmanager
        async def transport() -> AsyncIterator[Any]:
            headers = {"Authorization": f"Bearer {KEYS[user]}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                streamable_http_client(f"{self.base_url}/mcp", http_client=http) as streams,
            ):
                yield streams

        async def call() -> Answer:
            async with Client(transport()) as client:
                result = await client.call_tool(name, arguments)
            text = "\n".join(getattr(part, "text", "") for part in result.content)
            if result.is_error:
                return Answer(kind=text.removeprefix(f"Error executing tool {name}: ").split(":", 1)[0])
            return Answer(text)

        return anyio.run(call)


    def add_message(self, user: str, text: str) -> Answer:
        return self.tool(user, "add_memory", {"user_input": text})

    def search(self, user: str, query: str) -> Answer:
        return self.tool(user, "retrieve_memory", {"query": query})


    def delete(self, user: str, memory_id: str) -> Answer:
        return self.tool(user, "delete_memory", {"memory_id": memory_id})

    def profile(self, user: str) -> Answer:
        answer = self.tool(user, "get_user_profile", {})
        if answer.ok and str(answer.value).startswith("{"):  # a MemoryOS service answers with MemoryOS's JSON
            return Answer(json.loads(answer.value)["user_profile"])
        return answer


FACES: tuple[type[Face], ...] = (PythonFace, CliFace, RestFace, ClientFace, McpFace)


def _actions(text: str) -> list[str]:
    return [json.loads(line)["change"]["action"] for line in text.splitlines() if '"change"' in line[:12]]


class ServedDoor:
    """One config served: its scope, its server, its store file, and the five faces on them."""

    def __init__(
        self, config: str, scope: MemoryScope, server: Any, store: Any, environment: dict[str, str | None] | None = None
    ) -> None:
        self.config, self.scope, self.server, self.store = config, scope, server, store
        self.faces = {face.name: face(scope, server.url, str(store), config) for face in FACES}
        cli = self.faces.get("cli")
        if isinstance(cli, CliFace):
            cli.environment = dict(environment or {})  # the command builds its own scope from it

    def face(self, name: str) -> Face:
        return self.faces[name]
