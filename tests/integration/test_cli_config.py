"""`llmgw config check` and `llmgw config show`, run as the operator runs them: a real
process, its exit status, its stdout and stderr.

The child gets this process's environment without any LLMGW_ or proxy variable, plus
exactly what a case adds, so nothing from the machine running the tests leaks in. The
runs are independent, so they are all started at once and each test reads its own:
a process start costs more than everything else here together.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLUSTER = """\
listen: :8080
agent_insecure: true
router:
  retries: 1
models:
  - name: small
    source: /srv/models/qwen2.5-0.5b-q4.gguf
    profiles:
      - name: cpu
        engine: llamacpp
        cpu_cores: 2
    scaling: {min: 1, max: 1}
"""

BAD = """\
listen: '8080'
auth: {enabled: true}
router: {tenant_label: dept, retriez: 3, timeouts: {dial: 5}}
models:
  - {name: big, source: org/big, profiles: [{name: p, engine: vllm}]}
"""

INERT = """\
releases: https://mirror.example/llmgw
router: {trusted_proxies: [10.0.0.0/8]}
endpoints:
  - {id: a, url: "http://127.0.0.1:8001", models: [demo]}
"""

# A control plane (a model with profiles) whose agent port has neither certificates nor
# agent_insecure: each section is valid, and yet the server would stop as it started.
NO_AGENT_TLS = CLUSTER.replace("agent_insecure: true\n", "")

BROKEN = "listen: :8080\nrouter:\n  retries: [1\n"

Run = subprocess.CompletedProcess[str]


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("LLMGW_") and not k.lower().endswith("_proxy")
    }
    env.update(extra)
    return env


def _start(args: list[str], extra: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "llmgw", *args],
        env=_environment(extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> Run:
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cli")
    out = {"missing": folder / "absent.yaml"}
    for name, text in (
        ("cluster", CLUSTER),
        ("bad", BAD),
        ("broken", BROKEN),
        ("inert", INERT),
        ("no_tls", NO_AGENT_TLS),
    ):
        out[name] = folder / f"{name}.yaml"
        out[name].write_text(text, encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def runs(files: dict[str, Path]) -> dict[str, Run]:
    plan: dict[str, tuple[list[str], dict[str, str]]] = {
        "ok": (["config", "check", str(files["cluster"])], {}),
        "bad": (["config", "check", str(files["bad"])], {}),
        "broken": (["config", "check", str(files["broken"])], {}),
        "missing": (["config", "check", str(files["missing"])], {}),
        "overlay": (
            ["config", "show", str(files["cluster"])],
            {"LLMGW_ROUTER__RETRIES": "5", "LLMGW_COMFYUI_NODES": "x"},
        ),
        "typo": (["config", "check", str(files["cluster"])], {"LLMGW_ROUTER__RETRIEZ": "5"}),
        "show": (["config", "show", str(files["cluster"])], {}),
        "defaults": (["config", "show"], {}),
        "inert": (["config", "check", str(files["inert"])], {}),
        "strict": (["config", "check", "--strict", str(files["inert"])], {}),
        "show_inert": (["config", "show", str(files["inert"])], {}),
        "no_tls": (["config", "check", str(files["no_tls"])], {}),
        "show_no_tls": (["config", "show", str(files["no_tls"])], {}),
    }
    started = {name: _start(args, extra) for name, (args, extra) in plan.items()}
    return {name: _finish(process) for name, process in started.items()}


def test_check_accepts_a_valid_file(runs: dict[str, Run]) -> None:
    run = runs["ok"]
    # No warning: the firewall a control plane turns on is acted on.
    assert (run.returncode, run.stdout, run.stderr) == (0, "ok: 1 models\n", "")


def test_check_refuses_a_file_whose_server_would_not_start(runs: dict[str, Run]) -> None:
    run = runs["no_tls"]
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.startswith("agent_tls: this file runs a control plane"), run.stderr
    assert "set agent_insecure: true" in run.stderr
    assert "Traceback" not in run.stderr
    # show still shows the file, and says the same as a warning.
    shown = runs["show_no_tls"]
    assert shown.returncode == 0
    assert "warning: a server would not start: agent_tls:" in shown.stderr


def test_check_warns_once_per_inert_setting_in_use(runs: dict[str, Run]) -> None:
    run = runs["inert"]
    assert (run.returncode, run.stdout) == (0, "ok: 0 models\n")
    assert run.stderr.splitlines() == [
        "warning: releases: this version has no `llmgw ctl upgrade`; nothing is downloaded from releases",
        "warning: router.trusted_proxies: X-Forwarded-For is not read by this version; clients are "
        "seen by their socket address",
    ]


def test_strict_refuses_inert_settings_with_exit_2(runs: dict[str, Run]) -> None:
    run = runs["strict"]
    assert (run.returncode, run.stdout) == (2, "")
    lines = run.stderr.splitlines()
    assert [line.split(":")[0] for line in lines] == ["releases", "router.trusted_proxies"]
    assert all(line.endswith("(refused by --strict)") for line in lines)


def test_show_warns_on_stderr_and_keeps_stdout_loadable(runs: dict[str, Run]) -> None:
    run = runs["show_inert"]
    assert run.returncode == 0
    assert run.stdout.startswith("listen: :8080\n")
    assert run.stderr.count("warning: ") == 2


def test_check_reports_every_problem_and_exits_2(runs: dict[str, Run], files: dict[str, Path]) -> None:
    run = runs["bad"]
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 6, lines
    assert all(line.startswith(f"{files['bad']}: ") for line in lines)
    for fragment in (
        "listen: '8080' has no port",
        "auth.store: is empty but auth is on",
        "router.tenant_label: 'dept' is not a tenancy level",
        "router.timeouts.dial: 5 has no unit",
        "router.retriez: unknown key; did you mean router.retries?",
        'models: model "big" profile "p": engine vllm needs a GPU',
    ):
        assert any(fragment in line for line in lines), fragment


def test_check_names_the_line_of_a_syntax_error(runs: dict[str, Run], files: dict[str, Path]) -> None:
    run = runs["broken"]
    assert run.returncode == 2
    assert run.stderr.startswith(f"{files['broken']}:4: YAML syntax error")


def test_check_names_a_missing_file(runs: dict[str, Run], files: dict[str, Path]) -> None:
    run = runs["missing"]
    assert run.returncode == 2
    assert run.stderr == f"{files['missing']}: no such configuration file\n"


def test_environment_overlays_the_file(runs: dict[str, Run]) -> None:
    run = runs["overlay"]
    assert run.returncode == 0, run.stderr
    assert "  retries: 5\n" in run.stdout
    assert "  retries: 1\n" in runs["show"].stdout


def test_a_typo_in_a_variable_is_refused(runs: dict[str, Run]) -> None:
    run = runs["typo"]
    assert run.returncode == 2
    assert run.stderr == (
        "LLMGW_ROUTER__RETRIEZ: router has no key 'retriez'; did you mean LLMGW_ROUTER__RETRIES?\n"
    )


def test_show_round_trips(runs: dict[str, Run], tmp_path: Path) -> None:
    first = runs["show"]
    assert first.returncode == 0, first.stderr
    assert "  startup_timeout: 20m\n" in first.stdout  # the catalog's normalisation shows
    shown = tmp_path / "shown.yaml"
    shown.write_text(first.stdout, encoding="utf-8")
    second = _finish(_start(["config", "show", str(shown)], {}))
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_show_without_a_file_is_the_defaults(runs: dict[str, Run]) -> None:
    run = runs["defaults"]
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("listen: :8080\nadmin_listen: 127.0.0.1:9090\n")
    assert "    total: 30m\n" in run.stdout
