"""The browsers the playground is tested in, headless, from Debian's packages; nothing is downloaded.

- Chromium (`chromium`, `chromium-driver`), driven by Selenium; the driver's path is given, so
  Selenium Manager never runs.
- Firefox ESR (`firefox-esr`), driven through its own Marionette protocol by Mozilla's
  `marionette-driver` (no geckodriver: Debian has none), wrapped in `FirefoxPage`, which answers
  the few calls the page steps (`playground_page`) make as Selenium's driver does.

`missing_chromium()` and `missing_firefox()` say why a browser's tests cannot run here ("" when
they can).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("MEMORYSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MEMORYSCOPE_CHROMEDRIVER", "/usr/bin/chromedriver")
FIREFOX = os.environ.get("MEMORYSCOPE_FIREFOX", "/usr/bin/firefox-esr")
# the flags a closed network needs: without them Chromium keeps dialling Google's hosts
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-default-apps", "--no-default-browser-check", "--metrics-recording-only", "--mute-audio",
)  # fmt: skip


def missing_chromium() -> str:
    try:
        import selenium  # noqa: F401
    except ModuleNotFoundError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"no {path}: install Debian's {package} (apt-get install chromium chromium-driver), as .ci/run does"
    return ""


def missing_firefox() -> str:
    try:
        with warnings.catch_warnings():  # mozinfo, under it, calls a deprecated `distro` function on import
            warnings.simplefilter("ignore", DeprecationWarning)
            import marionette_driver.marionette  # noqa: F401
    except ModuleNotFoundError:
        return "marionette-driver is not installed (pip install -e '.[dev]')"
    if not (os.path.isfile(FIREFOX) and os.access(FIREFOX, os.X_OK)):
        return f"no {FIREFOX}: install Debian's firefox-esr (apt-get install firefox-esr), as .ci/run does"
    return ""


@contextmanager
def chromium_driver(width: int = 1280, height: int = 900, extra_flags: tuple[str, ...] = ()) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, *extra_flags, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# Firefox asks for nothing beyond this machine: no updates, telemetry, safe-browsing lists or portal checks
FIREFOX_PREFS = {
    "app.update.disabledForTesting": True, "app.update.auto": False, "browser.shell.checkDefaultBrowser": False,
    "browser.safebrowsing.malware.enabled": False, "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False, "browser.safebrowsing.provider.mozilla.updateURL": "",
    "datareporting.policy.dataSubmissionEnabled": False, "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False, "toolkit.telemetry.server": "", "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False, "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False, "browser.search.update": False, "services.settings.server": "",
    "network.dns.disablePrefetch": True, "network.prefetch-next": False, "browser.startup.homepage": "about:blank",
    "startup.homepage_welcome_url": "", "browser.newtabpage.enabled": False, "dom.disable_open_during_load": False,
}  # fmt: skip


class FirefoxPage:
    """A Marionette session seen through the calls the page steps make of a Selenium driver."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def get(self, url: str) -> None:
        self.client.navigate(url)

    def find_element(self, by: str, value: str) -> Any:
        return self.client.find_element(by, value)

    def find_elements(self, by: str, value: str) -> list[Any]:
        return list(self.client.find_elements(by, value))

    def execute_script(self, script: str) -> Any:
        # in the page's own scope (not a sandbox), so what one call leaves on `window` the next sees
        return self.client.execute_script(script, sandbox=None, new_sandbox=False)

    def save_screenshot(self, path: str) -> None:
        import base64

        Path(path).write_bytes(base64.b64decode(self.client.screenshot()))


@contextmanager
def firefox_page(width: int = 1280, height: int = 900) -> Iterator[FirefoxPage]:
    from marionette_driver.marionette import Marionette

    with socket.socket() as probe:  # a free port for Marionette
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    profile = Path(tempfile.mkdtemp(prefix="firefox-profile-"))
    prefs = {**FIREFOX_PREFS, "marionette.port": port}
    profile.joinpath("user.js").write_text("".join(f"user_pref({_js(k)}, {_js(v)});\n" for k, v in prefs.items()))
    command = [FIREFOX, "--headless", "--marionette", "--no-remote", "--profile", str(profile)]
    command += [f"--width={width}", f"--height={height}", "about:blank"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = None
    try:
        _wait_for_port(port, process, timeout_s=60)  # marionette-driver's own wait leaks a socket per try
        client = Marionette(host="127.0.0.1", port=port, startup_timeout=60)
        client.start_session()
        client.set_window_rect(width=width, height=height)
        yield FirefoxPage(client)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):  # the browser is going away anyway
                client.delete_session()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        shutil.rmtree(profile, ignore_errors=True)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{FIREFOX} exited with status {process.returncode} before Marionette listened")
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{FIREFOX}'s Marionette did not listen on port {port} within {timeout_s:g} s")


def _js(value: Any) -> str:
    import json

    return json.dumps(value)
