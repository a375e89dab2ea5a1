"""Files and batches end to end with the `openai` SDK: `llmgw server` with auth on in
front of a sim engine, keys made through its admin API, and the SDK's own calls
(files.create/list/retrieve/content/delete, batches.create/retrieve/list/cancel), whose
parsing is the contract. A gateway killed mid-batch and started again on the same
store and state directory finishes the batch with every line written once."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types import Batch

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim, sim_state

MAX_FILE_BYTES = 64 * 1024
MAX_LINES = 500
CONCURRENCY = 2
WAIT_S = 60.0
FINAL = ("completed", "failed", "cancelled", "expired")


@dataclass
class Site:
    """Where a gateway keeps its state, so a second one can start on it."""

    store: Path
    state: Path
    token_file: Path


def _start(site: Site, engine: SimEngineProcess) -> GatewayProcess:
    config = {
        "auth": {"enabled": True, "store": str(site.store), "flush_interval": "100ms"},
        "admin_token_file": str(site.token_file),
        "router": {
            "batch": {"max_file_bytes": MAX_FILE_BYTES, "max_lines": MAX_LINES, "concurrency": CONCURRENCY}
        },
        "endpoints": [endpoint("sim-1", engine, "chat-a")],
    }
    # At info, so the access log (each line's band) is in the server's log.
    return start_gateway(
        config, timeout=90, env={**os.environ, "STATE_DIRECTORY": str(site.state)}, log_level="info"
    )


def _site(root: Path) -> Site:
    return Site(root / "llmgw.db", root / "state", root / "admin-token")


def _project_key(gateway: GatewayProcess, token_file: Path, name: str) -> str:
    """A project in its own org and team, and a key for it, through the admin API."""
    headers = {"authorization": f"Bearer {token_file.read_text().strip()}"}
    with httpx.Client(base_url=gateway.admin_url, headers=headers, timeout=10) as admin:
        for path, body in (
            ("/api/orgs", {"id": f"{name}-org"}),
            ("/api/teams", {"id": f"{name}-team", "org": f"{name}-org"}),
            ("/api/projects", {"id": name, "team": f"{name}-team"}),
        ):
            assert admin.post(path, json=body).status_code < 300
        made = admin.post("/api/keys", json={"project": name})
        assert made.status_code < 300, made.text
        key: str = made.json()["key"]
        return key


def _client(gateway: GatewayProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=30)


def _stop(gateway: GatewayProcess) -> None:
    gateway.stop()


@dataclass
class Deployment:
    gateway: GatewayProcess
    engine: SimEngineProcess
    alice: openai.OpenAI
    bob: openai.OpenAI
    site: Site


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    engine = sim("--model", "chat-a")
    try:
        site = _site(tmp_path_factory.mktemp("batch-sdk"))
        gateway = _start(site, engine)
        try:
            alice = _client(gateway, _project_key(gateway, site.token_file, "alice"))
            bob = _client(gateway, _project_key(gateway, site.token_file, "bob"))
            yield Deployment(gateway, engine, alice, bob, site)
        finally:
            _stop(gateway)
    finally:
        engine.stop()


def _line(custom_id: str, max_tokens: int = 4, url: str = "/v1/chat/completions") -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": url,
        "body": {
            "model": "chat-a",
            "messages": [{"role": "user", "content": custom_id}],
            "max_tokens": max_tokens,
        },
    }


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def _wait_final(client: openai.OpenAI, batch_id: str, timeout: float = WAIT_S) -> Batch:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in FINAL or time.monotonic() > deadline:
            return batch
        time.sleep(0.05)


def _lines_of(client: openai.OpenAI, file_id: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in client.files.content(file_id).read().splitlines() if line.strip()]


def _usage_tagged(deployment: Deployment, batch_id: str) -> int:
    """How many usage records carry the batch's tag, once they reach the store."""
    token = deployment.site.token_file.read_text().strip()
    deadline = time.monotonic() + WAIT_S
    with httpx.Client(base_url=deployment.gateway.admin_url, timeout=10) as admin:
        while True:
            answer = admin.get(
                "/api/usage/records", params={"limit": "1000"}, headers={"authorization": f"Bearer {token}"}
            )
            assert answer.status_code == 200, answer.text
            tagged = [r for r in answer.json()["data"] if r["tags"].get("batch") == batch_id]
            if len(tagged) >= 10 or time.monotonic() > deadline:
                return len(tagged)
            time.sleep(0.1)


