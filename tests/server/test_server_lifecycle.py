"""How `memoryscope serve` stops and scales: graceful shutdown while a background operation
runs (in-process `LiveServer`, and the real CLI stopped by SIGTERM/SIGINT), two server processes
over one SQLite file (what one writes the other reads; one backend run per user across them),
and `--workers 2`.

The subprocess tests start real `python -m memoryscope.cli serve` processes (a second or a few
each, more on a busy machine): they carry a pytest-timeout mark of their own."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from memoryscope.app import MemoryScope
from memoryscope.memory import MemoryType
from memoryscope.server.app import create_app
from memoryscope.server.running import graceful_server
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from tests.server.conftest import ScopeFactory, ServeFactory

pytestmark = pytest.mark.slow  # server processes started and stopped; `-m "not slow"` leaves it out

SERVICE = "memory_service.memoryscope_service"
TALK = {
    "I live in Hangzhou": ("ann lives in Hangzhou", "Hangzhou"),
    "I play the guitar": ("ann plays the guitar", "guitar"),
    "I work as a nurse": ("ann works as a nurse", "nurse"),
    "I have two cats": ("ann has two cats", "cats"),
    "I run every morning": ("ann runs every morning", "running"),
}
CONSOLIDATE = "/v1/users/ann/operations/consolidate_memory"
SHUTDOWN_S = 1.0  # server.shutdown_timeout_s of the stopped servers
MARGIN_S = 4.0  # what stopping may take beyond it on a busy two-core machine
START_S = 90.0  # how long a `memoryscope serve` process may take to answer (loads the embedding model)


@pytest.fixture
def script(fake_openai: FakeOpenAIServer) -> Iterator[ConsolidationScript]:
    """The fake LLM answering consolidation's prompts for ann; whatever it holds is let go at the end."""
    scripted = ConsolidationScript(user="ann")
    for text, fact in TALK.items():
        scripted.say(text, 3, [fact])
    scripted.install(fake_openai)
    yield scripted
    scripted.release()


def said(*texts: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text} for text in texts]}


def observations(store_path: Path) -> list[str]:
    with MemoryScope("default", overrides={"memory_store.path": str(store_path)}) as scope:
        assert scope.store is not None
        problems = scope.store.check()
        assert not any(problems.values()), problems
        return sorted(record.memory for record in scope.get_all("ann", types=[MemoryType.OBSERVATION]))


def store_path(scope: MemoryScope) -> Path:
    assert isinstance(scope.store, SqliteMemoryStore)
    return Path(scope.store.path)


# -- graceful shutdown in-process -------------------------------------------------------------------


@pytest.mark.parametrize("started_by", ["request", "trigger"])
def test_stopping_abandons_a_held_consolidation_within_the_shutdown_time_and_writes_nothing(
    serve: ServeFactory, make_scope: ScopeFactory, script: ConsolidationScript, started_by: str
) -> None:
    """The LLM holds consolidation's first step; stopping the server waits `shutdown_timeout_s`,
    abandons the run and closes the store; the request in flight gets a JSON 503; the file is
    whole, no observation half-written, and the messages are still there to consolidate."""
    scope = make_scope(**{f"{SERVICE}.lease_ttl_s": 2})  # short, though an abandoned run's lease is released at close
    live = serve(scope, shutdown_timeout_s=SHUTDOWN_S)
    reached = script.hold("info_filter")
    texts = list(TALK) if started_by == "trigger" else list(TALK)[:2]  # five messages fire trigger_messages
    answers: list[httpx.Response | Exception] = []
    caller = threading.Thread(target=_post_into, args=(answers, live.url + CONSOLIDATE))
    with httpx.Client(base_url=live.url, timeout=60) as client:
        assert client.post("/v1/users/ann/messages", json=said(*texts)).status_code == 201
        if started_by == "request":
            caller.start()
        assert reached.wait(timeout=60), "consolidation never asked the LLM"
        [running] = client.get("/v1/users/ann/status").json()["running"]
    assert running["operation"] == "consolidate_memory"
    assert running["trigger"] == ("on demand" if started_by == "request" else "5 pending messages (trigger_messages: 5)")

    began = time.monotonic()
    live.stop()
    took = time.monotonic() - began

    assert took < SHUTDOWN_S + MARGIN_S, f"stopping took {took:.1f}s"
    assert took >= SHUTDOWN_S * 0.9  # it did give the run its time
    if started_by == "request":
        caller.join(timeout=30)
        [answer] = answers
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "shutting_down"
    script.release()
    assert scope.default_service.scheduler.wait_idle(timeout=30)  # the abandoned step returned, and wrote nothing
    path = store_path(scope)
    assert observations(path) == []
    waiting = {f"{SERVICE}.lease_wait_s": 10}
    with MemoryScope("default", overrides={"memory_store.path": str(path), **waiting}) as again:
        result = again.default_service.run_operation("consolidate_memory", "ann").context.result
    assert f"stored {len(texts)} observations" in result  # nothing was lost: the messages were still pending
    assert len(observations(path)) == len(texts)


