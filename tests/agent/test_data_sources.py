"""Data sources (MemGPT's `memgpt load` and `/attach`): text cut into passages, `memoryscope load`
from files, folders, stdin and PDF (MemGPT's spelling too), reloading without duplicates, a
source kept from other users, and `memoryscope agent`'s `/attach`, `/summarize` and `//`."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest
from agent_stage import agent_requests, call, say, step, tool_results

from memoryscope.app import MemoryScope
from memoryscope.cli import main
from memoryscope.cli.agent import manage_agents, run_agent
from memoryscope.door import Document, chunk_text
from memoryscope.errors import InvalidInputError, NotFoundError
from memoryscope.testing.fake_openai import FakeOpenAIServer


def write_config(tmp_path: Path) -> str:
    path = tmp_path / "sources.yaml"
    store = f"memory_store:\n  path: {tmp_path / 'sources.db'}\n"
    no_scheduler = "memory_service:\n  memoryscope_service:\n    enable_scheduler: false\n"
    path.write_text(f"extends: agent\n{store}{no_scheduler}", encoding="utf-8")
    return str(path)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> str:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-sources")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    return write_config(tmp_path)


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica, its cross-reference table exact."""
    content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_text_is_cut_by_paragraphs_into_overlapping_passages() -> None:
    paragraphs = [f"Paragraph {n} says " + " ".join(f"w{n}x{i}" for i in range(12 * n)) + "." for n in range(1, 15)]
    chunks = chunk_text("\n\n".join(paragraphs), size=400, overlap=80)
    assert len(chunks) > 5 and all(len(chunk) <= 400 for chunk in chunks)
    assert chunks[0].startswith("Paragraph 1 says") and "\n\n" in chunks[0]  # short paragraphs share a passage
    for before, after in itertools.pairwise(chunks):
        assert after[:15] in before[-80:]  # each begins with the end of the one before
    words = {word for paragraph in paragraphs for word in paragraph.split()}
    assert words <= {word for chunk in chunks for word in chunk.split()}  # nothing lost, long ones cut
    assert chunk_text("One line.") == ["One line."] and chunk_text("  \n\n ") == []
    with pytest.raises(InvalidInputError, match="chunk overlap 300"):
        chunk_text("x", size=400, overlap=300)


