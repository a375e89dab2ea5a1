"""`--api-key`: the sim requires a bearer key on its /v1 routes, as vLLM does with one."""

from __future__ import annotations

import httpx

from llmgw.testing.sim import running_sim_engine


def test_api_keys_are_required_on_v1_routes_only() -> None:
    with running_sim_engine("--model", "m", "--api-key", "k1", "--api-key", "k2") as engine:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        url = engine.base_url + "/chat/completions"
        missing = httpx.post(url, json=body, timeout=10)
        assert missing.status_code == 401
        assert missing.json()["error"]["message"]
        wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401
        for key in ("k1", "k2"):
            ok = httpx.post(url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=10)
            assert ok.status_code == 200
        assert httpx.get(engine.url + "/health", timeout=10).status_code == 200
        assert httpx.get(engine.url + "/metrics", timeout=10).status_code == 200
