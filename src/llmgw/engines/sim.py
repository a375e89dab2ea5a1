"""The simulated engine: `python -m llmgw.cli.sim`'s command line for one replica.

The sim is part of llmgw, so it runs under the agent's own interpreter and is always
installed at llmgw's version. It loads no weights and needs no card; the agent still
hides every card from it, as from any replica placement gave none. Given the replica's
API key (`--api-key`), it refuses `/v1/` requests without it, as a real engine does.
Its context length and cache size are its own options (`--max-model-len`,
`--kv-blocks`), set in the profile's args where a test needs them.
"""

from __future__ import annotations

import sys
from datetime import timedelta

from llmgw.engines.launch import (
    Launch,
    LaunchContext,
    check_context,
    device_env,
    layered_env,
)
from llmgw.engines.metrics import NAMES_BY_ENGINE
from llmgw.engines.profile import EngineProfile

ENGINE = "sim"
MODULE = "llmgw.cli.sim"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
METRIC_PREFIX = ""
"""The sim serves the metric names of the engine its --flavor imitates."""
METRICS = NAMES_BY_ENGINE[ENGINE]
STOP_GRACE = timedelta(seconds=5)


def launch(profile: EngineProfile, ctx: LaunchContext, binary: str | None = None) -> Launch:
    """A simulated replica of this profile; `binary` is the Python interpreter (the
    agent's own by default)."""
    check_context(profile, ctx, needs_gpus=False, spans_nodes=False, needs_weights=False)
    argv = [binary or sys.executable, "-m", MODULE, "--host", ctx.host, "--port", str(ctx.port)]
    argv += ["--model", profile.served_model_name]
    for adapter in profile.adapters:
        argv += ["--adapter", adapter.name]
    argv += profile.args
    if ctx.api_key:
        argv += ["--api-key", ctx.api_key]
    return Launch(
        engine=ENGINE,
        argv=tuple(argv),
        env=layered_env({}, profile.env, device_env(ctx.gpus)),
        metric_names=METRICS,
        metric_prefix=METRIC_PREFIX,
        startup_timeout=profile.startup_timeout,
        cwd=ctx.state_dir,
        health_path=HEALTH_PATH,
        ready=f"GET {HEALTH_PATH} answers 200 (503 during --startup-delay)",
        metrics_path=METRICS_PATH,
        enforces_api_key=True,
        stop_grace=STOP_GRACE,
        kill_after_grace=True,
        cpu_affinity=ctx.cpu_cores,
    )
