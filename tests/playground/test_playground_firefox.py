"""The web playground in a real headless Firefox (ESR), against a real server and the fake LLM:
the main steps of tests/playground/test_playground_chromium.py, in the other engine. Skipped,
with the reason, where Firefox or marionette-driver is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

from playground_browser import FirefoxPage, firefox_page, missing_firefox
from playground_page import (
    ENTER,
    all_css,
    chat,
    click,
    css,
    memories,
    memory_texts,
    record_reply_texts,
    run_operation,
    wait,
    wait_for_memory,
    wait_until_ready,
)
from playground_stage import OLDER_FACT, PROFILE, SAID, TURNS, USER, AgentStage, MemoryosStage, PlaygroundStage

MISSING = missing_firefox()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "Firefox is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]
ADDED = "obs_customized"


def test_chat_consolidate_and_delete_in_firefox(stage: PlaygroundStage) -> None:
    with firefox_page() as page:
        run_main_steps(page, stage)


def run_main_steps(page: FirefoxPage, stage: PlaygroundStage) -> None:
    page.get(f"{stage.url}/?user={USER}")
    wait_until_ready(page)
    wait_for_memory(page, OLDER_FACT)
    record_reply_texts(page)
    for said, _, reply in SAID[:2]:
        chat(page, said, reply)
    reply = SAID[1][2]
    seen = page.execute_script("return window.replyTexts")
    assert any(0 < len(text) < len(reply) and reply.startswith(text) for text in seen), "the reply was not streamed"
    wait(page, lambda p: len(memory_texts(p, "conversation")) == 4, "the four messages never appeared")

    click(page, "#last-reply summary")
    cells = "#timings tbody tr td:first-child"
    steps = page.execute_script(f"return [...document.querySelectorAll('{cells}')].map((cell) => cell.textContent)")
    assert "retrieve_memory" in steps and "whole reply (browser)" in steps

    run_operation(page, "consolidate_memory")
    guitar = wait_for_memory(page, "ann plays the guitar")
    hangzhou = wait_for_memory(page, "ann lives in Hangzhou")
    beijing = wait_for_memory(page, OLDER_FACT)
    assert beijing["status"] == "expired" and beijing["link_href"] == f"#{hangzhou['element']}"

    click(page, f"#{guitar['element']} .delete-one")
    wait(page, lambda p: "ann plays the guitar" not in memory_texts(p, "observation"), "the deleted memory stayed")
    assert stage.scope is not None
    assert guitar["id"] not in {record.id for record in stage.scope.get_all(USER, include_expired=True)}

    click(page, "#config-details summary")
    shown = wait(page, lambda p: css(p, "#config-text").text.startswith("{") and css(p, "#config-text").text, "no config")
    assert json.loads(shown)["store"]["class"] == "SqliteMemoryStore"
    assert all_css(page, "#messages .message.error") == []


def test_manage_memories_and_each_policy_view_in_firefox(
    stage: PlaygroundStage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Search (Enter in the box), edit, pin, history and undo, paging, and the MemoryOS and agent
    views, in one Firefox: what the Chromium tests check, by the same page steps."""
    added = requests.post(
        f"{stage.url}/v1/users/cleo/memories", json={"texts": [f"cleo note {n}" for n in range(25)]}, timeout=30
    )
    assert added.status_code == 201
    with firefox_page(width=1280, height=1400) as page:
        page.get(f"{stage.url}/?user=cleo")
        wait(page, lambda p: len(memory_texts(p, ADDED)) == 20, "the first page of 20 never showed")
        click(page, f'#group-{ADDED} [data-role="older"]')
        wait(page, lambda p: len(memory_texts(p, ADDED)) == 5, "Older did not show the last 5")
        click(page, f'#group-{ADDED} [data-role="newer"]')

        css(page, "#search-query").send_keys("cleo note 7" + ENTER)  # Enter in the box searches
        wait(page, lambda p: [m for m in memories(p) if m["type"] == "results"], "no search results")

        click(page, "#search-clear")
        wait(page, lambda p: len(memory_texts(p, ADDED)) == 20, "clearing the search did not bring the list back")
        first = next(m for m in memories(page) if m["type"] == ADDED)
        note, text = first["id"], first["text"]
        click(page, f"#memory-{note} .edit-one")
        box = css(page, f"#edit-text-{note}")
        box.clear()
        box.send_keys("cleo note zero")
        click(page, f"#memory-{note} .edit-save")
        wait(page, lambda p: "cleo note zero" in memory_texts(p, ADDED), "the edit was not shown")
        click(page, f"#memory-{note} .pin-one")
        wait(page, lambda p: css(p, f"#memory-{note}").get_attribute("data-pinned") == "true", "not pinned")
        click(page, f"#memory-{note} .history-one")
        wait(page, lambda p: len(all_css(p, f"#memory-{note} .change")) == 3, "the history is not created, edited, pinned")
        click(page, f"#memory-{note} .change:last-child .undo-run")  # undo the pin: the edit stays
        wait(page, lambda p: css(p, f"#memory-{note}").get_attribute("data-pinned") == "false", "undo did not unpin")
        assert "cleo note zero" in memory_texts(page, ADDED) and text not in memory_texts(page, ADDED)

    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-playground-llm")
    with MemoryosStage(tmp_path / "memoryos") as memoryos, firefox_page() as page:
        memoryos.add_turns(len(TURNS))
        page.get(f"{memoryos.url}/?user={USER}")
        wait(page, lambda p: all_css(p, "#tier-mid .segment"), "the MemoryOS tiers never showed")
        run_operation(page, "memoryos_force_update")
        wait(page, lambda p: css(p, "#tier-long .profile").text == PROFILE, "the promotion never showed")

    with AgentStage(tmp_path / "agent") as agent, firefox_page() as page:
        agent.queue_turn("Ann plays the cello.", "Noted, Ann.")
        page.get(f"{agent.url}/?user={USER}")
        chat(page, "I play the cello", "Noted, Ann.")
        wait(page, lambda p: len(all_css(p, "#steps li.step")) == 2, "the agent's steps never showed")
        assert "warning at 70%" in css(page, "#context-gauge .gauge-text").text
        wait(page, lambda p: all_css(p, '#tier-core .block[data-name="human"]'), "no core memory blocks")
