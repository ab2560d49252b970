"""Managing memories in the playground, in a real headless Chromium against one served app (the
`default` config, the fake LLM): search with the API's filters, edit a memory's text and metadata,
pin it, read its history and undo a run; paging through 10,000 memories; the chat kept per user
across a reload; no polling of a user who has no memory yet; an expired memory whose replacement
was deleted. Each test uses users of its own. Skipped, with the reason, where Chromium is missing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import numpy
import pytest

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

import requests
from playground_browser import chromium_driver, missing_chromium
from playground_page import all_css, chat, click, css, memories, wait, wait_for_memory, wait_until_ready
from playground_stage import SAID, PlaygroundStage

from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType

MISSING = missing_chromium()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "a browser is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]
ADDED = "obs_customized"


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlaygroundStage]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-playground-llm")
        with PlaygroundStage(tmp_path_factory.mktemp("memories")) as served:
            yield served


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with chromium_driver() as browser:
        yield browser


def add(stage: PlaygroundStage, user: str, text: str, metadata: dict[str, Any] | None = None) -> str:
    response = requests.post(f"{stage.url}/v1/users/{user}/memories", json={"texts": [text], "metadata": metadata}, timeout=30)
    assert response.status_code == 201, response.text
    return str(response.json()["added"][0]["id"])


def texts(driver: Any, memory_type: str) -> list[str]:
    return [memory["text"] for memory in memories(driver) if memory["type"] == memory_type]


def record(stage: PlaygroundStage, memory_id: str) -> dict[str, Any]:
    return dict(requests.get(f"{stage.url}/v1/memories/{memory_id}", timeout=30).json())


def test_search_with_filters_then_edit_pin_and_undo_from_the_history(stage: PlaygroundStage, driver: Any) -> None:
    bees = add(stage, "cleo", "cleo keeps bees on the roof", {"source": "crm"})
    tea = add(stage, "cleo", "cleo drinks jasmine tea", {"source": "chat", "mood": "calm"})
    driver.get(f"{stage.url}/?user=cleo")
    wait_until_ready(driver)
    wait_for_memory(driver, "cleo drinks jasmine tea", ADDED)

    css(driver, "#search-query").send_keys("bees on the roof")  # a search: the API's ranked results, scored
    click(driver, "#search-go")
    found = wait(driver, lambda d: [m for m in memories(d) if m["type"] == "results"], "no search results")
    assert found[0]["text"] == "cleo keeps bees on the roof" and "score " in found[0]["meta"]
    assert "matching “bees on the roof”" in css(driver, "#search-summary").text

    click(driver, "#search-clear")  # filters alone: the groups, only what the metadata filter lets through
    click(driver, "#search-filters summary")
    css(driver, "#search-metadata").send_keys('{"source": "chat"}')
    click(driver, f'#type-filter-options input[value="{ADDED}"]')
    click(driver, "#search-go")
    wait(driver, lambda d: texts(d, ADDED) == ["cleo drinks jasmine tea"], "the metadata filter was not applied")
    assert {m["type"] for m in memories(driver)} == {ADDED}  # only the type asked for
    css(driver, "#search-metadata").send_keys("{")  # a broken filter is explained, not sent
    click(driver, "#search-go")
    wait(driver, lambda d: "JSON object" in css(d, "#search-summary").text, "a broken filter was not explained")
    click(driver, "#search-clear")
    wait(driver, lambda d: len(texts(d, ADDED)) == 2, "clearing the search did not bring both back")

    click(driver, f"#memory-{tea} .edit-one")  # edit the text and the metadata: a key taken out is removed
    box = css(driver, f"#edit-text-{tea}")
    box.clear()
    box.send_keys("cleo drinks green tea")
    metadata = css(driver, f"#edit-metadata-{tea}")
    metadata.clear()
    metadata.send_keys('{"source": "chat", "rating": 5}')
    click(driver, f"#memory-{tea} .edit-save")
    wait(driver, lambda d: "cleo drinks green tea" in texts(d, ADDED), "the edit was not shown")
    saved = record(stage, tea)
    assert saved["memory"] == "cleo drinks green tea" and saved["metadata"] == {"source": "chat", "rating": 5}
    assert "rating=5" in wait_for_memory(driver, "cleo drinks green tea", ADDED)["meta"]

    click(driver, f"#memory-{bees} .pin-one")  # pin, and the button says what it will do next
    wait(driver, lambda d: css(d, f"#memory-{bees}").get_attribute("data-pinned") == "true", "pinning was not shown")
    assert record(stage, bees)["pinned"] is True
    assert css(driver, f"#memory-{bees} .pin-one").text == "Unpin"
    click(driver, f"#memory-{bees} .pin-one")
    wait(driver, lambda d: css(d, f"#memory-{bees}").get_attribute("data-pinned") == "false", "unpinning was not shown")
    assert record(stage, bees)["pinned"] is False

    click(driver, f"#memory-{tea} .history-one")  # its history: added, then updated; undo the update
    rows = wait(
        driver,
        lambda d: len(all_css(d, f"#memory-{tea} .history .change")) >= 2 and all_css(d, f"#memory-{tea} .change"),
        "no history",
    )
    actions = [row.get_attribute("data-action") for row in rows]
    assert actions[0] == "created" and "updated" in actions
    assert "“cleo drinks jasmine tea” → “cleo drinks green tea”" in rows[actions.index("updated")].text
    click(driver, f'#memory-{tea} .change[data-action="updated"] .undo-run')
    wait(driver, lambda d: "cleo drinks jasmine tea" in texts(d, ADDED), "undo did not put the text back")
    assert record(stage, tea)["memory"] == "cleo drinks jasmine tea"
    assert "Undid run" in css(driver, "#operation-status").text
    wait(driver, lambda d: len(all_css(d, f"#memory-{tea} .history .change")) > len(rows), "the history did not grow")


def test_ten_thousand_memories_are_paged_and_stay_fast(stage: PlaygroundStage, driver: Any) -> None:
    assert stage.scope is not None and stage.scope.store is not None
    nodes = [
        MemoryNode(user_name="dora", content=f"dora note {n:05d}", memory_type=MemoryType.OBS_CUSTOMIZED) for n in range(10_000)
    ]
    store = stage.scope.store
    unit = numpy.zeros((len(nodes), store.dimension), dtype=numpy.float32)  # vectors given: nothing to embed
    unit[:, 0] = 1.0
    store.upsert(nodes, unit)
    started = time.monotonic()
    driver.get(f"{stage.url}/?user=dora")
    wait(driver, lambda d: len(texts(d, ADDED)) == 20, "the first page never showed")
    assert time.monotonic() - started < 10
    first = texts(driver, ADDED)
    assert "(1–20, more)" in css(driver, f"#group-{ADDED} .count").text
    click(driver, f'#group-{ADDED} [data-role="older"]')
    wait(driver, lambda d: texts(d, ADDED) and texts(d, ADDED)[0] not in first, "Older showed the same page")
    assert len(texts(driver, ADDED)) == 20 and "(21–40, more)" in css(driver, f"#group-{ADDED} .count").text
    click(driver, f'#group-{ADDED} [data-role="newer"]')
    wait(driver, lambda d: texts(d, ADDED) == first, "Newer did not go back to the first page")
    assert len(all_css(driver, ".memory")) <= 60  # a page per group, never the whole store


def test_the_chat_is_kept_per_user_across_a_reload(stage: PlaygroundStage, driver: Any) -> None:
    driver.get(f"{stage.url}/?user=emil")
    chat(driver, SAID[0][0], SAID[0][2])
    driver.refresh()
    wait_until_ready(driver)
    bubbles = wait(driver, lambda d: [b.text for b in all_css(d, "#messages .message .body")], "the chat was lost")
    assert bubbles == [SAID[0][0], SAID[0][2]]
    driver.get(f"{stage.url}/?user=fay")  # another user: another chat
    wait_until_ready(driver)
    assert all_css(driver, "#messages .message") == []
    driver.get(f"{stage.url}/?user=emil")
    wait(driver, lambda d: len(all_css(d, "#messages .message")) == 2, "emil's chat did not come back")
    click(driver, "#forget-chat")
    driver.refresh()
    wait_until_ready(driver)
    assert all_css(driver, "#messages .message") == []


def _not_found_answers(stage: PlaygroundStage) -> int:
    metrics = requests.get(f"{stage.url}/metrics", timeout=30).text
    counts = re.findall(r'memoryscope_http_requests_total\{[^}]*status="404"[^}]*\} (\d+)', metrics)
    return sum(int(count) for count in counts)


def test_a_user_without_memories_is_not_polled(stage: PlaygroundStage, driver: Any) -> None:
    driver.get(f"{stage.url}/?user=gus")
    wait_until_ready(driver)
    wait(driver, lambda d: all_css(d, '.memory-group[data-type="observation"] .empty'), "gus's empty viewer never showed")
    time.sleep(0.5)
    before = _not_found_answers(stage)
    time.sleep(5)  # two polls and more
    assert _not_found_answers(stage) == before
    add(stage, "gus", "gus collects stamps")  # from another client: shown on Refresh
    click(driver, "#refresh")
    wait_for_memory(driver, "gus collects stamps", ADDED)


def test_a_replacement_since_deleted_is_said_so_not_linked(stage: PlaygroundStage, driver: Any) -> None:
    assert stage.scope is not None and stage.scope.store is not None
    newer = MemoryNode(user_name="hal", content="hal lives in Lyon")
    kept = MemoryNode(user_name="hal", content="hal works at the bakery")
    older = MemoryNode(user_name="hal", content="hal lives in Paris", status=MemoryStatus.EXPIRED, superseded_by=newer.memory_id)
    linked = MemoryNode(
        user_name="hal", content="hal works at the bank", status=MemoryStatus.EXPIRED, superseded_by=kept.memory_id
    )
    stage.scope.store.upsert([newer, kept, older, linked])
    stage.scope.delete(newer.memory_id, user_id="hal")
    driver.get(f"{stage.url}/?user=hal")
    paris = wait_for_memory(driver, "hal lives in Paris")
    assert paris["link_href"] is None
    assert css(driver, f"#{paris['element']} .memory-link").text == "replaced by a memory since deleted"
    bank = wait_for_memory(driver, "hal works at the bank")
    assert (bank["link_text"], bank["link_href"]) == ("hal works at the bakery", f"#memory-{kept.memory_id}")


def test_the_dashboard_samples_the_server_and_each_turn(stage: PlaygroundStage, driver: Any) -> None:
    driver.get(f"{stage.url}/?user=ivy")
    wait_until_ready(driver)
    click(driver, "#dashboard-details summary")  # sampled while open: memories per type from /metrics
    wait(driver, lambda d: all_css(d, "#memories-chart polyline"), "the dashboard drew no memory counts")
    assert "p50" not in css(driver, "#retrieve-chart").text
    for said, _, reply in SAID[:2]:
        chat(driver, said, reply)

    def figures(d: Any) -> Any:
        found = d.execute_script(
            """
            const legend = [...document.querySelectorAll('#turns-chart .key')].map((key) => key.textContent);
            return {legend, percentiles: document.querySelector('#retrieve-chart .percentiles').textContent,
                    runs: document.querySelector('#runs-chart .run-counts').textContent,
                    memories: [...document.querySelectorAll('#memories-chart .key')].map((key) => key.textContent)};
            """
        )
        return found if "over 2 turns" in found["percentiles"] else None

    shown = wait(driver, figures, "the dashboard never counted two turns")
    tokens = int(shown["legend"][0].split()[-1])
    assert shown["legend"][0].startswith("tokens ") and tokens > 0  # the reply's usage, streamed with the reply
    assert shown["legend"][1].startswith("generation calls since the turn before ")
    assert shown["percentiles"].startswith("p50 ") and " p95 " in shown["percentiles"]
    assert "finished" in shown["runs"] and "failed" in shown["runs"]
    assert any(key.startswith("Conversation memory ") for key in shown["memories"])


def test_editing_and_history_by_keyboard(stage: PlaygroundStage, driver: Any) -> None:
    from selenium.webdriver.common.keys import Keys

    kept = add(stage, "jon", "jon sails on Sundays")
    driver.get(f"{stage.url}/?user=jon")
    wait_for_memory(driver, "jon sails on Sundays", ADDED)
    css(driver, f"#memory-{kept} .edit-one").send_keys(Keys.ENTER)  # a button acts on Enter
    box = wait(driver, lambda d: css(d, f"#edit-text-{kept}"), "the editor never opened")
    assert driver.switch_to.active_element == box  # the text box has the focus
    box.send_keys(" and Mondays", Keys.ESCAPE)  # Escape: closed, nothing saved
    wait(driver, lambda d: not all_css(d, f"#edit-text-{kept}"), "Escape did not close the editor")
    assert record(stage, kept)["memory"] == "jon sails on Sundays"
    wait(driver, lambda d: d.switch_to.active_element.get_attribute("data-role") == "edit", "the focus was lost")

    driver.switch_to.active_element.send_keys(Keys.ENTER)
    box = wait(driver, lambda d: css(d, f"#edit-text-{kept}"), "the editor never opened again")
    box.send_keys(" and Mondays", Keys.TAB, Keys.TAB, Keys.ENTER)  # past the metadata to Save
    wait(driver, lambda d: record(stage, kept)["memory"] == "jon sails on Sundays and Mondays", "Save by keyboard failed")
    wait(driver, lambda d: d.switch_to.active_element.get_attribute("data-role") == "edit", "the focus was lost after Save")

    def pressed_space(d: Any) -> bool:  # found again if the list redrew meanwhile
        css(d, f"#memory-{kept} .history-one").send_keys(Keys.SPACE)
        return True

    wait(driver, pressed_space, "could not reach the History button")
    wait(driver, lambda d: len(all_css(d, f"#memory-{kept} .change")) == 2, "the history never opened")
    assert css(driver, f"#memory-{kept} .history-one").get_attribute("aria-expanded") == "true"
