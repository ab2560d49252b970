"""The steps a person takes in the playground, for any browser driver.

They use three calls of a Selenium driver (`find_element`, `find_elements`, `execute_script`),
which `playground_browser.FirefoxPage` answers too, so the same steps run in Chromium and Firefox.
"""

from __future__ import annotations

import time
from typing import Any

WAIT_S = 30.0
ENTER, TAB, SPACE, BACKSPACE, END = "\ue007", "\ue004", "\ue00d", "\ue003", "\ue010"  # WebDriver key codes
_REDRAWN = {"NoSuchElementException", "StaleElementReferenceException", "StaleElementException"}


def wait(driver: Any, condition: Any, message: str, timeout: float = WAIT_S) -> Any:
    """`condition(driver)` once truthy; elements the page replaced meanwhile are looked up again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition(driver)
            if value:
                return value
        except Exception as error:  # either driver's "no such element" or "stale element"
            if type(error).__name__ not in _REDRAWN:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout:g} s: {message}")
        time.sleep(0.05)


def css(driver: Any, selector: str) -> Any:
    return driver.find_element("css selector", selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def wait_until_ready(driver: Any) -> None:
    """The page has loaded and asked for the operations (their buttons are drawn)."""
    wait(driver, lambda d: all_css(d, "#operation-buttons button"), "the operation buttons never appeared")


def chat(driver: Any, text: str, reply: str) -> None:
    """Type `text` in the message box, press Enter, wait for `reply` in the last bubble."""
    wait_until_ready(driver)
    before = len(all_css(driver, "#messages .message.assistant"))
    box = css(driver, "#chat-input")
    box.click()
    box.send_keys(text)
    box.send_keys(ENTER)

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


def record_reply_texts(driver: Any) -> None:
    """Every text the newest reply bubble shows, kept in `window.replyTexts` as it changes (to
    see a reply arrive in pieces)."""
    driver.execute_script(
        """
        window.replyTexts = [];
        new MutationObserver(() => {
          const bubbles = document.querySelectorAll('#messages .message.assistant .body');
          if (bubbles.length) window.replyTexts.push(bubbles[bubbles.length - 1].textContent);
        }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
        """
    )
