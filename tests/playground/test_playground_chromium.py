"""The web playground in a real headless Chromium, against a real server and the fake LLM
(tests/playground/test_playground_firefox.py runs the main steps in Firefox).

A person's steps: type messages and watch the replies stream in, see the memories and timings
of the last reply, watch the turns appear in the memory viewer, run consolidation and see the
observations it learns (and the fact it replaced, linked to its replacement), delete one; the
same by keyboard alone, on a phone-width screen, and with an API key typed into the page.
Skipped, with the reason, where Chromium, its driver or selenium is missing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

from playground_browser import chromium_driver, missing_chromium
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

from memoryscope.server.access import ApiKey, KeyRing

MISSING = missing_chromium()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "a browser is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]

GUITAR, HANGZHOU = SAID[0], SAID[1]  # two turns: four messages, one short of automatic consolidation


@pytest.fixture
def driver() -> Iterator[Any]:
    with chromium_driver() as browser:
        yield browser


def test_chat_streams_replies_and_consolidation_fills_the_viewer(stage: PlaygroundStage, driver: Any) -> None:
    driver.get(f"{stage.url}/?user={USER}")
    wait_until_ready(driver)
    assert css(driver, "#memories-user").text == USER
    wait_for_memory(driver, OLDER_FACT)
    assert memory_texts(driver, "observation") == [OLDER_FACT]

    record_reply_texts(driver)
    chat(driver, GUITAR[0], GUITAR[2])
    reply = GUITAR[2]
    partial = [text for text in driver.execute_script("return window.replyTexts") if 0 < len(text) < len(reply)]
    assert partial and all(reply.startswith(text) for text in partial), "the reply appeared whole, not streamed"
    chats = [r for r in stage.fake.requests if r.path.endswith("/chat/completions") and GUITAR[0] in str(r.body)]
    assert chats and all(r.body.get("stream") is True for r in chats)

    chat(driver, HANGZHOU[0], HANGZHOU[2])
    texts = [bubble.text for bubble in all_css(driver, "#messages .message .body")]
    assert texts == [GUITAR[0], GUITAR[2], HANGZHOU[0], HANGZHOU[2]]

    click(driver, "#last-reply summary")  # the memories and timings behind the last reply
    used = [item.text for item in all_css(driver, "#used-memories li")]
    assert any(OLDER_FACT in line for line in used) and any(GUITAR[0] in line for line in used)
    steps = [row.find_elements("css selector", "td")[0].text for row in all_css(driver, "#timings tbody tr")]
    assert "retrieve_memory" in steps and "fuse_rerank" in steps and "whole reply (browser)" in steps

    # the turns reach the viewer by themselves (it polls), newest first
    wait(driver, lambda d: len(memory_texts(d, "conversation")) == 4, "the four messages never appeared")
    assert memory_texts(driver, "conversation") == [HANGZHOU[2], HANGZHOU[0], GUITAR[2], GUITAR[0]]

    status = run_operation(driver, "consolidate_memory")
    assert "info_filter" in status and "store_memory" in status
    guitar = wait_for_memory(driver, "ann plays the guitar")
    hangzhou = wait_for_memory(driver, "ann lives in Hangzhou")
    assert guitar["meta"].startswith("learnt ") and guitar["status"] == "valid"

    # the fact Hangzhou replaced stays listed, expired, linked to its replacement
    beijing = wait_for_memory(driver, OLDER_FACT)
    assert beijing["status"] == "expired"
    assert (beijing["link_text"], beijing["link_href"]) == ("ann lives in Hangzhou", f"#{hangzhou['element']}")
    click(driver, "#show-expired")
    wait(driver, lambda d: OLDER_FACT not in memory_texts(d, "observation"), "hiding expired memories did not hide it")

    click(driver, f"#{guitar['element']} .delete-one")
    wait(driver, lambda d: "ann plays the guitar" not in memory_texts(d, "observation"), "the deleted memory stayed")
    assert "Deleted: ann plays the guitar" in css(driver, "#operation-status").text
    assert stage.scope is not None
    left = {record.id for record in stage.scope.get_all(USER, include_expired=True)}
    assert guitar["id"] not in left and hangzhou["id"] in left


def test_what_background_consolidation_learns_appears_by_itself(stage: PlaygroundStage, driver: Any) -> None:
    driver.get(f"{stage.url}/?user={USER}")
    for said, _, reply in SAID:  # the fifth message of the user's: consolidation runs by itself (trigger_messages: 5)
        chat(driver, said, reply)
    learnt = wait_for_memory(driver, "ann runs every morning")  # no button pressed, no reload
    assert learnt["status"] == "valid"
    assert css(driver, "#operation-status").text == ""


def test_everything_works_from_the_keyboard(stage: PlaygroundStage, driver: Any) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    driver.get(f"{stage.url}/?user={USER}")
    wait_until_ready(driver)
    wait_for_memory(driver, OLDER_FACT)

    stops: list[str] = []
    for _ in range(28):  # Tab through the page from the top, naming each stop
        ActionChains(driver).send_keys(Keys.TAB).perform()
        focused = driver.switch_to.active_element
        names = (focused.get_attribute(attribute) for attribute in ("id", "data-operation", "aria-label"))
        stops.append(next((name for name in names if name), ""))
    expected = ["user-name", "api-key", "chat-input", "send", "forget-chat", "consolidate_memory", "refresh", "delete-all",
                "show-expired", "search-query", "search-go", "search-clear"]  # fmt: skip
    assert all(stop in stops for stop in expected), stops
    for action in ("Edit memory", "Pin memory", "History of memory", "Delete memory"):
        assert f"{action}: {OLDER_FACT}" in stops, stops
    assert stops.index("user-name") < stops.index("chat-input") < stops.index("consolidate_memory")

    box = css(driver, "#chat-input")
    box.send_keys(GUITAR[0], Keys.SHIFT, Keys.ENTER)  # Shift+Enter: a new line, not a send
    assert box.get_attribute("value") == GUITAR[0] + "\n"
    box.send_keys(Keys.BACKSPACE, Keys.ENTER)  # Enter sends
    wait(driver, lambda d: GUITAR[2] in css(d, "#messages").text and css(d, "#send").is_enabled(), "Enter sent nothing")
    assert driver.switch_to.active_element.get_attribute("id") == "chat-input"  # ready for the next message

    user_box = css(driver, "#user-name")
    user_box.send_keys(Keys.END, Keys.BACKSPACE * len(USER), "bob", Keys.ENTER)  # switch user by keyboard
    wait(driver, lambda d: css(d, "#memories-user").text == "bob", "Enter in the user box did not switch")
    wait(driver, lambda d: all_css(d, '.memory-group[data-type="observation"] .empty'), "bob's empty viewer never showed")
    assert all_css(driver, "#messages .message") == []

    user_box.send_keys(Keys.END, Keys.BACKSPACE * 3, USER, Keys.ENTER)
    wait(driver, lambda d: len(memory_texts(d, "conversation")) == 2, "ann's messages never reappeared")
    assert len(all_css(driver, "#messages .message")) == 2  # and ann's chat, kept in this browser
    target = wait_for_memory(driver, OLDER_FACT)

    def pressed_space(d: Any) -> bool:
        css(d, f"#{target['element']} .delete-one").send_keys(Keys.SPACE)  # a button acts on Space as on a click
        return True

    wait(driver, pressed_space, "could not reach the delete button")
    wait(driver, lambda d: OLDER_FACT not in memory_texts(d, "observation"), "Space on a delete button deleted nothing")


def test_readable_at_phone_width(stage: PlaygroundStage, driver: Any) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
    )
    driver.get(f"{stage.url}/?user={USER}")
    wait_until_ready(driver)
    chat(driver, GUITAR[0], GUITAR[2])
    wait(driver, lambda d: len(memory_texts(d, "conversation")) == 2, "the messages never appeared")
    layout = driver.execute_script(
        """
        const box = (selector) => document.querySelector(selector).getBoundingClientRect();
        return {
          scrollWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
          chat: box('.pane.chat'), memories: box('.pane.memories'), input: box('#chat-input'),
          fontSize: parseFloat(getComputedStyle(document.querySelector('.memory-text')).fontSize),
        };
        """
    )
    assert layout["viewport"] == 390
    assert layout["scrollWidth"] <= layout["viewport"], "the page scrolls sideways on a phone"
    assert layout["memories"]["top"] >= layout["chat"]["bottom"], "the panes should stack on a phone"
    assert layout["chat"]["width"] >= 360 and layout["input"]["width"] >= 200
    assert layout["fontSize"] >= 14


def test_an_api_key_typed_into_the_page_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: Any) -> None:
    from selenium.webdriver.common.keys import Keys

    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-playground-llm")
    key = "pg-key-for-ann-only"
    keys = KeyRing.of(ApiKey("web", hashlib.sha256(key.encode()).digest(), users=frozenset({USER})))
    with PlaygroundStage(tmp_path, keys=keys) as stage:
        driver.get(f"{stage.url}/?user={USER}")
        wait(driver, lambda d: "API key" in css(d, "#notice").text, "a missing key was not explained")
        assert all_css(driver, "#operation-buttons button") == []

        css(driver, "#api-key").send_keys(key, Keys.TAB)  # the key applies once the box is left
        wait_until_ready(driver)
        wait_for_memory(driver, OLDER_FACT)
        chat(driver, GUITAR[0], GUITAR[2])

        click(driver, "#config-details summary")  # a user's key may not read the server's config
        wait(driver, lambda d: "admin API key" in css(d, "#config-text").text, "the config's refusal was not explained")
        assert "sk-playground-llm" not in driver.page_source