def test_memoryscope_load_reads_files_folders_stdin_and_pdf_once(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    (notes / "deeper").mkdir(parents=True)
    (notes / "wifi.txt").write_text("The office wifi password is heron-42.", encoding="utf-8")
    (notes / "lunch.md").write_text("# Lunch\n\nLunch is at noon in the garden.", encoding="utf-8")
    (notes / "table.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (notes / "deeper" / "parking.md").write_text("Parking is in lot C.", encoding="utf-8")
    pdf = tmp_path / "rules.pdf"
    pdf.write_bytes(tiny_pdf("Badges must be worn at all times."))
    monkeypatch.setattr("sys.stdin", io.StringIO("Visitors sign in at the front desk.\n"))

    assert main(["load", "--config", config, "--user", "ann", "--name", "office", str(notes), str(pdf), "-"]) == 0
    shown = capsys.readouterr()
    assert "loaded 4 documents into data source 'office': 4 passages added, 0 already there (4 in all)" in shown.out
    assert "skipped" in shown.err and "table.csv" in shown.err and "load office: 4/4" in shown.err  # progress on stderr
    # again, and MemGPT's spelling: nothing is added twice; --recursive reaches the subfolder
    argv = ["load", "directory", "--config", config, "--user", "ann", "--name", "office", "--input-dir", str(notes)]
    assert main([*argv, "--recursive", "--input-files", str(pdf)]) == 0
    assert "4 documents into data source 'office': 1 passages added, 3 already there (5 in all)" in capsys.readouterr().out
    assert main(["load", "--config", config, "--user", "ann", "--list"]) == 0
    assert "office\t5 passages from 5 documents" in capsys.readouterr().out
    (notes / "wifi.txt").write_text("The office wifi password is osprey-7.", encoding="utf-8")  # changed
    assert main(["load", "--config", config, "--user", "ann", "--name", "office", str(notes / "wifi.txt")]) == 0
    assert "1 passages added, 0 already there, 1 no longer in their documents removed (5 in all)" in capsys.readouterr().out

    with MemoryScope(config) as scope:
        door = scope.door
        ann, bob = door.caller("ann"), door.caller("bob")
        found = door.search_sources(ann, "what must be worn?", sources=["office"], top_k=2)
        assert "Badges must be worn at all times." in found[0].memory and found[0].metadata["document"] == str(pdf)
        assert found[0].metadata["data_source"] == "office"
        # another user's source is not theirs: not listed, not searched, not attached
        assert door.list_sources(bob) == [] and door.search_sources(bob, "badges", sources=["office"]) == []
        with pytest.raises(NotFoundError, match="has no data source 'office'"):
            door.attach_source(bob, "office")
        # the passages are not listed or searched with the user's memories
        assert door.get_all(ann) == [] and door.search(ann, "badges") == []
        wifi = [r.memory for r in door.search_sources(ann, "wifi password", sources=["office"], top_k=10) if "wifi" in r.memory]
        assert wifi == ["The office wifi password is osprey-7."]

    assert main(["load", "--config", config, "--user", "ann", "--name", "office", str(notes / "table.csv")]) == 2
    assert "cannot read .csv" in capsys.readouterr().err
    assert main(["load", "--config", config, "--user", "ann", str(pdf)]) == 2
    assert "--name NAME" in capsys.readouterr().err
    assert main(["load", "--config", config, "--user", "ann", "--delete", "office"]) == 0
    assert "deleted data source 'office' (5 passages)" in capsys.readouterr().out
    with MemoryScope(config) as scope:
        assert scope.door.list_sources(scope.door.caller("ann")) == []
        assert scope.door.search_sources(scope.door.caller("ann"), "badges", sources=["office"]) == []  # passages gone


def test_attach_summarize_and_multiline_input_in_memoryscope_agent(
    config: str, fake_openai: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryScope(config) as scope:
        scope.door.load_source(scope.door.caller("ann"), "office", [Document("wifi", "The office wifi password is heron-42.")])
    fake_openai.queue_replies(
        step(call("archival_memory_search", heartbeat=True, query="wifi password")),
        say("It is heron-42."),
        say("Got both lines."),
        "Ann asked for the wifi password (heron-42) and sent two lines.",  # the summary /summarize asks for
    )
    lines = [
        "/summarize", "/attach", "/attach office", "/attach", "What is the wifi password?",
        "//", "first line", "/not a command", "//", "/summarize", "/memory", "/detach office", "/attach",
    ]  # fmt: skip
    out, typed = io.StringIO(), io.StringIO("".join(f"{line}\n" for line in lines))
    assert run_agent(config, "ann", agent_name="helper", stdin=typed, stdout=out) == 0
    shown = out.getvalue()
    assert "error: nothing to summarise" in shown
    assert shown.count("data sources: office\n") == 2 and "data sources: office (attached)" in shown
    assert "attached data source 'office'" in shown and "detached data source 'office'" in shown
    steps = agent_requests(fake_openai)
    assert "heron-42" in tool_results(steps[1])[-1]["content"]["results"][0]
    assert "assistant: It is heron-42." in shown and "assistant: Got both lines." in shown
    assert '"message": "first line\\n/not a command"' in steps[2]["messages"][-1]["content"]
    assert "/summarize succeeded" in shown and "summary: Ann asked for the wifi password" in shown
    assert "unknown command" not in shown
    # the named agent was made on first use, and is listed
    listed = io.StringIO()
    assert manage_agents(config, "ann", stdout=listed) == 0
    assert listed.getvalue().startswith("helper\t")


def test_load_needs_no_llm_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent config requires its LLM; loading only embeds, so it opens without the LLM's key."""
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    notes = tmp_path / "notes.txt"
    notes.write_text("The spare key is under the blue pot.", encoding="utf-8")
    assert main(["load", "--config", write_config(tmp_path), "--name", "home", str(notes)]) == 0
    assert "1 passages added" in capsys.readouterr().out