# --- files ---------------------------------------------------------------------------


def test_a_file_goes_up_is_listed_read_and_deleted(deployment: Deployment) -> None:
    client = deployment.alice
    data = b"some user data\n" * 100
    made = client.files.create(file=("notes.txt", data, "text/plain"), purpose="user_data")
    assert (made.object, made.purpose, made.bytes, made.filename) == (
        "file",
        "user_data",
        len(data),
        "notes.txt",
    )
    assert made.id.startswith("file-")
    assert client.files.retrieve(made.id).bytes == len(data)
    assert made.id in [f.id for f in client.files.list()]
    assert client.files.content(made.id).read() == data
    deleted = client.files.delete(made.id)
    assert (deleted.id, deleted.deleted) == (made.id, True)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(made.id)


def test_the_file_list_pages_with_after_and_limit(deployment: Deployment) -> None:
    client = deployment.alice
    made = [
        client.files.create(file=(f"p{i}.txt", b"x", "text/plain"), purpose="user_data").id for i in range(3)
    ]
    first = client.files.list(limit=2)
    assert len(first.data) == 2
    assert first.has_more
    every = [f.id for f in client.files.list(limit=1)]  # the SDK follows `after` page by page
    assert set(made) <= set(every)
    assert len(every) == len(set(every))


def test_another_projects_file_does_not_exist_for_the_caller(deployment: Deployment) -> None:
    mine = deployment.alice.files.create(file=("mine.txt", b"private", "text/plain"), purpose="user_data")
    with pytest.raises(openai.NotFoundError):
        deployment.bob.files.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        deployment.bob.files.content(mine.id)
    with pytest.raises(openai.NotFoundError):
        deployment.bob.files.delete(mine.id)
    assert mine.id not in [f.id for f in deployment.bob.files.list()]
    assert deployment.alice.files.retrieve(mine.id).id == mine.id


def test_a_file_over_the_limit_is_413_and_not_kept(deployment: Deployment) -> None:
    client = deployment.alice
    before = {f.id for f in client.files.list()}
    with pytest.raises(openai.APIStatusError) as refused:
        client.files.create(
            file=("big.bin", b"z" * (MAX_FILE_BYTES + 1000), "application/octet-stream"), purpose="user_data"
        )
    assert refused.value.status_code == 413
    assert "max_file_bytes" in refused.value.message
    assert {f.id for f in client.files.list()} == before


def test_a_file_declared_far_over_the_limit_is_413_before_its_body(deployment: Deployment) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        deployment.alice.files.create(
            file=("huge.bin", b"z" * (16 * MAX_FILE_BYTES), "application/octet-stream"), purpose="user_data"
        )
    assert refused.value.status_code == 413


def test_a_wrong_purpose_is_400(deployment: Deployment) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        deployment.alice.files.create(file=("a.txt", b"a", "text/plain"), purpose="fine-tune")
    assert "purpose" in refused.value.message


# --- batches -------------------------------------------------------------------------


def test_a_batch_runs_every_good_line_and_files_the_bad_one(deployment: Deployment) -> None:
    client = deployment.alice
    good = [_line(f"req-{i}") for i in range(10)]
    bad = _line("wrong-url", url="/v1/embeddings")
    unknown = _line("unknown-model")
    unknown["body"]["model"] = "no-such-model"
    source = client.files.create(
        file=("in.jsonl", _jsonl([*good[:5], bad, *good[5:], unknown])), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=source.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"run": "t1"},
    )
    assert batch.status in ("validating", "in_progress")
    done = _wait_final(client, batch.id)
    assert done.status == "completed", done
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (
        12,
        10,
        2,
    )
    assert done.metadata == {"run": "t1"}
    assert done.output_file_id
    assert done.error_file_id
    output = _lines_of(client, done.output_file_id)
    assert sorted(line["custom_id"] for line in output) == sorted(line["custom_id"] for line in good)
    for line in output:
        assert line["response"]["status_code"] == 200
        assert line["response"]["body"]["choices"]
        assert line["id"].startswith("batch_req_")
    errors = {line["custom_id"]: line for line in _lines_of(client, done.error_file_id)}
    assert set(errors) == {"wrong-url", "unknown-model"}
    assert errors["wrong-url"]["error"]["code"] == "invalid_url"
    assert errors["wrong-url"]["response"] is None
    # A line the gateway refuses is answered as a client would be: 404 for an unknown model.
    refused = errors["unknown-model"]
    assert refused["response"]["status_code"] == 404
    assert refused["response"]["body"]["error"]["code"] == refused["error"]["code"]
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"
    assert batch.id in [b.id for b in client.batches.list()]
    assert _usage_tagged(deployment, batch.id) == len(good)
    # Each line waited in the lowest admission band (bronze of the default bands).
    log_lines = deployment.gateway.log().splitlines()
    for line in output:
        logged = [entry for entry in log_lines if line["id"] in entry]
        assert logged, line["id"]
        assert all("bronze" in entry for entry in logged), logged
    with pytest.raises(openai.NotFoundError):
        deployment.bob.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        deployment.bob.files.content(done.output_file_id)


