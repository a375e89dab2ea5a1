"""Auth on the client port under pressure, end to end: `llmgw server` with auth on in
front of a sim engine, tenancy and keys made through its admin API, requests through
the official `openai` SDK.

Covers budgets held by many requests at once (each reserves its most at admission), a
request too large for its TPM limit ever to pass (400, not a 429 to retry for ever),
a usage record for the refusals the gateway makes itself, and x-ratelimit-* headers on
answers that passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from llmgw.testing.server import GatewayProcess, free_port, running_gateway
from llmgw.testing.sim import SimEngineProcess, start_sim_engine
from support.sims import endpoint

WAIT_S = 20.0
UNIT_MICROS = 1_000_000


class Admin:
    """The gateway's admin API."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.gateway = gateway
        self.token = gateway.admin_token()
        self.client = httpx.Client(timeout=10)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        auth = {"authorization": f"Bearer {self.token}"}
        return self.client.request(method, self.gateway.admin_url + path, json=body, headers=auth)

    def ok(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.call(method, path, body)
        assert answer.status_code < 300, answer.text
        data: dict[str, Any] = answer.json()
        return data

    def project(self, name: str, **fields: Any) -> str:
        """A project in its own org and team; returns a new key for it."""
        self.ok("POST", "/api/orgs", {"id": f"{name}-org"})
        self.ok("POST", "/api/teams", {"id": f"{name}-team", "org": f"{name}-org"})
        self.ok("POST", "/api/projects", {"id": name, "team": f"{name}-team", **fields})
        key: str = self.ok("POST", "/api/keys", {"project": name})["key"]
        return key

    def records(self, project: str, count: int) -> list[dict[str, Any]]:
        """The project's usage records, once there are `count` of them."""
        deadline = time.monotonic() + WAIT_S
        while True:
            data = self.ok("GET", "/api/usage/records?limit=1000&since=1h")["data"]
            mine = [r for r in data if r.get("project_id") == project]
            if len(mine) >= count:
                return mine
            assert time.monotonic() < deadline, f"{len(mine)} of {count} usage records written"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    # Slow enough that forty requests are all in flight at once.
    process = start_sim_engine("--decode-ms", "2", "--prefill-ms-per-token", "0.01", "--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admin]:
    store = tmp_path_factory.mktemp("auth-hardening") / "llmgw.db"
    config = {
        "auth": {
            "enabled": True,
            "store": str(store),
            "flush_interval": "100ms",
            # A thousandth of a unit a token, prompt or completion.
            "pricing": {
                name: {"prompt_per_1k": 1_000_000, "completion_per_1k": 1_000_000}
                for name in ("chat-a", "chat-gone")
            },
        },
        "endpoints": [
            endpoint("sim-1", engine, "chat-a"),
            # Nothing listens there: its requests fail without an answer (503).
            {
                "id": "gone",
                "url": f"http://127.0.0.1:{free_port()}",
                "models": ["chat-gone"],
                "engine": "sim",
            },
        ],
    }
    with running_gateway(config, timeout=60) as gateway:
        admin = Admin(gateway)
        try:
            yield admin
        finally:
            admin.client.close()


async def _many(gateway: GatewayProcess, key: str, count: int, max_tokens: int) -> list[int]:
    """`count` chat requests at once; the status of each."""
    url = gateway.base_url
    async with openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=60) as client:

        async def one() -> int:
            try:
                await client.chat.completions.create(
                    model="chat-a", messages=[{"role": "user", "content": "hello"}], max_tokens=max_tokens
                )
            except openai.APIStatusError as exc:
                return exc.status_code
            return 200

        return list(await asyncio.gather(*(one() for _ in range(count))))


def test_a_budget_holds_against_forty_requests_at_once(admin: Admin) -> None:
    """Each request may cost about 0.31 units (300 tokens out, a few in); the budget is
    one unit. Before reservations, all forty were judged against a spend that none of
    them had added to yet: 27 got through and 8.45 units were spent."""
    key = admin.project("crowd", budget=1, budget_period="day")
    statuses = asyncio.run(_many(admin.gateway, key, 40, 300))
    admitted = statuses.count(200)
    assert set(statuses) <= {200, 429}, statuses
    assert admitted >= 1
    records = admin.records("crowd", admitted)
    costs = [r["cost_micros"] if "cost_micros" in r else round(r["cost"] * UNIT_MICROS) for r in records]
    spent = sum(costs)
    # The request that crosses the line is let through, and no more.
    assert spent <= UNIT_MICROS + max(costs), (admitted, spent)
    print(f"budget 1 unit, 40 at once: {admitted} admitted, {spent / UNIT_MICROS:.2f} units spent")
    # The budget is spent now, for every later request.
    assert asyncio.run(_many(admin.gateway, key, 1, 300)) == [429]


def test_requests_that_fail_unanswered_give_their_reservation_back(admin: Admin) -> None:
    """Each holds 0.3 units of a 1-unit budget while in flight; a failed one that kept
    it would leave the budget spent, for nothing, after four failures."""
    key = admin.project("unlucky", budget=1, budget_period="day")
    with openai.OpenAI(base_url=admin.gateway.base_url, api_key=key, max_retries=0, timeout=30) as client:
        for _ in range(6):
            with pytest.raises(openai.APIStatusError) as failed:
                client.chat.completions.create(
                    model="chat-gone", messages=[{"role": "user", "content": "hello"}], max_tokens=300
                )
            assert failed.value.status_code in (502, 503, 504), failed.value.response.text
        client.chat.completions.create(
            model="chat-a", messages=[{"role": "user", "content": "hello"}], max_tokens=300
        )


def test_a_request_over_its_tpm_limit_outright_is_400_not_a_429_to_retry(admin: Admin) -> None:
    key = admin.project("small", tpm=100)
    with openai.OpenAI(base_url=admin.gateway.base_url, api_key=key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="chat-a", messages=[{"role": "user", "content": "hello"}], max_tokens=300
            )
        answer = refused.value.response
        assert answer.status_code == 400
        assert "retry-after" not in answer.headers
        error = answer.json()["error"]
        assert error["code"] == "request_too_large_for_limit"
        assert error["type"] == "invalid_request_error"
        assert "100 tokens a minute" in error["message"]
        # One that fits passes.
        client.chat.completions.create(
            model="chat-a", messages=[{"role": "user", "content": "hello"}], max_tokens=20
        )


@pytest.mark.parametrize(
    ("method", "path", "body", "param"),
    [
        ("GET", "/api/usage?since=99999999999h", None, "since"),
        ("GET", "/api/usage/records?since=" + "9" * 500 + "h", None, "since"),
        ("POST", "/api/orgs", {"id": "huge-budget", "budget": 1e308}, "budget"),
        ("POST", "/api/orgs", {"id": "huge-rpm", "rpm": 10**30}, "rpm"),
        ("POST", "/api/orgs", {"id": "huge-ttl", "max_key_ttl": "99999999999h"}, "max_key_ttl"),
        ("PUT", "/api/budgets/org/bounded", {"budget": 1e13}, "budget"),
        ("POST", "/api/keys", {"project": "bounded", "ttl": "99999999999h"}, "ttl"),
    ],
)
def test_oversized_numbers_and_durations_are_400_naming_the_field(
    admin: Admin, method: str, path: str, body: dict[str, Any] | None, param: str
) -> None:
    if "bounded" in path or (body or {}).get("project") == "bounded":
        admin.call("POST", "/api/orgs", {"id": "bounded"})
        admin.call("POST", "/api/teams", {"id": "bounded-team", "org": "bounded"})
        admin.call("POST", "/api/projects", {"id": "bounded", "team": "bounded-team"})
    answer = admin.call(method, path, body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"
    assert param in error["message"]


def test_a_long_limit_on_usage_records_is_taken_as_the_most(admin: Admin) -> None:
    answer = admin.call("GET", "/api/usage/records?limit=" + "9" * 5000)
    assert answer.status_code == 200, answer.text


def test_refusals_the_gateway_makes_leave_usage_records(admin: Admin) -> None:
    key = admin.project("refused", rpm=2)
    url = admin.gateway.base_url + "/chat/completions"
    auth = {"authorization": f"Bearer {key}"}
    chat = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    with httpx.Client(timeout=10) as client:
        statuses = [
            client.post(url, json={"model": "no-such-model", **chat}, headers=auth).status_code,
            client.post(url, content=b"{not json", headers=auth).status_code,
            client.post(url, json={"model": "chat-a", **chat}, headers=auth).status_code,
            client.post(url, json={"model": "chat-a", **chat}, headers=auth).status_code,
            client.post(url, json={"model": "chat-a", **chat}, headers=auth).status_code,
        ]
        assert statuses == [404, 400, 200, 200, 429]
        # Without a caller: counted, not recorded.
        before = _metric(admin, "llmgw_auth_unauthenticated_total")
        for bad in ("Bearer llmgw-abcdefgh-" + "x" * 40, "Bearer nonsense"):
            assert (
                client.post(url, json={"model": "chat-a", **chat}, headers={"authorization": bad}).status_code
                == 401
            )
        assert _metric(admin, "llmgw_auth_unauthenticated_total") == before + 2
    records = admin.records("refused", 5)
    assert sorted(r["status"] for r in records) == [200, 200, 400, 404, 429]
    for record in records:
        if record["status"] != 200:
            assert (record["model"], record["prompt_tokens"], record["completion_tokens"]) == ("", 0, 0)
    totals = admin.ok("GET", "/api/usage?by=project&since=1h")["data"]
    mine = next(t for t in totals if t["project"] == "refused")
    assert (mine["requests"], mine["errors"]) == (5, 3)


def _metric(admin: Admin, name: str) -> float:
    text = admin.client.get(admin.gateway.admin_url + "/metrics").text
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.rsplit(" ", 1)[1])


def test_answers_carry_the_callers_rate_limit_headers(admin: Admin) -> None:
    key = admin.project("metered", rpm=5, tpm=10_000)
    with openai.OpenAI(base_url=admin.gateway.base_url, api_key=key, max_retries=0) as client:
        seen = []
        for stream in (False, True):
            raw = client.chat.completions.with_raw_response.create(
                model="chat-a", messages=[{"role": "user", "content": "hello"}], max_tokens=4, stream=stream
            )
            seen.append(raw.headers)
            if stream:
                for _ in raw.parse():
                    pass
    for answered, remaining in zip(seen, ("4", "3"), strict=True):
        assert answered["x-ratelimit-limit-requests"] == "5"
        assert answered["x-ratelimit-remaining-requests"] == remaining
        assert answered["x-ratelimit-limit-tokens"] == "10000"
        assert 0 < int(answered["x-ratelimit-remaining-tokens"]) < 10_000
        assert answered["x-ratelimit-reset-requests"].endswith("s")
        assert answered["x-ratelimit-reset-tokens"].endswith("s")
