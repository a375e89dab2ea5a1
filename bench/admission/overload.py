"""Admission under overload: sim replicas offered several times what they can serve, in
a mix of bands, through `llmgw server` with admission on, and (side by side, in the same
run) through one with admission off.

Phases, each against the same sim replicas:

1. unloaded: platinum requests one at a time, for the time to first token (TTFT) the
   overload figure is held against;
2. capacity: a closed loop of replicas × max-seqs platinum streams, for the request rate
   the replicas sustain (their capacity);
3. overload, admission on: an open-loop (Poisson) generator offers `--factor` × that
   rate for `--duration` seconds, bands drawn by `--mix`; every request streams and its
   status, Retry-After, error code and TTFT are kept; the gateway's resident memory
   (VmRSS in /proc) and its admission queue depth are sampled every second;
4. overload, admission off: the same offered load for `--off-duration` seconds, on a
   second gateway whose only difference is `router.admission.enabled: false`.

    .venv/bin/python bench/admission/overload.py            # the recorded run: 5 min + 1 min off
    .venv/bin/python bench/admission/overload.py --quick    # 30 s + 20 s off, for a check
    .venv/bin/python bench/admission/overload.py --priority # engines preempt by band

Writes bench/results/admission-overload.md and .json (`--quick`: admission-overload-quick;
`--priority`: admission-overload-priority, the sims run with `--scheduling-policy priority`
and the endpoints with `priority_scheduling: true`);
`--render FILE.json…` writes the .md of earlier runs again, measuring nothing.
Only 127.0.0.1 is used; the sims and gateways started are stopped by PID at the end;
every request has a client-side timeout, so every phase is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess, start_sim_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overload_report import (
    BANDS,
    MODEL,
    SEED_BANDS,
    Outcome,
    by_band,
    memory,
    ms,
    percentile,
    report,
    sim_args,
)

ROOT = Path(__file__).resolve().parents[2]
# About 100 prompt tokens: a short chat turn.
PROMPT = "Summarise the quarterly report for the finance team in three sentences, please. " * 8


# --- processes -------------------------------------------------------------------------------


def gateway_config(
    sims: Sequence[SimEngineProcess], a: argparse.Namespace, *, admission: bool
) -> dict[str, Any]:
    return {
        "endpoints": [
            {
                "id": f"sim-{i}",
                "url": s.url,
                "models": [MODEL],
                "engine": "sim",
                "priority_scheduling": a.priority,
            }
            for i, s in enumerate(sims)
        ],
        "router": {
            # 1.0 saturation is every replica running max-seqs sequences: full, nothing waiting.
            "scoring": {"target_inflight": a.max_seqs},
            "scrape_interval": "500ms",
            "timeouts": {"first_token": "300s"},
            "admission": {
                "enabled": admission,
                "bands": [
                    {"name": b, "priority": SEED_BANDS[b][0], "saturation_ceiling": a.ceilings[b]}
                    for b in BANDS
                ],
                "queue_ttl": f"{a.queue_ttl}s",
                "queue_capacity_per_band": a.per_band,
                "queue_capacity_total": a.total,
            },
        },
    }


GATEWAY_CORE, LOAD_CORE = 0, 1


def pin(pid: int, core: int) -> None:
    """Every thread of `pid` onto `core` (a process's threads each carry their own mask)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), {core})


@contextlib.contextmanager
def started_sims(a: argparse.Namespace) -> Iterator[list[SimEngineProcess]]:
    sims: list[SimEngineProcess] = []
    try:
        for _ in range(a.replicas):
            sims.append(start_sim_engine(*sim_args(a)))
            if a.pin:
                pin(sims[-1].pid, LOAD_CORE)
        yield sims
    finally:
        for s in sims:
            s.stop()


@contextlib.contextmanager
def started_gateway(config: dict[str, Any], a: argparse.Namespace) -> Iterator[GatewayProcess]:
    handle = start_gateway(config, timeout=120.0)
    if a.pin:
        pin(handle.process.pid, GATEWAY_CORE)
    try:
        yield handle
    finally:
        handle.stop()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the client --------------------------------------------------------------------------------


def body(max_tokens: int) -> bytes:
    return json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": max_tokens,
            "stream": True,
        }
    ).encode()


