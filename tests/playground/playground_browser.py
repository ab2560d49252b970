"""Headless Chromium driven by Selenium, and the steps a person takes in the playground.

Uses Debian's `chromium` and `chromium-driver` (/usr/bin/chromium, /usr/bin/chromedriver);
nothing is downloaded: the driver's path is given, so Selenium Manager never runs.
`missing_browser()` says why the browser tests cannot run here ("" when they can).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = os.environ.get("MEMORYSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MEMORYSCOPE_CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT_S = 30.0
# the flags a closed network needs: without them Chromium keeps dialling Google's hosts
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-default-apps", "--no-default-browser-check", "--metrics-recording-only", "--mute-audio",
)  # fmt: skip


def missing_browser() -> str:
    try:
        import selenium  # noqa: F401
    except ModuleNotFoundError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"no {path}: install Debian's {package} (apt-get install chromium chromium-driver), as .ci/run does"
    return ""


@contextmanager
def chromium_driver(width: int = 1280, height: int = 900) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver: Any, condition: Any, message: str, timeout: float = WAIT_S) -> Any:
    """`condition(driver)` once truthy; elements the page replaced meanwhile are looked up again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=ignored).until(condition, message)


def css(driver: Any, selector: str) -> Any:
    return driver.find_element("css selector", selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def wait_until_ready(driver: Any) -> None:
    """The page has loaded and asked for the operations (their buttons are drawn)."""
    wait(driver, lambda d: all_css(d, "#operation-buttons button"), "the operation buttons never appeared")


def chat(driver: Any, text: str, reply: str) -> None:
    """Type `text` in the message box, press Enter, wait for `reply` in the last bubble."""
    from selenium.webdriver.common.keys import Keys

    wait_until_ready(driver)
    before = len(all_css(driver, "#messages .message.assistant"))
    box = css(driver, "#chat-input")
    box.click()
    box.send_keys(text)
    box.send_keys(Keys.ENTER)

    def replied(d: Any) -> bool:
        bubbles = all_css(d, "#messages .message.assistant")
        done = len(bubbles) > before and bubbles[-1].get_attribute("aria-busy") is None and reply in bubbles[-1].text
        return done and css(d, "#send").is_enabled()  # the page is ready for the next message

    wait(driver, replied, f"no reply {reply!r} to {text!r}")


def run_operation(driver: Any, operation: str) -> str:
    """Press the operation's button; return the status line once it reports the run."""
    wait_until_ready(driver)
    css(driver, f'#operation-buttons button[data-operation="{operation}"]').click()
    done = wait(
        driver,
        lambda d: (line := css(d, "#operation-status").text).startswith(f"{operation}") and line,
        f"{operation} never reported",
    )
    return str(done)


def memories(driver: Any) -> list[dict[str, Any]]:
    """What the viewer shows now, read in one go (it redraws as memories change, so elements go stale)."""
    return list(
        driver.execute_script(
            """
            return [...document.querySelectorAll('.memory-group .memory')].map((item) => {
              const link = item.querySelector('.memory-link a');
              return {
                id: item.dataset.id, type: item.closest('.memory-group').dataset.type, status: item.dataset.status,
                element: item.id, text: item.querySelector('.memory-text').textContent,
                meta: item.querySelector('.memory-meta').textContent,
                link_text: link ? link.textContent : null, link_href: link ? link.getAttribute('href') : null,
              };
            });
            """
        )
    )


def memory_texts(driver: Any, memory_type: str) -> list[str]:
    return [memory["text"] for memory in memories(driver) if memory["type"] == memory_type]


def wait_for_memory(driver: Any, text: str, memory_type: str = "observation") -> dict[str, Any]:
    def shown(d: Any) -> Any:
        return next((m for m in memories(d) if m["type"] == memory_type and m["text"] == text), None)

    return dict(wait(driver, shown, f"the {memory_type} {text!r} never appeared in the viewer"))


def click(driver: Any, selector: str) -> None:
    """Click the element `selector` finds, finding it again if the viewer redrew it meanwhile."""

    def clicked(d: Any) -> bool:
        css(d, selector).click()
        return True

    wait(driver, clicked, f"could not click {selector}")
