"""MemoryScope 0.1.1's command line: `memoryscope --config_path=...` and the flag form, driven
through its slash commands; `/list_memory refresh_time=N` watching another process's writes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.chat.api_memory_chat import ApiMemoryChat
from memoryscope.chat.repl import ChatRepl
from memoryscope.cli import main
from memoryscope.compat.flags import is_flag_form, parse_flags
from memoryscope.errors import MemoryScopeError
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # the 0.1.x command line in subprocesses; `-m "not slow"` leaves it out

V01_CONFIG = Path(__file__).parent / "configs" / "v01_full.yaml"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    for name in ("OPENAI_API_BASE", "DASHSCOPE_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)
    fake = fake_openai
    fake.add_rule("what do I play", "You play the cello.")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    yield fake


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "demo_config.yaml"
    path.write_text(V01_CONFIG.read_text(encoding="utf-8").replace("STORE", str(tmp_path / "m.db")), encoding="utf-8")
    return path


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], script: str, *argv: str) -> str:
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_flags_parse_as_fire_read_them() -> None:
    argv = ["--language=en", "--enable_ranker=True", "--output_memory_max_count", "5", "--worker_params={'a': {'b': 1}}"]
    flags = parse_flags([*argv, "--nochat_stream"])
    assert flags == {
        "language": "en",
        "enable_ranker": True,
        "output_memory_max_count": 5,
        "worker_params": {"a": {"b": 1}},
        "chat_stream": False,
    }
    assert is_flag_form(["--config_path=x.yaml"]) and not is_flag_form(["chat", "--config", "x"]) and not is_flag_form(["--help"])
    with pytest.raises(MemoryScopeError, match=r"unknown flag --languag\. Did you mean --language"):
        parse_flags(["--languag=en"])


def test_config_path_form_runs_the_chat_with_every_slash_command(
    server: FakeOpenAIServer, config_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(
        monkeypatch,
        capsys,
        "/help\n"
        "/add_memory query=I play the cello in an orchestra\n"
        "/list_memory\n"
        "/stream\n"
        "what do I play?\n"
        "/clear\n"
        "/retrieve_memory query=cello\n"
        "/exit\n",
        f"--config_path={config_path}",
    )
    for command in ("/exit", "/clear", "/help", "/stream", "/list_memory", "/delete_memory", "/delete_all", "/add_memory"):
        assert command in out  # /help lists every 0.1.1 command
    assert "added 1 memory" in out
    assert "I play the cello in an orchestra (id: " in out
    assert "stream: off" in out  # cli_memory_chat streams by default, /stream switched it
    assert "AI: You play the cello." in out
    assert "\033[2J" in out  # /clear


def test_delete_by_id_in_key_value_form(
    server: FakeOpenAIServer, config_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run(monkeypatch, capsys, "/add_memory query=I live in Hangzhou\n/exit\n", f"--config_path={config_path}")
    with MemoryScope(config_path=str(config_path)) as scope:
        assert scope.store is not None
        [node] = scope.store.scan(MemoryFilter("user"))
    script = f"/delete_memory memory_id={node.memory_id}\n/list_memory\n/exit\n"
    out = run(monkeypatch, capsys, script, f"--config_path={config_path}")
    assert "deleted 1 memory" in out and "Hangzhou" not in out.split("deleted 1 memory")[1]


def test_flag_form_builds_the_config_from_arguments(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(
        monkeypatch,
        capsys,
        "/add_memory query=I keep bees\n/list_memory\n/exit\n",
        "--language=en",
        "--memory_chat_class=cli_memory_chat",
        "--generation_backend=openai_generation",
        "--generation_model=gpt-4o",
        "--embedding_backend=openai_embedding",
        "--embedding_model=text-embedding-3-small",
        "--enable_ranker=False",
        f"--store_path={tmp_path / 'flags.db'}",
    )
    assert "MemoryScope chat with user's memories" in out
    assert "I keep bees" in out
    assert (tmp_path / "flags.db").exists()
    assert any(r.path.endswith("/embeddings") for r in server.requests)  # the flags' embedding backend did the work


def test_list_memory_refresh_shows_another_process_writes(server: FakeOpenAIServer, config_path: Path) -> None:
    """Two terminals: one watches `/list_memory refresh_time=1`, the other adds memories."""
    with MemoryScope(config_path=str(config_path)) as watcher, MemoryScope(config_path=str(config_path)) as writer:
        writer.default_memory_service.add_memory(query="first memory")
        out = io.StringIO()
        sleeps: list[float] = []

        def sleep(seconds: float) -> None:  # the other terminal writes while this one waits
            sleeps.append(seconds)
            if len(sleeps) == 1:
                writer.default_memory_service.add_memory(query="second memory, added meanwhile")
            else:
                raise KeyboardInterrupt  # Ctrl-C ends the watch

        chat = watcher.default_memory_chat
        assert isinstance(chat, ApiMemoryChat)
        lines = iter(["/list_memory refresh_time=1", "/exit"])
        repl = ChatRepl(chat, out=out, read_line=lambda _: next(lines), sleep=sleep)
        assert repl.run() == 0
    screens = out.getvalue().split("\033[2J\033[H")[1:]
    assert sleeps == [1.0, 1.0] and len(screens) == 2
    assert "first memory" in screens[0] and "second memory" not in screens[0]
    assert "second memory, added meanwhile" in screens[1]
    assert "(stopped refreshing /list_memory)" in screens[1]


def test_console_script_takes_the_flag_form(server: FakeOpenAIServer, config_path: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "sk-cli-test", "OPENAI_BASE_URL": server.base_url}
    done = subprocess.run(
        [sys.executable, "-c", "from memoryscope import cli; cli()", f"--config_path={config_path}"],
        input="/add_memory query=I collect stamps\n/list_memory\n/exit\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "I collect stamps" in done.stdout
