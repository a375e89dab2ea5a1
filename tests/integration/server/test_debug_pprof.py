"""`debug_pprof` through real sockets: `llmgw server` (router-only, no store) with the
profiler on, and one with it off. With it on, /debug/pprof/ answers only with the admin
token (401 in the admin API's shape otherwise); a CPU profile taken while requests run
shows the router's own functions; one profile at a time (409); the tasks and the heap
sample parse as JSON and read as text; bad parameters are 400s naming the field. With
it off, /debug answers 404."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
# Bounds of the background load: it stops when told, or after this many requests.
_MAX_LOAD_REQUESTS = 20_000
# How often, and how many times, a test asks again while waiting for the server to see
# a client leave.
_POLL_S = 0.1
_LEFT_POLLS = 100
# The load counts as under way once this many answers came back (waiting at most
# _STARTUP_POLLS polls for them).
_ANSWERS_BEFORE_PROFILING = 20
_STARTUP_POLLS = 300


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "m")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess) -> Iterator[GatewayProcess]:
    config = {"debug_pprof": True, "endpoints": [endpoint("e", engine, "m")]}
    with running_gateway(config, timeout=60) as process:
        yield process


@pytest.fixture(scope="module")
def admin(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    token = gateway.admin_token()
    with httpx.Client(
        base_url=gateway.admin_url, headers={"authorization": f"Bearer {token}"}, timeout=60
    ) as client:
        yield client


class Load:
    """Chat requests through the gateway, one after another on a few threads, until
    stopped; counts the answers."""

    def __init__(self, gateway: GatewayProcess, threads: int = 4) -> None:
        self._url = gateway.base_url + "/chat/completions"
        self._stop = threading.Event()
        self.answered = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            for _ in range(_MAX_LOAD_REQUESTS):
                if self._stop.is_set():
                    return
                if client.post(self._url, json=CHAT).status_code == 200:
                    with self._lock:
                        self.answered += 1

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        # A profile asked for before the threads send anything samples an idle loop:
        # wait for the load to be under way first.
        for _ in range(_STARTUP_POLLS):
            if self.answered >= _ANSWERS_BEFORE_PROFILING:
                break
            time.sleep(_POLL_S)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def _error(answer: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = answer.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    return body


@pytest.mark.parametrize("path", ["/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"])
def test_without_the_token_or_with_a_wrong_one_it_is_401(gateway: GatewayProcess, path: str) -> None:
    for headers in ({}, {"authorization": "Bearer not-the-token"}, {"authorization": gateway.admin_token()}):
        answer = httpx.get(gateway.admin_url + path, headers=headers, timeout=10)
        assert answer.status_code == 401
        error = _error(answer)
        assert (error["type"], error["code"]) == ("authentication_error", "invalid_admin_token")


def test_the_index_lists_the_routes(admin: httpx.Client) -> None:
    answer = admin.get("/debug/pprof/")
    assert answer.status_code == 200
    for route in ("/debug/pprof/profile", "/debug/pprof/tasks", "/debug/pprof/heap"):
        assert route in answer.text


def test_a_profile_under_load_shows_the_routers_work(gateway: GatewayProcess, admin: httpx.Client) -> None:
    with Load(gateway) as load:
        answer = admin.get("/debug/pprof/profile", params={"seconds": 2})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert load.answered > 0
    profile = answer.json()
    assert profile["$schema"].startswith("https://www.speedscope.app/")
    files = {frame.get("file") or "" for frame in profile["shared"]["frames"]}
    assert any("/llmgw/router/" in f for f in files), sorted(files)[:40]
    assert any("/llmgw/http/" in f for f in files)
    assert profile["profiles"]
    assert profile["profiles"][0]["type"] == "evented"


def test_the_profile_as_pyinstruments_page(admin: httpx.Client) -> None:
    answer = admin.get("/debug/pprof/profile", params={"seconds": 1, "format": "html"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert "pyinstrument" in answer.text


def test_one_profile_at_a_time(gateway: GatewayProcess, admin: httpx.Client) -> None:
    first: list[httpx.Response] = []
    running = threading.Thread(
        target=lambda: first.append(admin.get("/debug/pprof/profile", params={"seconds": 4})), daemon=True
    )
    running.start()
    tries: list[httpx.Response] = []
    # Until one of the two is refused while the other runs (whichever the server saw first).
    with httpx.Client(headers=admin.headers, timeout=30) as other:
        for _ in range(5):
            tries.append(other.get(gateway.admin_url + "/debug/pprof/profile", params={"seconds": 1}))
            if tries[-1].status_code == 409 or not running.is_alive():
                break
    running.join(30)
    answers = first + tries
    statuses = [a.status_code for a in answers]
    assert 409 in statuses, statuses
    assert 200 in statuses, statuses
    refused = next(a for a in answers if a.status_code == 409)
    assert _error(refused)["code"] == "profile_running"


def test_a_client_that_leaves_ends_its_profile(gateway: GatewayProcess, admin: httpx.Client) -> None:
    # Asks for a minute and hangs up after a moment: the profile must end with it, or
    # every try below would be refused as one already running.
    leaving = httpx.Client(headers=admin.headers, timeout=httpx.Timeout(10, read=0.5))
    with leaving, pytest.raises(httpx.ReadTimeout):
        leaving.get(gateway.admin_url + "/debug/pprof/profile", params={"seconds": 60})
    statuses = []
    for _ in range(_LEFT_POLLS):
        answer = admin.get("/debug/pprof/profile", params={"seconds": 1})
        statuses.append(answer.status_code)
        if answer.status_code == 200:
            break
        time.sleep(_POLL_S)
    assert statuses[-1] == 200, statuses


def test_the_tasks_with_their_stacks(admin: httpx.Client) -> None:
    tasks = admin.get("/debug/pprof/tasks", params={"format": "json"})
    assert tasks.status_code == 200
    data = tasks.json()["data"]
    scraper = next(t for t in data if t["name"] == "scraper")
    assert scraper["state"] == "pending"
    assert scraper["coroutine"] == "Scraper.run"
    assert scraper["stack"][0]["file"].endswith("llmgw/router/scraper.py")
    assert all(set(f) == {"file", "line", "function"} for t in data for f in t["stack"])
    text = admin.get("/debug/pprof/tasks")
    assert text.headers["content-type"].startswith("text/plain")
    assert "task 'scraper' (pending) running Scraper.run" in text.text


def test_the_heap_sample_as_json_and_text(gateway: GatewayProcess, admin: httpx.Client) -> None:
    with Load(gateway):
        answer = admin.get("/debug/pprof/heap", params={"seconds": 1, "format": "json"})
    assert answer.status_code == 200, answer.text
    sample = answer.json()
    assert sample["seconds"] == 1
    top = sample["data"]
    assert 0 < len(top) <= 50
    assert all(set(a) == {"file", "line", "size_bytes", "count"} for a in top)
    sizes = [a["size_bytes"] for a in top]
    assert sizes == sorted(sizes, reverse=True)
    assert sample["total_bytes"] >= sum(sizes)
    text = admin.get("/debug/pprof/heap", params={"seconds": 1})
    assert text.status_code == 200
    assert text.text.startswith("allocations made in the last 1s and still alive:")


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/debug/pprof/profile?seconds=0", "seconds"),
        ("/debug/pprof/profile?seconds=61", "seconds"),
        ("/debug/pprof/heap?seconds=soon", "seconds"),
        ("/debug/pprof/profile?seconds=1&format=pdf", "format"),
        ("/debug/pprof/tasks?format=xml", "format"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(admin: httpx.Client, path: str, param: str) -> None:
    answer = admin.get(path)
    assert answer.status_code == 400
    error = _error(answer)
    assert error["param"] == param
    assert param in error["message"]


def test_unknown_route_and_method(admin: httpx.Client) -> None:
    assert _error(admin.get("/debug/pprof/goroutine"))["code"] == "unknown_route"
    refused = admin.post("/debug/pprof/tasks")
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET"


def test_off_by_default_debug_is_404(engine: SimEngineProcess) -> None:
    with running_gateway({"endpoints": [endpoint("e", engine, "m")]}, timeout=60) as gateway:
        for path in ("/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"):
            answer = httpx.get(gateway.admin_url + path, headers={"authorization": "Bearer x"}, timeout=10)
            assert answer.status_code == 404
            assert "debug_pprof" in _error(answer)["message"]
        assert not (gateway.config_path.parent / "secrets").exists()  # no token made for nothing
