"""Headless Chromium through Selenium for the explorer's browser tests (tests/browser/).

Uses the distribution's `chromium` and `chromedriver` (Debian: apt-get install chromium chromium-driver; CI installs
them with scripts/ci_chromium.sh). Where they or selenium are missing the tests skip, except under CI (CI=true),
where that is a failure: the browser tests must run there."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver",)


def _which(names: tuple[str, ...]) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
        import plotly  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install -e '.[test]')"
    if _which(CHROMIUM) is None or _which(DRIVER) is None:
        return "chromium or chromedriver not found (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = _which(CHROMIUM)  # type: ignore[assignment]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--hide-scrollbars",
        "--enable-unsafe-swiftshader",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the distribution's driver: Selenium Manager would try to download one
    driver = webdriver.Chrome(options=options, service=Service(_which(DRIVER)))
    driver.set_script_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


class Report:
    """An opened report: waits on the page's `window.autotuneExplore` state."""

    def __init__(self, driver: Any, path: Path) -> None:
        self.driver = driver
        self.path = path
        driver.get_log("browser")  # drop what earlier pages logged
        start = time.perf_counter()
        driver.get(path.resolve().as_uri())
        self.wait("window.autotuneExplore && window.autotuneExplore.openMs !== null")
        self.open_s = time.perf_counter() - start

    def state(self, expr: str = "") -> Any:
        return self.driver.execute_script(f"return window.autotuneExplore{expr};")

    def wait(self, condition: str, timeout: float = 60) -> None:
        end = time.perf_counter() + timeout
        while not self.driver.execute_script(f"return !!({condition});"):
            if time.perf_counter() > end:
                raise AssertionError(f"timed out waiting for {condition}")
            time.sleep(0.05)

    def draw_all(self) -> None:
        self.driver.execute_async_script("const done = arguments[0]; window.autotuneExplore.drawAll().then(done);")

    def errors(self) -> list[str]:
        logged = [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
        return logged + list(self.state(".errors"))

    def select(self, field: str, index: int) -> str:
        """Choose option `index` (0: all) of a filter; returns its value once the charts are redrawn."""
        value = self.driver.execute_script(
            f"const s = document.getElementById('filter-{field}'); s.selectedIndex = {index};"
            "s.dispatchEvent(new Event('change')); return s.value;"
        )
        self.wait("window.autotuneExplore.ready")
        return value

    def screenshot(self, key: str, out: Path, width: int = 900) -> None:
        """A PNG of one chart (its heading included)."""
        el = self.driver.find_element("id", f"fig-{key}").find_element("xpath", "..")
        self.driver.execute_script(
            "window.scrollTo(0, arguments[0].getBoundingClientRect().top + window.scrollY"
            " - ((document.getElementById('filters') || {}).offsetHeight || 0) - 20);",
            el,
        )
        time.sleep(0.3)
        el.screenshot(str(out))


@pytest.fixture(scope="session")
def open_report(browser: Any):  # type: ignore[no-untyped-def]
    """open_report(path) -> Report: the page at `path`, opened, its first charts drawn."""
    return lambda path: Report(browser, path)
