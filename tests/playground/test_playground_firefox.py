"""The web playground in a real headless Firefox (ESR), against a real server and the fake LLM:
the main steps of tests/playground/test_playground_chromium.py, in the other engine. Skipped,
with the reason, where Firefox or marionette-driver is missing."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

from playground_browser import FirefoxPage, firefox_page, missing_firefox
from playground_page import (
    all_css,
    chat,
    click,
    css,
    memory_texts,
    record_reply_texts,
    run_operation,
    wait,
    wait_for_memory,
    wait_until_ready,
)
from playground_stage import OLDER_FACT, SAID, USER, PlaygroundStage

MISSING = missing_firefox()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "Firefox is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]


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
