"""The chat page through real sockets: a gateway process with auth on and a sim replica,
people signed in at a real OpenID provider on loopback. Without a session /chat sends
to sign in; a person offered only their own keys' models sends a message with the
page's form (the whole answer on the page, no script) and as the script does (the
gateway's SSE relayed), the CSRF token is required, another person's key is refused,
and the budget shown is the person's own, never another's."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from llmgw.testing.server import GatewayProcess
from llmgw.testing.sim import SimEngineProcess
from support.oidc_provider import Browser, oidc_provider, set_user
from support.signin import admin_call, signin_gateway, until
from support.sims import endpoint, sim

_TARGET = re.compile(r'<option value="([^"]+)"')


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with oidc_provider() as url:
        yield url


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-model")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(
    issuer: str, engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    where: Path = tmp_path_factory.mktemp("chat")
    handle = signin_gateway(issuer, where, settings={"endpoints": [endpoint("sim", engine, "chat-model")]})
    try:
        yield handle
    finally:
        handle.stop()


def _person(gateway: GatewayProcess, issuer: str, user: str, budget: float) -> Browser:
    """Signed in, with a personal key made on /account/keys and a monthly budget."""
    set_user(issuer, f"sub-{user}", {"email": f"{user}@example.com", "preferred_username": user})
    browser = Browser(gateway.url)
    assert browser.sign_in(f"sub-{user}").status_code == 200
    token = browser.csrf_token("/account/keys")
    made = browser.http.post(gateway.url + "/account/keys", data={"csrf_token": token, "name": f"{user}-key"})
    assert made.status_code == 201, made.text
    put = admin_call(gateway, "PUT", f"budgets/user/{user}", {"budget": budget, "period": "month"})
    assert put.status_code == 200, put.text
    until(lambda: _targets(browser, gateway) != [], f"{user}'s key reaching the chat page")
    return browser


def _targets(browser: Browser, gateway: GatewayProcess) -> list[str]:
    return _TARGET.findall(browser.http.get(gateway.url + "/chat").text)


@pytest.fixture(scope="module")
def people(gateway: GatewayProcess, issuer: str) -> Iterator[tuple[Browser, Browser]]:
    uma = _person(gateway, issuer, "uma", 7.25)
    bob = _person(gateway, issuer, "bob", 3.5)
    try:
        yield uma, bob
    finally:
        uma.close()
        bob.close()


def test_without_a_session_the_page_sends_to_sign_in(gateway: GatewayProcess) -> None:
    away = httpx.get(gateway.url + "/chat", timeout=10, follow_redirects=False)
    assert away.status_code == 302
    assert away.headers["location"] == "/auth/login?return_to=/chat"
    refused = httpx.post(gateway.url + "/chat/send", data={"message": "hi"}, timeout=10)
    assert refused.status_code == 401


def test_the_form_without_script_answers_on_the_page_with_the_own_budget_only(
    gateway: GatewayProcess, people: tuple[Browser, Browser]
) -> None:
    uma, _ = people
    page = uma.http.get(gateway.url + "/chat")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "$7.2500" in page.text
    assert "$3.5000" not in page.text
    assert "<script>" not in page.text
    target = _targets(uma, gateway)[0]
    assert target.endswith(":chat-model")
    token = uma.csrf_token("/chat")
    sent = uma.http.post(
        gateway.url + "/chat/send",
        data={"csrf_token": token, "target": target, "message": "Hello <b>there</b>"},
    )
    assert sent.status_code == 200, sent.text
    answer = sent.text.split('<pre id="chat-answer" aria-live="polite">')[1].split("</pre>")[0]
    assert answer.strip() != ""
    assert "Hello &lt;b&gt;there&lt;/b&gt;" in sent.text  # the message, escaped
    assert "tokens" in sent.text.split('id="chat-usage"')[1].split("</p>")[0]
    assert "$3.5000" not in sent.text


def test_the_script_s_request_streams_the_gateway_s_events(
    gateway: GatewayProcess, people: tuple[Browser, Browser]
) -> None:
    uma, _ = people
    target = _targets(uma, gateway)[0]
    token = uma.csrf_token("/chat")
    with uma.http.stream(
        "POST",
        gateway.url + "/chat/send",
        data={"csrf_token": token, "target": target, "message": "Hello"},
        headers={"accept": "text/event-stream"},
    ) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in streamed.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert any('"delta"' in line and '"content"' in line for line in lines)
    assert any('"usage"' in line and '"total_tokens"' in line for line in lines)


def test_csrf_token_is_required_and_another_person_s_key_is_refused(
    gateway: GatewayProcess, people: tuple[Browser, Browser]
) -> None:
    uma, bob = people
    target = _targets(uma, gateway)[0]
    forged = uma.http.post(gateway.url + "/chat/send", data={"target": target, "message": "hi"})
    assert forged.status_code == 403
    assert "csrf_token" in forged.text
    wrong = uma.http.post(
        gateway.url + "/chat/send",
        data={"csrf_token": "not-the-token", "target": target, "message": "hi"},
        headers={"accept": "text/event-stream"},
    )
    assert wrong.status_code == 403
    assert wrong.json()["error"]["code"] == "bad_csrf_token"
    bobs = _targets(bob, gateway)[0]
    assert bobs != target
    taken = uma.http.post(
        gateway.url + "/chat/send",
        data={"csrf_token": uma.csrf_token("/chat"), "target": bobs, "message": "hi"},
        headers={"accept": "text/event-stream"},
    )
    assert taken.status_code == 403
    assert taken.json()["error"]["code"] == "model_not_yours"


_CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_DRIVER = shutil.which("chromedriver")
_AXE = Path(__file__).with_name("axe-core") / "axe.min.js"
_RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  (result) => done(result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help}))),
  (error) => done([{id: "axe-failed", impact: "critical", help: String(error)}]));
"""


