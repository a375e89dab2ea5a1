"""The operator dashboard in a real headless Chromium: sign in with the admin token
through the form, see the model on the Cluster page, walk the pages with nothing
refused by the Content-Security-Policy, and no serious axe-core finding in light or
dark. Screenshots go to LLMGW_TEST_SCREENSHOTS (docs/screenshots/dashboard-*.png were
made with LLMGW_TEST_SCREENSHOTS=docs/screenshots), else the test's temporary folder.
Without chromium the test skips and says how to install it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

_CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    _CHROMIUM is None or _DRIVER is None,
    reason="no chromium here: `apt-get install chromium chromium-driver` to run the browser tests",
)
_AXE = Path(__file__).with_name("axe-core") / "axe.min.js"
_RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  (result) => done(result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                                                   nodes: v.nodes.map((n) => n.target.join(" "))}))),
  (error) => done([{id: "axe-failed", impact: "critical", help: String(error), nodes: []}]));
"""


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-model")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    store = tmp_path_factory.mktemp("dashboard-browser") / "llmgw.db"
    config = {
        "auth": {"enabled": True, "store": str(store), "flush_interval": "100ms"},
        "endpoints": [endpoint("sim-a", engine, "chat-model")],
    }
    with running_gateway(config) as handle:
        admin = handle.admin_url + "/api"
        with httpx.Client(headers={"authorization": f"Bearer {handle.admin_token()}"}, timeout=10) as client:
            client.post(admin + "/orgs", json={"id": "acme"}).raise_for_status()
            client.post(admin + "/teams", json={"id": "ml", "org": "acme"}).raise_for_status()
            client.post(admin + "/projects", json={"id": "search", "team": "ml"}).raise_for_status()
            client.put(admin + "/budgets/project/search", json={"budget": 5}).raise_for_status()
            client.post(admin + "/keys", json={"project": "search", "name": "ci"}).raise_for_status()
        yield handle


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    assert _CHROMIUM is not None
    assert _DRIVER is not None
    options = webdriver.ChromeOptions()
    options.binary_location = _CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1100,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=_DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _problems(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return [entry for entry in entries if entry["level"] in ("SEVERE", "WARNING")]


def _shot(driver: webdriver.Chrome, folder: Path, name: str) -> None:
    driver.set_window_size(1100, 900)  # the page's own height, not the last page's
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1100, min(max(height + 120, 400), 4000))
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000


def _serious_axe_findings(driver: webdriver.Chrome) -> list[Any]:
    axe = _AXE.read_text(encoding="utf-8")
    driver.set_script_timeout(60)
    found: list[Any] = []
    for scheme in ("light", "dark"):
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
        )
        # WebDriver's scripts run outside the page's CSP, which would refuse axe as inline.
        driver.execute_script(axe)
        violations = driver.execute_async_script(_RUN_AXE)
        found += [(scheme, v) for v in violations if v["impact"] in ("serious", "critical")]
    return found


def test_the_operator_signs_in_and_sees_the_model(
    gateway: GatewayProcess, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("LLMGW_TEST_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    browser.get(gateway.admin_url + "/")
    assert browser.find_elements(By.NAME, "token")  # sent to sign in
    # The console's only complaint so far: the 401 the sign-in form is answered with.
    assert [e["message"].rpartition("(")[2] for e in _problems(browser)] == ["Unauthorized)"]
    assert _serious_axe_findings(browser) == []
    _shot(browser, shots, "dashboard-login")
    browser.find_element(By.NAME, "token").send_keys(gateway.admin_token())
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    # A click submits; the next page loads after it returns.
    WebDriverWait(browser, 30).until(expected_conditions.url_contains("/dashboard/cluster"))
    assert "chat-model" in browser.find_element(By.TAG_NAME, "main").text
    for page in ("cluster", "traffic", "tenancy"):
        browser.get(f"{gateway.admin_url}/dashboard/{page}")
        assert browser.find_element(By.TAG_NAME, "h1").text
        assert _serious_axe_findings(browser) == [], page
        _shot(browser, shots, f"dashboard-{page}")
    assert "project:search" in browser.find_element(By.TAG_NAME, "main").text
    # Revoke the key through its form: confirmed, then shown on the Audit page.
    browser.find_element(
        By.CSS_SELECTOR, 'form[action="/dashboard/keys/revoke"] input[name="confirm"]'
    ).click()
    browser.find_element(By.CSS_SELECTOR, 'form[action="/dashboard/keys/revoke"] button').click()
    notice = WebDriverWait(browser, 30).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "p.notice"))
    )
    assert "revoked" in notice.text
    browser.get(gateway.admin_url + "/dashboard/audit")
    assert "key.revoke" in browser.find_element(By.TAG_NAME, "main").text
    assert _serious_axe_findings(browser) == []
    _shot(browser, shots, "dashboard-audit")
    assert _problems(browser) == []
