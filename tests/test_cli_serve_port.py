"""`memoryscope serve` with a port it cannot use: one line naming --port and what to do, no
traceback, and nothing built or served."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.cli import main


@pytest.fixture
def listening() -> Iterator[int]:
    """A port another server holds (a socket listening on loopback)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_names_the_flag_and_the_range(
    port: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # were the port let through, the default store would land here
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--port", port])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --port: must be a whole number from 0 to 65535 (0: any free port), got {port!r}" in err
    assert "Traceback" not in err


def test_a_port_in_use_is_named_with_a_free_one_to_use_instead(
    listening: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORYSCOPE_LLM_API_BASE", raising=False)
    store = tmp_path / "m.db"
    assert main(["serve", "--port", str(listening), "--store", str(store)]) == 2
    captured = capsys.readouterr()
    assert f"error: --port {listening}: 127.0.0.1:{listening} is in use (another server?)" in captured.err
    suggested = int(captured.err.split("--port ")[-1].split()[0].rstrip(",;"))
    assert suggested != listening
    with socket.socket() as probe:  # the suggestion is really free
        probe.bind(("127.0.0.1", suggested))
    assert "serving" not in captured.err and "Traceback" not in captured.err
    assert not store.exists()  # checked before anything was built


def test_the_config_port_in_use_is_named_as_the_config_key(
    listening: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORYSCOPE_LLM_API_BASE", raising=False)
    monkeypatch.setenv("MEMORYSCOPE__SERVER__PORT", str(listening))
    assert main(["serve", "--store", str(tmp_path / "m.db")]) == 2
    err = capsys.readouterr().err
    assert f"error: server.port {listening} (config 'default'): 127.0.0.1:{listening} is in use" in err