@pytest.mark.skipif(
    _CHROMIUM is None or _DRIVER is None,
    reason="no chromium here: `apt-get install chromium chromium-driver` to run the browser tests",
)
def test_in_chromium_the_answer_streams_in_under_the_csp(
    gateway: GatewayProcess, people: tuple[Browser, Browser], tmp_path: Path
) -> None:
    """The page's own script sends the message and shows the streamed answer and its
    usage; nothing refused by the Content-Security-Policy; nothing axe-core rates
    serious or critical. A screenshot goes to LLMGW_TEST_SCREENSHOTS (docs/screenshots)."""
    uma, _ = people
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
        # The session signed in at the provider already: its cookie handed to the browser.
        driver.get(gateway.url + "/")
        for cookie in uma.http.cookies.jar:
            if cookie.value is not None:
                driver.add_cookie({"name": cookie.name, "value": cookie.value, "path": cookie.path})
        driver.get(gateway.url + "/chat")
        assert driver.find_element(By.TAG_NAME, "h1").text == "Chat"
        driver.find_element(By.ID, "chat-message").send_keys("Hello from the browser")
        driver.find_element(By.CSS_SELECTOR, "#chat-form button[type=submit]").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "chat-usage").text != "")
        assert "tokens" in driver.find_element(By.ID, "chat-usage").text
        assert driver.find_element(By.ID, "chat-answer").text.strip() != ""
        assert driver.find_element(By.ID, "chat-error").text == ""
        assert driver.current_url == gateway.url + "/chat"  # the script sent it, not the form
        entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
        assert [e for e in entries if e["level"] in ("SEVERE", "WARNING")] == []
        folder = Path(os.environ.get("LLMGW_TEST_SCREENSHOTS") or tmp_path)
        folder.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(folder / "chat.png"))
        driver.set_script_timeout(60)
        driver.execute_script(_AXE.read_text(encoding="utf-8"))
        violations = driver.execute_async_script(_RUN_AXE)
        assert [v for v in violations if v["impact"] in ("serious", "critical")] == []
    finally:
        driver.quit()
