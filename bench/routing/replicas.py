"""The four sim replicas every target routes over, started fresh for each target.

Started through `llmgw.testing.sim.start_sim_engine` (which polls `/health` and stops
them by PID) on fixed ports, 127.0.0.1:18201-18204, because the llmgw configurations
list them statically. Replica i always gets seed `base_seed + i`: the seed is the first
eight hex digits of every response id a sim hands out, so a client behind a gateway
knows which replica answered, and a restart with the same seeds gives the same ids.

`/sim/state` (prefix-cache queries and hits, in tokens) is read at the end of the
warm-up and at the end of the run, so the measured window's hit rate is the difference;
`/sim/requests` gives each finished request's simulated timeline and cached tokens.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

from llmgw.testing.sim import SimEngineProcess, start_sim_engine

SIM_PORTS: tuple[int, ...] = (18201, 18202, 18203, 18204)
MODEL = "routing-model"


@dataclass(frozen=True)
class SimCosts:
    """The replicas' shape: batch, KV capacity and cost model (sim-engine flags)."""

    max_seqs: int
    kv_blocks: int
    block_size: int
    prefill_ms_per_token: float
    decode_ms: float
    decode_ms_per_seq: float
    time_scale: float

    def args(self) -> list[str]:
        return [
            "--model", MODEL,
            "--max-seqs", str(self.max_seqs),
            "--block-size", str(self.block_size),
            "--kv-blocks", str(self.kv_blocks),
            "--prefill-ms-per-token", str(self.prefill_ms_per_token),
            "--decode-ms", str(self.decode_ms),
            "--decode-ms-per-seq", str(self.decode_ms_per_seq),
            "--time-scale", str(self.time_scale),
        ]  # fmt: skip


def _get_json(url: str, timeout_s: float = 10.0) -> Any:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {url}: status {response.status}: {body[:200]!r}")
        return json.loads(body)
    finally:
        conn.close()


def post_json(url: str, payload: object, timeout_s: float = 10.0) -> Any:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        conn.request(
            "POST", parts.path, body=json.dumps(payload), headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"POST {url}: status {response.status}: {body[:200]!r}")
        return json.loads(body)
    finally:
        conn.close()


class Replicas:
    """Four running sims; a context manager that always stops them."""

    def __init__(self, costs: SimCosts, base_seed: int, cpu: set[int] | None) -> None:
        self.costs = costs
        self.seeds = tuple(base_seed + i for i in range(len(SIM_PORTS)))
        self._cpu = cpu
        self.sims: list[SimEngineProcess] = []

    def __enter__(self) -> Replicas:
        try:
            for port, seed in zip(SIM_PORTS, self.seeds, strict=True):
                # start_sim_engine passes --port 0 first; the later --port wins.
                sim = start_sim_engine("--port", str(port), "--seed", str(seed), *self.costs.args())
                self.sims.append(sim)
                if self._cpu:
                    os.sched_setaffinity(sim.pid, self._cpu)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for sim in self.sims:
            with contextlib.suppress(OSError):
                sim.stop(timeout=10.0)
        self.sims.clear()

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.sims]

    def replica_of(self, response_id: str) -> int | None:
        """Which replica handed out `response_id` (chatcmpl-<seed:08x><counter>)."""
        _, _, rest = response_id.partition("-")
        with contextlib.suppress(ValueError):
            seed = int(rest[:8], 16)
            if seed in self.seeds:
                return self.seeds.index(seed)
        return None

    def states(self) -> list[dict[str, Any]]:
        return [_get_json(s.admin_url + "/sim/state") for s in self.sims]

    def finished_requests(self) -> list[list[dict[str, Any]]]:
        return [_get_json(s.admin_url + "/sim/requests?limit=100000", 30.0)["requests"] for s in self.sims]

    def exited(self) -> list[int]:
        """Replicas whose process has ended (they should not have)."""
        return [i for i, s in enumerate(self.sims) if s.poll() is not None]
