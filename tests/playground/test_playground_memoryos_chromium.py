"""The playground under `configs/memoryos.yaml`, in a real headless Chromium against one served app
(the fake LLM scripted as MemoryOS's workers expect; short term: 3 pages): the tiers as MemoryOS
shows them, labelled from the server's memory types, MemoryOS's operations only, a segment's heat
as a bar with the promotion threshold marked, and a promotion showing as it happens. Skipped, with
the reason, where Chromium is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

import requests
from playground_browser import chromium_driver, missing_chromium
from playground_page import all_css, click, css, run_operation, wait, wait_until_ready
from playground_stage import KNOWLEDGE, PROFILE, TURNS, USER, MemoryosStage

MISSING = missing_chromium()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "a browser is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryosStage]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-playground-llm")
        with MemoryosStage(tmp_path_factory.mktemp("memoryos")) as served:
            served.add_turns(len(TURNS))  # one page over the short term's 3: the first moves to mid term
            yield served


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with chromium_driver(width=1280, height=1400) as browser:
        yield browser


def tier_texts(driver: Any, selector: str) -> list[str]:
    return list(driver.execute_script(f"return [...document.querySelectorAll('{selector}')].map((e) => e.textContent)"))


def test_the_tiers_answer_over_rest(stage: MemoryosStage) -> None:
    answer = requests.get(f"{stage.url}/v1/users/{USER}/tiers", timeout=30)
    assert answer.status_code == 200, answer.text
    tiers = answer.json()
    assert tiers["policy"] == "memoryos" and tiers["heat_threshold"] == 5.0
    assert [page["memory"].split("\n")[0] for page in tiers["short_term"]] == [f"User: {said}" for said, _ in TURNS[1:]]
    assert [segment["memory"] for segment in tiers["mid_term"]] == [TURNS[0][0]]
    assert requests.get(f"{stage.url}/v1/users/nobody/tiers", timeout=30).status_code == 404
    assert requests.get(f"{stage.url}/v1/operations", timeout=30).json()["policy"] == "memoryos"


def test_the_memoryos_view_shows_the_tiers_and_a_promotion(stage: MemoryosStage, driver: Any) -> None:
    driver.get(f"{stage.url}/?user={USER}")
    wait_until_ready(driver)
    wait(driver, lambda d: all_css(d, "#tier-mid .segment"), "the mid-term segments never showed")

    # MemoryOS's operations only, named for people; MemoryScope's consolidation is not offered
    buttons = {b.get_attribute("data-operation"): b.text for b in all_css(driver, "#operation-buttons button")}
    assert buttons == {"memoryos_update": "Update tiers", "memoryos_force_update": "Promote the hottest now"}
    headings = tier_texts(driver, "#policy-view h3, #policy-view h4")
    assert headings[:2] == ["Long-term memory", "User profile"] and "Mid-term memory" in headings
    assert "Dialogue page (3, oldest first)" in headings and not any("memoryos_" in text for text in headings)
    pages = [" ".join(text.split()) for text in tier_texts(driver, "#tier-short li.page")]  # in the order said
    assert pages == [f"User: {said} Assistant: {answer}" for said, answer in TURNS[1:]]
    # the groups by type: labels, not raw names; MemoryScope's empty groups are not shown
    groups = tier_texts(driver, ".memory-group h3")
    assert groups and not any(name in " ".join(groups) for name in ("memoryos_", "Insight", "Observation"))

    segment = css(driver, "#tier-mid .segment")
    assert segment.find_element("css selector", ".memory-text").text == TURNS[0][0]
    bar = driver.execute_script(
        """
        const item = document.querySelector('#tier-mid .segment');
        const bar = item.querySelector('.heat-bar'), line = item.querySelector('.threshold');
        return {bar: Number(bar.getAttribute('width')), line: Number(line.getAttribute('x1')),
                heat: Number(item.dataset.heat), label: item.querySelector('svg').getAttribute('aria-label')};
        """
    )
    assert 0 < bar["bar"] < bar["line"] <= 100  # cooler than the threshold: the bar stops short of the line
    assert bar["label"].endswith(" of 5") and bar["heat"] > 0
    assert tier_texts(driver, "#tier-long .profile") == []

    # a segment grown hot (as retrievals make it): its bar passes the line, in the hot colour
    assert stage.scope is not None and stage.scope.store is not None
    node = stage.scope.store.get([segment.get_attribute("data-id")])[0]
    stage.scope.store.upsert([node.replace(meta={**node.meta, "memoryos_heat": 6.0})])
    hot = wait(driver, lambda d: all_css(d, "#tier-mid .heat-bar.hot"), "the hot segment was not shown hot")
    assert float(hot[0].get_attribute("width")) > float(css(driver, "#tier-mid .threshold").get_attribute("x1"))

    run_operation(driver, "memoryos_force_update")  # promoted now: the profile and knowledge appear by themselves
    wait(driver, lambda d: tier_texts(d, "#tier-long .profile") == [PROFILE], "the promoted profile never showed")
    assert tier_texts(driver, "#tier-long li.knowledge") == [KNOWLEDGE]


def test_the_memoryos_view_at_phone_width(stage: MemoryosStage, driver: Any) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
    )
    try:
        driver.get(f"{stage.url}/?user={USER}")
        wait(driver, lambda d: all_css(d, "#tier-mid .segment"), "the mid-term segments never showed")
        width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], "the MemoryOS view scrolls sideways on a phone"
        click(driver, "#dashboard-details summary")
        wait(driver, lambda d: all_css(d, "#memories-chart polyline"), "the dashboard drew no memory counts")
        width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], "the dashboard scrolls sideways on a phone"
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
