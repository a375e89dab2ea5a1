"""What the dispatcher reports to the canaries for each try: a replica's 5xx, a broken
stream and a failed connection are errors; a 429 and a client's own 4xx are tries that
are not; whole answers carry their TTFT."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from llmgw.catalog import Catalog, Model
from llmgw.errors import ApiError
from llmgw.router.canary import Canaries
from support.fake_upstream import END, FakeClient, Rig, event, head, json_answer, settle

OK = json_answer(200, {"id": "c1", "choices": [{"message": {"content": "hello"}}]})


def _rig(*script: bytes) -> tuple[Rig, Canaries]:
    rig = Rig(list(script), retries=0)
    catalog = Catalog.build(
        [Model(name="m", canary={"model": "m-next", "percent": 10}), Model(name="m-next")],
        served_statically=("m", "m-next"),
    )
    canaries = Canaries(catalog)
    rig.dispatcher._canaries = canaries
    return rig, canaries


def _model_side(canaries: Canaries) -> dict[str, Any]:
    described = canaries.describe("m")
    assert described is not None
    side: dict[str, Any] = described["model_side"]
    return side


async def _serve(rig: Rig, *, stream: bool = False) -> None:
    task = rig.serve(FakeClient(), stream=stream)
    await settle()
    with contextlib.suppress(ApiError):
        await task


@pytest.mark.parametrize(
    ("answer", "errors"),
    [
        (OK, 0),
        (json_answer(500, {"error": {"message": "boom"}}), 1),
        (json_answer(503, {"error": {"message": "busy"}}), 1),
        (json_answer(429, {"error": {"message": "slow down"}}), 0),
        (json_answer(400, {"error": {"message": "bad request"}}), 0),
    ],
)
def test_a_whole_answer_is_one_try_and_only_a_5xx_an_error(answer: bytes, errors: int) -> None:
    async def go() -> None:
        rig, canaries = _rig(answer)
        await _serve(rig)
        side = _model_side(canaries)
        assert (side["requests"], side["errors"]) == (1, errors)

    asyncio.run(asyncio.wait_for(go(), timeout=10))


def test_a_whole_answer_has_a_ttft() -> None:
    async def go() -> None:
        rig, canaries = _rig(OK)
        await _serve(rig)
        assert _model_side(canaries)["mean_ttft_s"] is not None

    asyncio.run(asyncio.wait_for(go(), timeout=10))


def test_a_stream_broken_off_is_an_error_and_a_whole_one_is_not() -> None:
    async def go() -> None:
        cut = [head(), event('{"choices":[{"delta":{"content":"he"}}]}'), END]
        rig, canaries = _rig(*cut)
        await _serve(rig, stream=True)
        side = _model_side(canaries)
        assert (side["requests"], side["errors"]) == (1, 1)
        whole = [head(), event('{"choices":[{"delta":{"content":"he"}}]}'), event("[DONE]"), END]
        rig, canaries = _rig(*whole)
        await _serve(rig, stream=True)
        side = _model_side(canaries)
        assert (side["requests"], side["errors"]) == (1, 0)
        assert side["mean_ttft_s"] is not None

    asyncio.run(asyncio.wait_for(go(), timeout=10))


def test_a_refused_connection_is_an_error() -> None:
    async def go() -> None:
        rig, canaries = _rig(OK)
        rig.replicas["a"].refuse = True
        await _serve(rig)
        side = _model_side(canaries)
        assert (side["requests"], side["errors"]) == (1, 1)

    asyncio.run(asyncio.wait_for(go(), timeout=10))
