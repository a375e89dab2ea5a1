"""The landing page and the docs portal in a real headless Chromium (Debian's
`chromium` and `chromium-driver`, driven by Selenium): the page's script runs under the
Content-Security-Policy and nothing is refused, the language picked is remembered on
reload, dark mode follows the system setting, and the page fits a phone's width.

Screenshots of each page go to the folder named by LLMGW_TEST_SCREENSHOTS (the committed
ones in docs/screenshots/ were made with LLMGW_TEST_SCREENSHOTS=docs/screenshots), else to
the test's temporary folder. Without chromium the tests skip and say how to install it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from llmgw.testing.server import GatewayProcess, free_port, running_gateway

_CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    _CHROMIUM is None or _DRIVER is None,
    reason="no chromium here: `apt-get install chromium chromium-driver` to run the browser tests",
)
_DESKTOP = (1100, 900)
_PHONE = (390, 844)


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    config = {
        "endpoints": [
            {
                "id": "none",
                "url": f"http://127.0.0.1:{free_port()}",
                "models": ["chat-model", "embed-model"],
                "engine": "sim",
            }
        ],
        "models": [
            {
                "name": "chat-model",
                "context_length": 8192,
                "max_output": 1024,
                "capabilities": {"tools": True},
            },
            {"name": "embed-model", "context_length": 512, "capabilities": {"embeddings": True}},
        ],
        "landing": {"contact": "llm-team@example.com", "notice": "Replicas restart on Sundays at 02:00."},
    }
    with running_gateway(config) as handle:
        yield handle


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    assert _CHROMIUM is not None
    assert _DRIVER is not None
    options = webdriver.ChromeOptions()
    options.binary_location = _CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={_DESKTOP[0]},{_DESKTOP[1]}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=_DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LLMGW_TEST_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _problems(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """What the browser's console reported as errors or warnings: a CSP refusal, a file
    that did not load, a script that failed."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return [entry for entry in entries if entry["level"] in ("SEVERE", "WARNING")]


def _lang(driver: webdriver.Chrome) -> str:
    return str(driver.find_element(By.TAG_NAME, "html").get_attribute("lang"))


def _shot(driver: webdriver.Chrome, folder: Path, name: str) -> None:
    # The whole page, however long, at the window's width.
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, min(max(height + 120, 400), 4000))
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000


def test_the_language_picked_is_remembered_and_nothing_is_refused(
    gateway: GatewayProcess, browser: webdriver.Chrome, shots: Path
) -> None:
    browser.get(gateway.url + "/")
    assert _lang(browser) == "en"
    assert "chat-model" in browser.find_element(By.TAG_NAME, "main").text
    # The copy buttons exist only if /static/web.js ran under the page's CSP.
    assert len(browser.find_elements(By.CSS_SELECTOR, "button.copy")) == 2
    _shot(browser, shots, "landing-en")

    browser.find_element(By.CSS_SELECTOR, 'footer a[hreflang="tr"]').click()
    assert _lang(browser) == "tr"
    browser.refresh()
    assert _lang(browser) == "tr"
    assert "Kullanabileceğiniz modeller" in browser.find_element(By.TAG_NAME, "main").text
    _shot(browser, shots, "landing-tr")

    browser.find_element(By.CSS_SELECTOR, 'header a[href="/docs"]').click()
    assert browser.current_url == gateway.url + "/docs"
    assert _lang(browser) == "tr"  # the choice holds on every page
    browser.find_element(By.CSS_SELECTOR, 'footer a[hreflang="en"]').click()
    assert _lang(browser) == "en"
    assert "/v1/embeddings" in browser.find_element(By.TAG_NAME, "main").text
    _shot(browser, shots, "docs")
    assert _problems(browser) == []


def test_dark_mode_follows_the_system_and_the_page_fits_a_phone(
    gateway: GatewayProcess, browser: webdriver.Chrome, shots: Path
) -> None:
    background = "return getComputedStyle(document.body).backgroundColor"
    browser.get(gateway.url + "/")
    light = browser.execute_script(background)
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    dark = browser.execute_script(background)
    assert light != dark
    _shot(browser, shots, "landing-dark")

    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": _PHONE[0], "height": _PHONE[1], "deviceScaleFactor": 1, "mobile": True},
    )
    browser.get(gateway.url + "/docs")
    # Nothing wider than the screen: long snippets and tables scroll inside their boxes.
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": _PHONE[0], "height": min(height, 4000), "deviceScaleFactor": 1, "mobile": True},
    )
    assert browser.save_screenshot(str(shots / "docs-phone.png"))
    assert _problems(browser) == []


_AXE = Path(__file__).with_name("axe-core") / "axe.min.js"
_RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  (result) => done(result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                                                   nodes: v.nodes.map((n) => n.target.join(" "))}))),
  (error) => done([{id: "axe-failed", impact: "critical", help: String(error), nodes: []}]));
"""


@pytest.mark.parametrize(("path", "language"), [("/", "en"), ("/docs", "en"), ("/", "tr"), ("/docs", "tr")])
def test_no_serious_accessibility_violations(
    gateway: GatewayProcess, browser: webdriver.Chrome, path: str, language: str
) -> None:
    """axe-core in the page: every control labelled, contrast enough, landmarks right;
    nothing it rates serious or critical (in light and dark)."""
    browser.get(f"{gateway.url}/language?set={language}&next={path}")
    assert _lang(browser) == language
    axe = _AXE.read_text(encoding="utf-8")
    browser.set_script_timeout(60)
    for scheme in ("light", "dark"):
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
        )
        # WebDriver's scripts run outside the page's CSP, which would refuse axe as inline.
        browser.execute_script(axe)
        violations = browser.execute_async_script(_RUN_AXE)
        serious = [v for v in violations if v["impact"] in ("serious", "critical")]
        assert serious == [], (scheme, serious)
