"""What the overhead benchmark measures: the upstream, and the targets put in front of it.

A target is a name, the 127.0.0.1 port it answers on, and the command that starts it
(none for `direct`, which is the upstream itself). Commands and environment values may
hold placeholders, filled in when the run starts:

    {root}       the repository root
    {run_dir}    this run's scratch directory (configs rendered here, logs, pid files)
    {upstream}   the upstream's base address, http://127.0.0.1:18100
    {port}       the target's own port
    {bench_venv} the anchors' virtualenv, .cache/bench-venv (bench/router/setup.sh)

`--target NAME=PORT=COMMAND` on overhead.py's command line replaces a target of that
name or adds one, so a new gateway, or llmgw started another way, is one flag away.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BENCH_VENV = ROOT / ".cache" / "bench-venv"
ECHO_MODULE = Path("/usr/lib/nginx/modules/ngx_http_echo_module.so")

UPSTREAM_PORT = 18100
UPSTREAM = f"http://127.0.0.1:{UPSTREAM_PORT}"


@dataclasses.dataclass(frozen=True)
class Target:
    """One thing wrk is pointed at."""

    name: str
    port: int
    command: tuple[str, ...] = ()
    """Empty: nothing to start, the port already answers (the upstream itself)."""
    env: tuple[tuple[str, str], ...] = ()
    note: str = ""
    """One line for the report: what this target is, configured how."""
    optional: bool = False
    """A failure to start is reported as a skip, not as the anchor failing."""
    startup_timeout_s: float = 240.0

    def rendered(self, values: Mapping[str, str]) -> Target:
        fill = {**values, "port": str(self.port)}
        return dataclasses.replace(
            self,
            command=tuple(part.format(**fill) for part in self.command),
            env=tuple((k, v.format(**fill)) for k, v in self.env),
        )


def _vllm_router(policy: str, port: int, metrics_port: int) -> Target:
    return Target(
        name=f"vllm-router-{policy.replace('_', '-')}",
        port=port,
        command=(
            "{bench_venv}/bin/vllm-router",
            "--worker-urls",
            "{upstream}",
            "--policy",
            policy,
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            # Its Prometheus exporter is on by default, on 29000: two routers up at once
            # (they are, see overhead.py) need one port each.
            "--prometheus-port",
            str(metrics_port),
        ),
        note=(
            f"vLLM router (Rust), --policy {policy}, one worker URL (the upstream), "
            f"metrics on port {metrics_port}, defaults otherwise"
        ),
    )


BUILTIN: tuple[Target, ...] = (
    Target(name="direct", port=UPSTREAM_PORT, note="no gateway: wrk straight to the upstream (baseline)"),
    Target(
        name="nginx-proxy",
        port=18101,
        command=(
            "nginx",
            "-c",
            "{run_dir}/nginx-proxy.conf",
            "-p",
            "{run_dir}",
            "-e",
            "{run_dir}/nginx-proxy.error.log",
        ),
        note="nginx plain reverse proxy, 1 worker, keep-alive pool to the upstream, no buffering",
    ),
    Target(
        name="litellm",
        port=18102,
        command=(
            "{bench_venv}/bin/litellm",
            "--config",
            "{run_dir}/litellm.yaml",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            "--num_workers",
            "1",
        ),
        # The cost map is read from the package instead of fetched from the network.
        env=(("LITELLM_LOCAL_MODEL_COST_MAP", "True"), ("LITELLM_TELEMETRY", "False")),
        note="LiteLLM proxy, 1 worker, openai/bench-model at the upstream, no database, no master key",
    ),
    _vllm_router("round_robin", 18103, 18108),
    _vllm_router("cache_aware", 18107, 18109),
    Target(
        name="llmgw",
        port=18104,
        command=("{root}/.venv/bin/llmgw", "server", "--config", "{root}/bench/router/llmgw-bench.yaml"),
        env=(("LLMGW_ADMIN_TOKEN_FILE", "{run_dir}/llmgw-admin-token"),),
        note="llmgw server --config bench/router/llmgw-bench.yaml (chat profile: scoring, prefix tree, "
        "admission; four endpoints on the one upstream)",
        optional=True,
        # Starts in seconds when it works; a server that answers but never serves is skipped sooner.
        startup_timeout_s=60.0,
    ),
    Target(
        name="llmgw-auth",
        port=18113,
        command=(
            "sh",
            "-c",
            "{root}/.venv/bin/python {root}/bench/router/auth_setup.py {run_dir}/llmgw-auth.db && "
            "exec {root}/.venv/bin/llmgw server --config {root}/bench/router/llmgw-auth.yaml",
        ),
        env=(
            ("LLMGW_ADMIN_TOKEN_FILE", "{run_dir}/llmgw-auth-admin-token"),
            ("LLMGW_AUTH__STORE", "{run_dir}/llmgw-auth.db"),
        ),
        note="llmgw server --config bench/router/llmgw-auth.yaml: the llmgw target with auth on (key, RPM, "
        "TPM, budgets at org, team and project, usage records to SQLite)",
        optional=True,
        startup_timeout_s=60.0,
    ),
    Target(
        name="llmgw-plain",
        port=18110,
        command=("{root}/.venv/bin/llmgw", "server", "--config", "{root}/bench/router/llmgw-plain.yaml"),
        env=(("LLMGW_ADMIN_TOKEN_FILE", "{run_dir}/llmgw-plain-admin-token"),),
        note="llmgw server --config bench/router/llmgw-plain.yaml (round robin, no tree, no admission)",
        optional=True,
        startup_timeout_s=60.0,
    ),
)


def parse_target(spec: str) -> Target:
    """A target from `NAME=PORT=COMMAND`; the command is split as a shell would."""
    name, sep1, rest = spec.partition("=")
    port_text, sep2, command = rest.partition("=")
    if not (sep1 and sep2 and name and command.strip()):
        raise ValueError(
            f"--target {spec!r}: write NAME=PORT=COMMAND, like llmgw=18104=llmgw server -c f.yaml"
        )
    if not port_text.isdigit() or not 1024 <= int(port_text) <= 65535:
        raise ValueError(f"--target {spec!r}: {port_text!r} is not a port from 1024 to 65535")
    return Target(
        name=name,
        port=int(port_text),
        command=tuple(shlex.split(command)),
        note=f"given on the command line: {command}",
        optional=True,
    )


def render_templates(run_dir: Path) -> None:
    """Writes the nginx and LiteLLM configurations for this run into `run_dir`."""
    values = {
        "@@RUN_DIR@@": str(run_dir),
        "@@ECHO_MODULE@@": str(ECHO_MODULE),
        "@@PORT@@": str(UPSTREAM_PORT),
        "@@UPSTREAM@@": UPSTREAM,
        "@@UPSTREAM_HOSTPORT@@": UPSTREAM.removeprefix("http://"),
    }
    proxy_port = next(t.port for t in BUILTIN if t.name == "nginx-proxy")
    for template, out, port in (
        ("nginx-upstream.conf.template", "nginx-upstream.conf", UPSTREAM_PORT),
        ("nginx-proxy.conf.template", "nginx-proxy.conf", proxy_port),
        ("litellm.yaml.template", "litellm.yaml", 0),
    ):
        text = (HERE / template).read_text()
        for key, value in {**values, "@@PORT@@": str(port)}.items():
            text = text.replace(key, value)
        if left := re.findall(r"@@[A-Z_]+@@", text):
            raise ValueError(f"{template}: placeholder {left[0]} is not one overhead.py fills in")
        (run_dir / out).write_text(text)
