"""The simulated engine's command line, parsed by the sim's own command-line parser."""

from __future__ import annotations

import sys

import typer
from typer.main import get_command

from llmgw.cli.sim_cmd import sim_engine
from llmgw.engines import EngineAdapter, EngineProfile, LaunchContext, sim
from llmgw.engines.load import ANY

_PROFILE = EngineProfile(
    name="sim",
    engine="sim",
    served_model_name="chat",
    adapters=(EngineAdapter("sql", "ignored"), EngineAdapter("law", "ignored")),
    args=("--flavor", "llamacpp", "--time-scale", "0.01"),
)


def test_argv() -> None:
    launch = sim.launch(_PROFILE, LaunchContext(port=20001, host="127.0.0.1"))
    assert launch.argv[:3] == (sys.executable, "-m", "llmgw.cli.sim")
    assert launch.argv[3:] == (
        "--host",
        "127.0.0.1",
        "--port",
        "20001",
        "--model",
        "chat",
        "--adapter",
        "sql",
        "--adapter",
        "law",
        "--flavor",
        "llamacpp",
        "--time-scale",
        "0.01",
    )
    assert launch.metric_names is ANY
    assert launch.enforces_api_key


def test_the_replicas_key_is_demanded_of_callers() -> None:
    launch = sim.launch(_PROFILE, LaunchContext(port=20001, host="127.0.0.1", api_key="k-1"))
    assert launch.argv[-2:] == ("--api-key", "k-1")


def test_the_sims_own_parser_takes_the_command_line() -> None:
    argv = sim.launch(_PROFILE, LaunchContext(port=20001)).argv
    app = typer.Typer(add_completion=False)
    app.command()(sim_engine)
    context = get_command(app).make_context("llmgw sim-engine", list(argv[3:]))
    assert context.params["port"] == 20001
    assert context.params["model"] == ("chat",) or list(context.params["model"]) == ["chat"]
    assert list(context.params["adapter"]) == ["sql", "law"]
    assert context.params["flavor"].value == "llamacpp"
