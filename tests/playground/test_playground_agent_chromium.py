"""The playground under `configs/agent.yaml`, in a real headless Chromium: a turn's steps (the
inner monologue, each function call with its result, the heartbeat's next step) and the context
window gauge with its warning and flush marks, from the reply's `memoryscope` extension; the core
memory blocks by name with size and limit, edited within the agent's limits. The agent's model is
the fake server, its steps queued. Skipped, with the reason, where Chromium is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

from playground_browser import chromium_driver, missing_chromium
from playground_page import all_css, chat, css, wait, wait_until_ready
from playground_stage import AgentStage

MISSING = missing_chromium()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "a browser is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, AgentStage]]:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-agent-test")
    with AgentStage(tmp_path) as stage:
        yield stage.url, stage


def test_a_turn_shows_the_agents_steps_and_its_context_window(served: tuple[str, AgentStage]) -> None:
    url, stage = served
    stage.queue_turn("Ann plays the cello.", "Noted, Ann.")
    with chromium_driver() as driver:
        driver.get(f"{url}/?user=ann")
        wait_until_ready(driver)
        assert driver.execute_script("return document.body.dataset.policy") == "agent"
        chat(driver, "I play the cello", "Noted, Ann.")
        steps = wait(driver, lambda d: all_css(d, "#steps li.step"), "the agent's steps never showed")
        assert len(steps) == 2 and css(driver, "#last-reply").get_attribute("open") is not None
        first = driver.execute_script(
            """
            const step = document.querySelector('#steps li.step');
            return {thought: step.querySelector('.monologue').textContent,
                    call: step.querySelector('.call code').textContent, result: step.querySelector('.call .result').textContent};
            """
        )
        assert first["thought"] == "Ann told me something to keep."
        assert first["call"].startswith("core_memory_append(") and "Ann plays the cello." in first["call"]
        assert json.loads(first["result"])["status"] == "OK"
        assert "send_message(" in steps[1].text and "Now I answer." in steps[1].text
        heartbeats = [bool(step.find_elements("css selector", ".heartbeat")) for step in steps]
        assert heartbeats == [True, False]  # the edit asked for another step; the message ended the turn
        gauge = driver.execute_script(
            """
            const gauge = document.getElementById('context-gauge');
            return {hidden: gauge.hidden, label: gauge.querySelector('svg').getAttribute('aria-label'),
                    used: Number(gauge.querySelector('.gauge-used').getAttribute('width')),
                    warning: Number(gauge.querySelector('.mark-warning').getAttribute('x1')),
                    flush: Number(gauge.querySelector('.mark-flush').getAttribute('x1')),
                    text: gauge.querySelector('.gauge-text').textContent};
            """
        )
        assert not gauge["hidden"] and " of 8192 tokens; warned at 70%" in gauge["label"]
        assert 0 < gauge["used"] < gauge["warning"] == 70 and gauge["flush"] > 99
        assert "warning at 70% · flush at 100%" in gauge["text"]

        # the core memory blocks by name, with size and limit; the agent's edit shows, and one made here
        human = '#tier-core .block[data-name="human"]'
        wait(
            driver,
            lambda d: "Ann plays the cello." in css(d, f"{human} textarea").get_attribute("value"),
            "the edit never showed",
        )
        names = [form.get_attribute("data-name") for form in all_css(driver, "#tier-core .block")]
        assert names == ["persona", "human"]
        limit = int(css(driver, f"{human} textarea").get_attribute("maxlength"))
        assert limit == 2000 and css(driver, f"{human} .block-size").text.endswith(f" / {limit} characters")
        box = css(driver, f"{human} textarea")
        box.clear()
        box.send_keys("Ann plays the viola.")
        css(driver, f"{human} button").click()
        wait(driver, lambda d: "Saved core memory block human" in css(d, "#operation-status").text, "the block was not saved")
        blocks = requests.get(f"{url}/v1/users/ann/blocks", timeout=30).json()["blocks"]
        assert [(b["name"], b["value"], b["size"]) for b in blocks][1] == ("human", "Ann plays the viola.", 20)

    # the same limit as the agent's tools, over REST too
    over = requests.put(f"{url}/v1/users/ann/blocks/human", json={"value": "x" * 2001}, timeout=30)
    assert over.status_code == 422 and "over its limit of 2,000" in over.json()["error"]["message"]
    unknown = requests.put(f"{url}/v1/users/ann/blocks/diary", json={"value": "hi"}, timeout=30)
    assert unknown.status_code == 422 and "persona" in unknown.json()["error"]["message"]