async def one(session: aiohttp.ClientSession, url: str, band: str, payload: bytes, t0: float) -> Outcome:
    started = time.perf_counter()
    sent_at = started - t0
    headers = {"content-type": "application/json", "x-llmgw-band": band}
    try:
        async with session.post(url, data=payload, headers=headers) as response:
            if response.status != 200:
                raw = await response.read()
                code = None
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    code = json.loads(raw)["error"]["code"]
                return Outcome(
                    band,
                    sent_at,
                    response.status,
                    None,
                    time.perf_counter() - started,
                    response.headers.get("Retry-After"),
                    code,
                )
            ttft = None
            answer_id = None
            async for chunk in response.content.iter_any():
                if ttft is None and b"data:" in chunk:
                    ttft = time.perf_counter() - started
                    answer_id = _answer_id(chunk)
            return Outcome(
                band,
                sent_at,
                200,
                ttft,
                time.perf_counter() - started,
                replica=response.headers.get("x-llmgw-replica"),
                answer_id=answer_id,
            )
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Outcome(band, sent_at, 0, None, time.perf_counter() - started, error=type(exc).__name__)


def _answer_id(chunk: bytes) -> str | None:
    start = chunk.find(b'"id":"')
    if start < 0:
        return None
    end = chunk.find(b'"', start + 6)
    return chunk[start + 6 : end].decode() if end > 0 else None


def session(timeout_s: float) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, force_close=True),
        timeout=aiohttp.ClientTimeout(total=timeout_s),
    )


async def unloaded(gw: GatewayProcess, count: int, a: argparse.Namespace) -> list[Outcome]:
    """Platinum requests one at a time: nothing else in flight anywhere."""
    url = gw.base_url + "/chat/completions"
    # A short answer: the time to the first token does not depend on the length, and the
    # phase takes a fraction of the time.
    payload = body(4)
    async with session(a.client_timeout) as s:
        t0 = time.perf_counter()
        return [await one(s, url, "platinum", payload, t0) for _ in range(count)]


async def capacity(gw: GatewayProcess, seconds: float, a: argparse.Namespace) -> float:
    """Requests a second the replicas finish with every sequence slot busy."""
    url = gw.base_url + "/chat/completions"
    payload = body(a.max_tokens)
    done: list[float] = []

    async def worker(s: aiohttp.ClientSession, t0: float, until: float) -> None:
        while time.perf_counter() < until:
            result = await one(s, url, "platinum", payload, t0)
            if result.status == 200:
                done.append(time.perf_counter() - t0)

    async with session(a.client_timeout) as s:
        t0 = time.perf_counter()
        warm = 3.0
        await asyncio.gather(*(worker(s, t0, t0 + warm + seconds) for _ in range(a.replicas * a.max_seqs)))
    counted = [t for t in done if warm <= t <= warm + seconds]
    return len(counted) / seconds


async def overload(
    gw: GatewayProcess, rate: float, seconds: float, a: argparse.Namespace, seed: int
) -> tuple[list[Outcome], list[dict[str, float]]]:
    """Open-loop Poisson arrivals at `rate` for `seconds`; samples of RSS and queue depth."""
    rng = random.Random(seed)
    url = gw.base_url + "/chat/completions"
    payload = body(a.max_tokens)
    weights = [a.mix[b] for b in BANDS]
    pid = gw.process.pid
    samples: list[dict[str, float]] = []
    tasks: list[asyncio.Task[Outcome]] = []
    async with session(a.client_timeout) as s:
        t0 = time.perf_counter()
        cpu0 = cpu_seconds(pid)
        stop = asyncio.Event()

        async def sampler() -> None:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as admin:
                while not stop.is_set():
                    depth = 0.0
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                        async with admin.get(gw.admin_url + "/metrics") as response:
                            for line in (await response.text()).splitlines():
                                if line.startswith("llmgw_admission_queue_depth{"):
                                    depth += float(line.rsplit(" ", 1)[1])
                    samples.append(
                        {
                            "t": round(time.perf_counter() - t0, 2),
                            "rss_kib": rss_kib(pid),
                            "queue_depth": depth,
                            "in_flight_clients": sum(1 for t in tasks if not t.done()),
                        }
                    )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 1.0)

        sampling = asyncio.create_task(sampler())
        next_at = 0.0
        while True:
            next_at += rng.expovariate(rate)
            if next_at > seconds:
                break
            delay = next_at - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            band = rng.choices(BANDS, weights)[0]
            tasks.append(asyncio.create_task(one(s, url, band, payload, t0)))
        outcomes = await asyncio.gather(*tasks)
        stop.set()
        await sampling
        samples.append({"t": round(time.perf_counter() - t0, 2), "gateway_cpu_s": cpu_seconds(pid) - cpu0})
    return list(outcomes), samples


