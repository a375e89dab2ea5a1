"""Sim engines for gateway tests: fast to answer, faults switched over their admin API."""

from __future__ import annotations

from typing import Any

import httpx

from llmgw.testing.sim import SimEngineProcess, start_sim_engine

# Fast sims: the tests are about the gateway, not about waiting for tokens.
FAST = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "12")


def sim(*args: str) -> SimEngineProcess:
    """A ready sim engine answering fast."""
    return start_sim_engine(*FAST, *args)


def set_fault(engine: SimEngineProcess, mode: str, **extra: Any) -> None:
    """Switches the sim's fault at run time (`mode` none, refuse, 500, hang-stream...)."""
    response = httpx.post(engine.admin_url + "/sim/fault", json={"mode": mode, **extra}, timeout=5)
    response.raise_for_status()


def sim_state(engine: SimEngineProcess) -> dict[str, Any]:
    """The sim's counters: requests seen, running, waiting, prefix hits."""
    response = httpx.get(engine.admin_url + "/sim/state", timeout=5)
    response.raise_for_status()
    state: dict[str, Any] = response.json()
    return state


def endpoint(eid: str, process: SimEngineProcess, *models: str, **extra: Any) -> dict[str, Any]:
    """A static `endpoints:` entry for the sim (`engine: sim` unless `extra` says)."""
    return {"id": eid, "url": process.url, "models": list(models), "engine": "sim", **extra}


def set_quality(engine: SimEngineProcess, **quality: float) -> None:
    """Changes the sim's error_rate and/or ttft_factor at run time (llmgw.sim.quality)."""
    response = httpx.post(engine.admin_url + "/sim/quality", json=quality, timeout=5)
    response.raise_for_status()
