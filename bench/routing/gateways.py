"""The routers under test, each put in front of the same four sim replicas.

A gateway is a name, the 127.0.0.1 port its OpenAI API answers on, the command that
starts it, and the address polled until it says it is ready. Commands may hold
`{root}`, `{run_dir}`, `{bench_venv}` and `{workers}` (the sims' URLs, one argument
each), filled in when the run starts. The processes are started and stopped with the
overhead benchmark's helpers (`bench/router/procs.py`): pinned to one core, output to a
log, environment scrubbed of `LLMGW_*` and proxy variables, stopped by PID.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
from collections.abc import Mapping

from procs import Proc, StartError, port_accepts
from replicas import MODEL


@dataclasses.dataclass(frozen=True)
class Gateway:
    name: str
    port: int
    command: tuple[str, ...]
    ready_path: tuple[int, str]
    """(port, path) answered with 200 once the gateway can route."""
    note: str
    env: tuple[tuple[str, str], ...] = ()
    metrics: tuple[int, str] | None = None
    """(port, path) of its Prometheus page, read after the run."""

    def argv(self, values: Mapping[str, str], workers: list[str]) -> list[str]:
        out: list[str] = []
        for part in self.command:
            if part == "{workers}":
                out += workers
            else:
                out.append(part.format(**values))
        return out


def _vllm_router(policy: str, port: int, metrics_port: int, note: str) -> Gateway:
    return Gateway(
        name=f"vllm-router-{policy.replace('_', '-')}",
        port=port,
        command=(
            "{bench_venv}/bin/vllm-router",
            "--worker-urls",
            "{workers}",
            "--policy",
            policy,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            # On by default at 29000, which another router on the machine may hold.
            "--prometheus-port",
            str(metrics_port),
            # Workers are up before the router starts; check them at once, not every 30 s.
            "--worker-startup-check-interval",
            "1",
        ),
        ready_path=(port, "/health"),
        metrics=(metrics_port, "/metrics"),
        note=note,
    )


GATEWAYS: tuple[Gateway, ...] = (
    Gateway(
        name="llmgw-prefix",
        port=18230,
        command=("{root}/.venv/bin/llmgw", "server", "--config", "{root}/bench/routing/llmgw-prefix.yaml"),
        env=(("LLMGW_ADMIN_TOKEN_FILE", "{run_dir}/llmgw-prefix-admin-token"),),
        ready_path=(18231, "/readyz"),
        metrics=(18231, "/metrics"),
        note="llmgw, `chat` profile, prefix tree on (defaults: min_match 64, match_ratio 0.5, "
        "balance_abs 32, balance_rel 1.5), target_inflight 8, admission off "
        "(bench/routing/llmgw-prefix.yaml)",
    ),
    Gateway(
        name="llmgw-round-robin",
        port=18233,
        command=(
            "{root}/.venv/bin/llmgw",
            "server",
            "--config",
            "{root}/bench/routing/llmgw-round-robin.yaml",
        ),
        env=(("LLMGW_ADMIN_TOKEN_FILE", "{run_dir}/llmgw-round-robin-admin-token"),),
        ready_path=(18234, "/readyz"),
        metrics=(18234, "/metrics"),
        note="llmgw, `round_robin` profile, prefix tree off, admission off "
        "(bench/routing/llmgw-round-robin.yaml): the baseline",
    ),
    _vllm_router(
        "cache_aware",
        18220,
        18221,
        "vLLM router --policy cache_aware, its defaults (cache-threshold 0.3, balance-abs-threshold 64, "
        "balance-rel-threshold 1.5, eviction-interval 120 s)",
    ),
    _vllm_router("round_robin", 18222, 18223, "vLLM router --policy round_robin"),
)


def _get(port: int, path: str, timeout_s: float = 2.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def probe(port: int, timeout_s: float = 30.0) -> str:
    """Empty when one small streamed chat through `port` ends with [DONE]; else why not."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Readiness probe."}],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        data = response.read()
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    if response.status != 200:
        return f"status {response.status}: {data[:200]!r}"
    if not data.rstrip().endswith(b"data: [DONE]"):
        return f"stream does not end with data: [DONE]: {data[-200:]!r}"
    return ""


def wait_ready(proc: Proc, gateway: Gateway, timeout_s: float) -> float:
    """Polls the gateway's readiness address, then probes one chat; seconds it took."""
    start = time.monotonic()
    deadline = start + timeout_s
    last = "not listening yet"
    port, path = gateway.ready_path
    while time.monotonic() < deadline:
        if (code := proc.exit_code()) is not None:
            raise StartError(f"{gateway.name} exited with status {code}.\n{proc.log_tail()}")
        if port_accepts(port):
            try:
                status, _ = _get(port, path)
            except (OSError, http.client.HTTPException) as exc:
                status, last = 0, f"{type(exc).__name__}: {exc}"
            if status == 200:
                why = probe(gateway.port)
                if not why:
                    return time.monotonic() - start
                last = why
            elif status:
                last = f"{path} answered {status}"
        time.sleep(0.1)
    raise StartError(f"{gateway.name} not ready after {timeout_s:.0f}s: {last}\n{proc.log_tail()}")


def metrics_page(gateway: Gateway) -> str:
    """The gateway's Prometheus page, or empty when it has none or it does not answer."""
    if gateway.metrics is None:
        return ""
    try:
        status, text = _get(*gateway.metrics, timeout_s=5.0)
    except (OSError, http.client.HTTPException):
        return ""
    return text.decode(errors="replace") if status == 200 else ""


def metric_values(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Sums of the named series on a metrics page (label sets added up); a series the
    page does not hold counts 0 (llmgw publishes a counter once it moves)."""
    if not text:
        return {}
    out = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name = series.split("{", 1)[0]
        if name in names:
            out[name] = out.get(name, 0.0) + float(value)
    return out


def labelled_values(text: str, name: str, label: str) -> dict[str, float]:
    """The series `name` on a metrics page, summed by the value of one label."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        series, _, value = line.rpartition(" ")
        labels = dict(part.split("=", 1) for part in series[len(name) + 1 : -1].split(",") if "=" in part)
        key = labels.get(label, "").strip('"')
        out[key] = out.get(key, 0.0) + float(value)
    return out