async def engine_side(
    sims: Sequence[SimEngineProcess], outcomes: Sequence[Outcome]
) -> dict[str, dict[str, float | None]]:
    """Splits each answered request's TTFT into the sim's part (from its arrival at the sim
    to the sim writing the first token) and the rest (admission's queue, the gateway, the
    network, the client), by finding it in the sim's record of its last requests."""
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as admin:
        for i, s in enumerate(sims):
            async with admin.get(s.admin_url + "/sim/requests", params={"limit": "10000"}) as response:
                for job in (await response.json())["requests"]:
                    jobs[(f"sim-{i}", job["id"])] = job
    table: dict[str, dict[str, float | None]] = {}
    for band in BANDS:
        engine: list[float] = []
        slot_wait: list[float] = []
        rest: list[float] = []
        for o in outcomes:
            job = jobs.get((o.replica or "", o.answer_id or ""))
            if o.band != band or o.ttft is None or job is None or job.get("first_write_at") is None:
                continue
            engine_s = job["first_write_at"] - job["arrived_at"]
            engine.append(engine_s)
            slot_wait.append(job["queue_s"] or 0.0)
            rest.append(o.ttft - engine_s)
        table[band] = {
            "matched": len(engine),
            "engine_ttft_p50_ms": ms(percentile(engine, 50)),
            "engine_ttft_p99_ms": ms(percentile(engine, 99)),
            "engine_slot_wait_p99_ms": ms(percentile(slot_wait, 99)),
            "rest_p50_ms": ms(percentile(rest, 50)),
            "rest_p99_ms": ms(percentile(rest, 99)),
        }
    return table


async def admission_counters(gw: GatewayProcess) -> dict[str, float]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as admin,
        admin.get(gw.admin_url + "/metrics") as response,
    ):
        text = await response.text()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("llmgw_admission_") and ("_total{" in line or "_wait_seconds" in line)
    }


# --- the run -----------------------------------------------------------------------------------