def test_a_request_that_finishes_within_the_shutdown_time_completes(
    serve: ServeFactory, make_scope: ScopeFactory, script: ConsolidationScript
) -> None:
    scope = make_scope()
    live = serve(scope, shutdown_timeout_s=10.0)
    path = store_path(scope)
    reached = script.hold("info_filter")
    answers: list[httpx.Response | Exception] = []
    with httpx.Client(base_url=live.url, timeout=60) as client:
        assert client.post("/v1/users/ann/messages", json=said("I live in Hangzhou", "I play the guitar")).status_code == 201
    caller = threading.Thread(target=_post_into, args=(answers, live.url + CONSOLIDATE))
    caller.start()
    assert reached.wait(timeout=60)

    threading.Timer(0.5, script.release).start()  # the LLM answers while the server stops
    began = time.monotonic()
    live.stop()
    took = time.monotonic() - began
    caller.join(timeout=30)

    assert took < 10.0
    [answer] = answers
    assert isinstance(answer, httpx.Response) and answer.status_code == 200, answer
    assert "stored 2 observations" in answer.json()["result"]
    assert observations(path) == ["ann lives in Hangzhou", "ann plays the guitar"]


def test_a_restarted_server_can_consolidate_a_user_whose_run_was_abandoned_at_once(
    serve: ServeFactory, make_scope: ScopeFactory, script: ConsolidationScript
) -> None:
    scope = make_scope()
    live = serve(scope, shutdown_timeout_s=SHUTDOWN_S)
    reached = script.hold("info_filter")
    with httpx.Client(base_url=live.url, timeout=60) as client:
        assert client.post("/v1/users/ann/messages", json=said(*TALK)).status_code == 201  # fires the trigger
    assert reached.wait(timeout=60)
    live.stop()
    script.release()
    assert scope.default_service.scheduler.wait_idle(timeout=30)
    quick = {"memory_store.path": str(store_path(scope)), f"{SERVICE}.lease_wait_s": 0}
    with MemoryScope("default", overrides=quick) as again:
        assert "stored 5 observations" in again.default_service.run_operation("consolidate_memory", "ann").context.result


def test_the_served_uvicorn_takes_its_timeouts_from_the_server_settings(make_scope: ScopeFactory) -> None:
    """Idle connections outlive the clients' own (so a client never reuses one being closed), and
    requests in flight get the shutdown time, as `server:` says; given options still win."""
    scope = make_scope(llm=False)
    settings = scope.config.server.model_copy(update={"keep_alive_s": 42.0, "shutdown_timeout_s": 3.0})
    app = create_app(scope, settings=settings)
    config = graceful_server(app).config
    assert (config.timeout_keep_alive, config.timeout_graceful_shutdown) == (42.0, 3.0)
    assert graceful_server(app, timeout_keep_alive=7).config.timeout_keep_alive == 7


def _post_into(answers: list[httpx.Response | Exception], url: str) -> None:
    try:
        answers.append(httpx.post(url, timeout=60))
    except httpx.HTTPError as error:
        answers.append(error)


# -- the real CLI -----------------------------------------------------------------------------------