def test_a_batch_over_max_lines_or_on_a_wrong_file_is_refused(deployment: Deployment) -> None:
    client = deployment.alice
    many = client.files.create(file=("many.jsonl", b'{"custom_id":"x"}\n' * (MAX_LINES + 1)), purpose="batch")
    with pytest.raises(openai.BadRequestError) as refused:
        client.batches.create(input_file_id=many.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert "max_lines" in refused.value.message
    data = client.files.create(file=("d.jsonl", _jsonl([_line("a")])), purpose="user_data")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id=data.id, endpoint="/v1/chat/completions", completion_window="24h")
    text = client.files.create(file=("t.jsonl", b"not json at all\n"), purpose="batch")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id=text.id, endpoint="/v1/chat/completions", completion_window="24h")
    theirs = deployment.bob.files.create(file=("b.jsonl", _jsonl([_line("b")])), purpose="batch")
    with pytest.raises(openai.NotFoundError):
        client.batches.create(
            input_file_id=theirs.id, endpoint="/v1/chat/completions", completion_window="24h"
        )


def test_a_cancelled_batch_stops_with_what_it_finished(deployment: Deployment) -> None:
    client = deployment.alice
    # Long answers, so the batch is still running when the cancel arrives.
    lines = [_line(f"slow-{i}", max_tokens=400) for i in range(200)]
    source = client.files.create(file=("slow.jsonl", _jsonl(lines)), purpose="batch")
    batch = client.batches.create(
        input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    done = _wait_final(client, batch.id)
    assert done.status == "cancelled", done
    assert done.request_counts is not None
    assert done.request_counts.completed < len(lines)
    if done.output_file_id:
        assert len(_lines_of(client, done.output_file_id)) == done.request_counts.completed
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(batch.id)


# --- restart -------------------------------------------------------------------------


@pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
def test_a_gateway_stopped_mid_batch_finishes_it_after_restart_with_each_line_once(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    engine = sim("--model", "chat-a", "--decode-ms", "5")
    gateway: GatewayProcess | None = None
    try:
        site = _site(tmp_path)
        gateway = _start(site, engine)
        key = _project_key(gateway, site.token_file, "carol")
        client = _client(gateway, key)
        lines = [_line(f"r-{i}", max_tokens=8) for i in range(120)]
        source = client.files.create(file=("in.jsonl", _jsonl(lines)), purpose="batch")
        batch = client.batches.create(
            input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + WAIT_S
        while True:
            counts = client.batches.retrieve(batch.id).request_counts
            if (counts is not None and counts.completed >= 20) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert counts is not None
        assert 20 <= counts.completed < len(lines)
        os.kill(gateway.process.pid, stop_signal)
        gateway.process.wait(30)
        gateway = _start(site, engine)
        client = _client(gateway, key)
        done = _wait_final(client, batch.id)
        assert done.status == "completed", done
        assert done.request_counts is not None
        assert done.request_counts.completed == len(lines)
        assert done.output_file_id is not None
        output = _lines_of(client, done.output_file_id)
        assert sorted(line["custom_id"] for line in output) == sorted(line["custom_id"] for line in lines)
        # At most the lines in flight at the kill went to the engine twice; none was lost.
        seen = sim_state(engine)["requests_seen"]
        assert len(lines) <= seen <= len(lines) + CONCURRENCY
    finally:
        if gateway is not None:
            with contextlib.suppress(Exception):
                _stop(gateway)
        engine.stop()