async def run(a: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with started_sims(a) as sims:
        with started_gateway(gateway_config(sims, a, admission=True), a) as gw:
            print("[overload] unloaded platinum TTFT…", flush=True)
            base = await unloaded(gw, a.unloaded_requests, a)
            ttfts = [o.ttft for o in base if o.ttft is not None]
            result["unloaded"] = {
                "requests": len(base),
                "ok_200": sum(1 for o in base if o.status == 200),
                "ttft_p50_ms": ms(percentile(ttfts, 50)),
                "ttft_p99_ms": ms(percentile(ttfts, 99)),
                "total_p50_ms": ms(percentile([o.total for o in base], 50)),
            }
            print(f"[overload] unloaded: {result['unloaded']}", flush=True)
            rate = await capacity(gw, a.capacity_seconds, a)
            result["capacity_req_per_s"] = round(rate, 2)
            offered = a.factor * rate
            result["offered_req_per_s"] = round(offered, 2)
            print(f"[overload] capacity {rate:.2f} req/s; offering {offered:.2f} req/s", flush=True)
            await quiet(sims)
            outcomes, samples = await overload(gw, offered, a.duration, a, a.seed)
            result["on"] = summary(outcomes, samples, a.duration, await admission_counters(gw))
            result["on"]["ttft_split"] = await engine_side(sims, outcomes)
            print(f"[overload] admission on: {json.dumps(result['on']['bands'])}", flush=True)
        if a.off_duration > 0:
            await quiet(sims)
            with started_gateway(gateway_config(sims, a, admission=False), a) as off:
                outcomes, samples = await overload(off, offered, a.off_duration, a, a.seed)
                result["off"] = summary(outcomes, samples, a.off_duration, {})
                print(f"[overload] admission off: {json.dumps(result['off']['bands'])}", flush=True)
    return result


async def quiet(sims: Sequence[SimEngineProcess], limit_s: float = 120.0) -> None:
    """Waits (bounded) until no sim runs or queues anything left from a phase before."""
    deadline = time.monotonic() + limit_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as admin:
        while time.monotonic() < deadline:
            busy = 0
            for s in sims:
                async with admin.get(s.admin_url + "/sim/state") as response:
                    state = await response.json()
                    busy += state["running"] + state["waiting"]
            if not busy:
                return
            await asyncio.sleep(0.2)


def summary(
    outcomes: Sequence[Outcome],
    samples: Sequence[dict[str, float]],
    seconds: float,
    counters: dict[str, float],
) -> dict[str, Any]:
    cpu = next((s["gateway_cpu_s"] for s in samples if "gateway_cpu_s" in s), None)
    return {
        "duration_s": seconds,
        "requests": len(outcomes),
        "bands": by_band(outcomes, seconds),
        "memory": memory(samples, warmup_s=min(30.0, seconds / 3)),
        "gateway_cpu_s": None if cpu is None else round(cpu, 2),
        "gateway_counters": counters,
        "rss_samples": [s for s in samples if "rss_kib" in s],
    }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="30 s on, 20 s off, fewer unloaded requests")
    p.add_argument(
        "--duration", type=float, default=None, help="seconds of overload, admission on (300; --quick 30)"
    )
    p.add_argument(
        "--off-duration", type=float, default=None, help="seconds of it with admission off; 0: none"
    )
    p.add_argument("--factor", type=float, default=4.0, help="offered load over measured capacity")
    p.add_argument("--mix", default="platinum=10,gold=30,silver=30,bronze=30", help="percent per band")
    p.add_argument(
        "--ceilings",
        default=",".join(f"{b}={c:g}" for b, (_, c) in SEED_BANDS.items()),
        help="saturation ceiling per band (the seed's by default)",
    )
    p.add_argument(
        "--priority",
        action="store_true",
        help="sims with --scheduling-policy priority, endpoints with priority_scheduling: true",
    )
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--max-seqs", type=int, default=8)
    p.add_argument("--decode-ms", type=float, default=20.0)
    p.add_argument("--decode-ms-per-seq", type=float, default=0.25)
    p.add_argument("--prefill-ms-per-token", type=float, default=0.2)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--queue-ttl", type=float, default=5.0, help="router.admission.queue_ttl, seconds")
    p.add_argument("--per-band", type=int, default=64, help="router.admission.queue_capacity_per_band")
    p.add_argument("--total", type=int, default=128, help="router.admission.queue_capacity_total")
    p.add_argument("--unloaded-requests", type=int, default=None)
    p.add_argument("--capacity-seconds", type=float, default=None)
    p.add_argument("--client-timeout", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--pin",
        action="store_true",
        help="the gateway on core 0, the sims and the load generator on core 1 (needs 2 cores)",
    )
    p.add_argument("--out", type=Path, default=None, help="report path without suffix")
    a = p.parse_args(argv)
    # --quick changes the defaults only: a value given on the command line stands.
    defaults = (30.0, 20.0, 60, 8.0) if a.quick else (300.0, 60.0, 200, 15.0)
    for name, default in zip(
        ("duration", "off_duration", "unloaded_requests", "capacity_seconds"), defaults, strict=True
    ):
        if getattr(a, name) is None:
            setattr(a, name, default)
    mix = dict(part.split("=") for part in a.mix.split(","))
    if set(mix) != set(BANDS):
        p.error(f"--mix: give a percentage for each of {', '.join(BANDS)}")
    a.mix = {b: float(mix[b]) for b in BANDS}
    ceilings = dict(part.split("=") for part in a.ceilings.split(","))
    if set(ceilings) != set(BANDS):
        p.error(f"--ceilings: give a ceiling for each of {', '.join(BANDS)}")
    a.ceilings = {b: float(ceilings[b]) for b in BANDS}
    if not (1 <= a.duration <= 3600 and 0 <= a.off_duration <= 3600 and 1 <= a.replicas <= 16):
        p.error("--duration 1..3600 s, --off-duration 0..3600 s and --replicas 1..16 keep a run bounded")
    if a.out is None:
        name = "admission-overload" + ("-priority" if a.priority else "") + ("-quick" if a.quick else "")
        a.out = ROOT / "bench" / "results" / name
    return a


def rerender(path: Path) -> Path:
    """Writes the .md of a run again from its .json (after a change to the report's form)."""
    data = json.loads(path.read_text())
    a = argparse.Namespace(**{**data.pop("settings"), "out": path.with_suffix("")})
    meta = data.pop("meta")
    a.out.with_suffix(".md").write_text(report(a, data, meta))
    return a.out.with_suffix(".md")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--render"]:
        for name in argv[1:]:
            print(f"wrote {rerender(Path(name))}")
        return 0
    a = parse_args(argv)
    if a.pin:
        # The load generator here, and the sims it starts, on the load core.
        pin(os.getpid(), LOAD_CORE)
    started = dt.datetime.now().astimezone()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    meta: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M %Z"),
        "command": ".venv/bin/python bench/admission/overload.py " + " ".join(argv),
        "machine": f"{os.cpu_count()} vCPU {cpu}, Python {platform.python_version()}",
        "loadavg_start": os.getloadavg()[0],
    }
    result = asyncio.run(run(a))
    meta["loadavg_end"] = os.getloadavg()[0]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
    a.out.with_suffix(".json").write_text(
        json.dumps({"meta": meta, "settings": settings, **result}, indent=1)
    )
    a.out.with_suffix(".md").write_text(report(a, result, meta))
    print(f"wrote {a.out.with_suffix('.md')} and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