class ServeProcess:
    """`python -m memoryscope.cli serve` on a free port, its output in a log file."""

    def __init__(self, log: Path, store: Path, env: dict[str, str], *args: str) -> None:
        self.port = _free_port()
        self.log = log
        with log.open("w") as output:  # the child keeps its own copy of the descriptor
            command = [sys.executable, "-m", "memoryscope.cli", "serve", "--port", str(self.port), "--store", str(store), *args]
            self.process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_until(self, ready: Callable[[], bool], timeout_s: float = START_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if self.process.poll() is not None:
                pytest.fail(f"memoryscope serve exited with {self.process.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"memoryscope serve did not get ready within {timeout_s:g}s:\n{self.output()}")
            time.sleep(0.1)

    def wait_ready(self) -> None:
        self.wait_until(self.answers)

    def answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, signal_number: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        self.process.send_signal(signal_number)
        return self.process.wait(timeout=timeout_s)


def stop_all(*served: ServeProcess) -> list[int]:
    """SIGTERM to each, then their exit statuses (they stop side by side)."""
    for one in served:
        one.process.send_signal(signal.SIGTERM)
    return [one.process.wait(timeout=30) for one in served]


@pytest.fixture
def start_serve(tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    """`start_serve(store, *args, env=...)`: a serve process (no LLM unless `env` names one); any
    still running at the end is killed."""
    started: list[ServeProcess] = []

    def start(store: Path, *args: str, env: dict[str, str] | None = None) -> ServeProcess:
        base = {name: value for name, value in os.environ.items() if not _is_memoryscope_setting(name)}
        served = ServeProcess(tmp_path / f"serve-{len(started)}.log", store, {**base, **(env or {})}, *args)
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(timeout=30)


def _is_memoryscope_setting(name: str) -> bool:
    """The LLM, the store and config overrides (`MEMORYSCOPE__...`) the test run may have set; the
    tests' own switches (MEMORYSCOPE_CHECK_WORKER_IO) stay."""
    return name.startswith(("MEMORYSCOPE_LLM_", "MEMORYSCOPE__")) or name == "MEMORYSCOPE_STORE_PATH"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stored_conversation(store: Path, user: str) -> list[str]:
    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        return [record.memory for record in scope.get_all(user, types=[MemoryType.CONVERSATION])]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_cli_server_stops_on_a_signal_with_status_0(
    start_serve: Callable[..., ServeProcess], tmp_path: Path, signal_number: int
) -> None:
    store = tmp_path / "cli.db"
    served = start_serve(store)
    served.wait_ready()
    response = httpx.post(f"{served.url}/v1/users/ann/messages", json=said("I keep bees on the roof"), timeout=60)
    assert response.status_code == 201, response.text

    assert served.stop(signal_number) == 0
    output = served.output()
    assert "Traceback" not in output and "interrupted" not in output
    assert "shutting down: background operations get" in output and "Finished server process" in output
    assert stored_conversation(store, "ann") == ["I keep bees on the roof"]


# -- two processes, one SQLite file -----------------------------------------------------------------


@pytest.mark.timeout(180)
def test_two_servers_over_one_file_read_what_the_other_wrote(start_serve: Callable[..., ServeProcess], tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    first, second = start_serve(store), start_serve(store)
    first.wait_ready()
    second.wait_ready()
    with httpx.Client(timeout=60) as client:
        added = client.post(f"{first.url}/v1/users/ann/memories", json={"texts": ["ann keeps bees in Lyon"]})
        assert added.status_code == 201, added.text
        [memory_id] = [record["id"] for record in added.json()["added"]]

        read = client.get(f"{second.url}/v1/memories/{memory_id}")
        assert read.status_code == 200 and read.json()["memory"] == "ann keeps bees in Lyon"
        assert client.post(f"{second.url}/v1/users/ann/messages", json=said("I sold honey today")).status_code == 201
        found = client.post(f"{first.url}/v1/users/ann/search", json={"query": "honey"}).json()["memories"]
        assert "I sold honey today" in [record["memory"] for record in found]
        assert client.delete(f"{second.url}/v1/memories/{memory_id}").json()["deleted"]
        assert client.get(f"{first.url}/v1/memories/{memory_id}").status_code == 404
    assert stop_all(first, second) == [0, 0]


@pytest.mark.timeout(180)
def test_backend_runs_for_one_user_never_overlap_across_two_servers(
    start_serve: Callable[..., ServeProcess], tmp_path: Path, fake_openai: FakeOpenAIServer, script: ConsolidationScript
) -> None:
    """Both servers consolidate ann at once: the second waits for the first's lease (it is not
    even running while the first is), then finds nothing left; their runs do not overlap."""
    store = tmp_path / "shared.db"
    llm = {"MEMORYSCOPE_LLM_API_BASE": fake_openai.base_url, "MEMORYSCOPE_LLM_API_KEY": "sk-fake-for-both"}
    first, second = start_serve(store, env=llm), start_serve(store, env=llm)
    first.wait_ready()
    second.wait_ready()
    with httpx.Client(timeout=60) as client:
        stored = client.post(f"{first.url}/v1/users/ann/messages", json=said("I live in Hangzhou", "I play the guitar"))
        assert stored.status_code == 201, stored.text
    reached = script.hold("info_filter")
    answers: dict[str, list[httpx.Response | Exception]] = {"first": [], "second": []}
    callers = {
        name: threading.Thread(target=_post_into, args=(answers[name], served.url + CONSOLIDATE))
        for name, served in (("first", first), ("second", second))
    }
    callers["first"].start()
    assert reached.wait(timeout=60), "the first server's consolidation never asked the LLM"
    callers["second"].start()
    time.sleep(1.5)  # time enough for the second to start a run beside the first, were it allowed

    with httpx.Client(timeout=60) as client:
        first_status = client.get(f"{first.url}/v1/users/ann/status").json()
        second_status = client.get(f"{second.url}/v1/users/ann/status").json()
    assert [run["operation"] for run in first_status["running"]] == ["consolidate_memory"]
    assert second_status["running"] == []  # waiting for the lease, not running
    assert callers["second"].is_alive() and script.calls["info_filter"] == 1

    script.release()
    for caller in callers.values():
        caller.join(timeout=60)
    [first_answer], [second_answer] = answers["first"], answers["second"]
    assert isinstance(first_answer, httpx.Response) and first_answer.status_code == 200, first_answer
    assert isinstance(second_answer, httpx.Response) and second_answer.status_code == 200, second_answer
    assert "stored 2 observations" in first_answer.json()["result"]
    assert "stored" not in second_answer.json()["result"]  # the first took the messages: nothing left
    assert script.calls["info_filter"] == 1

    with httpx.Client(timeout=60) as client:
        first_run = client.get(f"{first.url}/v1/users/ann/status").json()["last_runs"]["consolidate_memory"]
        second_run = client.get(f"{second.url}/v1/users/ann/status").json()["last_runs"]["consolidate_memory"]
        listed = client.get(f"{second.url}/v1/users/ann/memories", params={"type": "observation"}).json()["memories"]
    first_end = datetime.fromisoformat(first_run["started_at"]).timestamp() + first_run["seconds"]
    assert first_end <= datetime.fromisoformat(second_run["started_at"]).timestamp() + 0.05
    assert sorted(record["memory"] for record in listed) == ["ann lives in Hangzhou", "ann plays the guitar"]
    assert stop_all(first, second) == [0, 0]
    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        assert scope.store is not None
        assert scope.store.count(MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,))) == 2


# -- several worker processes -------------------------------------------------------------------------

STARTED = re.compile(r"Started server process \[(\d+)\]")


@pytest.mark.timeout(180)
def test_two_workers_answer_on_one_port_and_stop_on_sigterm(start_serve: Callable[..., ServeProcess], tmp_path: Path) -> None:
    store = tmp_path / "workers.db"
    served = start_serve(store, "--workers", "2")
    served.wait_until(lambda: served.output().count("Application startup complete.") == 2)
    workers = {int(pid) for pid in STARTED.findall(served.output())}
    assert len(workers) == 2 and served.process.pid not in workers
    for pid in workers:
        os.kill(pid, 0)  # alive

    with httpx.Client(timeout=60) as client:
        for number in range(6):  # a new connection each: the kernel hands them to either worker
            fact = {"texts": [f"ann's fact number {number}"]}
            response = httpx.post(f"{served.url}/v1/users/ann/memories", json=fact, timeout=60)
            assert response.status_code == 201, response.text
        listed = client.get(f"{served.url}/v1/users/ann/memories").json()["memories"]
    assert sorted(record["memory"] for record in listed) == [f"ann's fact number {number}" for number in range(6)]

    assert served.stop() == 0
    output = served.output()
    assert "Traceback" not in output and "in 2 processes (API docs at /docs)" in output
    # each worker logs as the parent command does: MemoryScope's INFO lines, with level and logger
    assert output.count("INFO memoryscope.server: access: no API keys") == 2
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
