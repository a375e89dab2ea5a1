"""`llmgw agent`'s refusals before it starts (one sentence, exit status 2), how it finds
llama-server, and what it writes down of a command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from llmgw.agent.binaries import cpu_flags, find_llama_server, parse_engine_bins
from llmgw.agent.supervisor import shown_argv
from llmgw.cli.agent_cmd import agent, parse_labels, state_lock
from llmgw.errors import ConfigError


def _run(*args: str) -> tuple[int, str]:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(agent)
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--server", "127.0.0.1:7443"), "needs --tls-cert, --tls-key and --tls-ca"),
        (("--server", "127.0.0.1:7443", "--insecure", "--tls-ca", "ca.pem"), "exclude each other"),
        (("--server", "control-plane", "--insecure"), "give the control plane's agent port as host:port"),
        (("--server", "h:1", "--insecure", "--labels", "tier"), "write key=value pairs"),
        (("--server", "h:1", "--insecure", "--labels", "llmgw.io/rakc=r1"), "did you mean llmgw.io/rack?"),
        (("--server", "h:1", "--insecure", "--engine-bin", "llamacpp"), "write engine=path"),
    ],
)
def test_a_bad_command_line_is_one_sentence_and_status_2(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    code, output = _run(*args, "--state-dir", str(tmp_path))
    assert code == 2
    assert message in output


def test_a_second_agent_on_the_same_state_directory_is_refused(tmp_path: Path) -> None:
    with state_lock(tmp_path):
        code, output = _run("--server", "127.0.0.1:1", "--insecure", "--state-dir", str(tmp_path))
    assert code == 2
    assert "is in use by agent pid" in output


def test_labels_are_pairs_checked_as_discovery_checks_them() -> None:
    assert parse_labels("llmgw.io/rack=r12, tier=cpu,") == {"llmgw.io/rack": "r12", "tier": "cpu"}
    assert parse_labels("") == {}
    with pytest.raises(ConfigError, match="not a label key"):
        parse_labels("bad key=x")


def test_engine_programs_are_engine_equals_path() -> None:
    assert parse_engine_bins(["llamacpp=/opt/ls", " vllm = /usr/bin/vllm "]) == {
        "llamacpp": "/opt/ls",
        "vllm": "/usr/bin/vllm",
    }


def test_the_flags_line_of_cpuinfo_is_read() -> None:
    text = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpu_flags(text) == {"fpu", "sse", "avx2", "avx512f"}
    assert cpu_flags("") == set()


def test_llama_server_is_the_build_then_the_prebuilt_where_the_cpu_runs_it_then_path(tmp_path: Path) -> None:
    built = tmp_path / "built" / "llama-server"
    wheel = tmp_path / "wheel" / "llama-server"

    def find(cpu: str) -> str | None:
        return find_llama_server(
            cpuinfo=lambda: f"flags : {cpu}",
            built=built,
            prebuilt=lambda: wheel,
            which=lambda name: f"/usr/bin/{name}",
        )

    assert find("avx2") == "/usr/bin/llama-server", "the prebuilt one dies with SIGILL without AVX-512"
    assert find("avx2 avx512f avx512_vnni") == "/usr/bin/llama-server", "nor without AVX-VNNI (VEX)"
    assert find("avx2 avx512f avx_vnni") == str(wheel)
    built.parent.mkdir()
    built.write_text("")
    assert find("avx2 avx512f avx_vnni") == str(built), "a build made here comes first"


def test_secrets_on_a_command_line_are_not_written_down() -> None:
    argv = ("sglang", "--port", "9", "--api-key", "s3cret", "--api_key=s3cret", "--model", "m")
    assert shown_argv(argv) == ("sglang", "--port", "9", "--api-key", "***", "--api_key=***", "--model", "m")
