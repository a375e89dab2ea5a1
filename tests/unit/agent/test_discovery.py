"""Discovery from recorded outputs: cards (or none), engines and their versions, memory,
disk and weights, and the labels an operator gives a node."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import llmgw
from llmgw.agent import discovery
from llmgw.agent.discovery import (
    CommandResult,
    EngineProbe,
    check_labels,
    default_probes,
    discover,
    discover_gpus,
    disk_space,
    label_problems,
    list_weights,
    llama_server_version,
    parse_meminfo,
    probe_engines,
    run_command,
    version_line,
)
from llmgw.agent.gpu_smi import LIST_ARGV, QUERY_ARGV
from llmgw.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures"


class Recorded:
    """A runner answering from recorded outputs; a command it has none for is missing."""

    def __init__(self, answers: dict[tuple[str, ...], CommandResult]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> CommandResult:
        self.asked.append(tuple(argv))
        return self.answers.get(tuple(argv), CommandResult(127, missing=True))


def _smi(machine: str) -> dict[tuple[str, ...], CommandResult]:
    return {
        QUERY_ARGV: CommandResult(0, (FIXTURES / f"nvidia-smi-{machine}-query.txt").read_text()),
        LIST_ARGV: CommandResult(0, (FIXTURES / f"nvidia-smi-{machine}-list.txt").read_text()),
    }


# --- cards -----------------------------------------------------------------------------


def test_no_nvidia_smi_is_a_node_without_cards_not_an_error() -> None:
    assert discover_gpus(Recorded({})) == ((), "")


def test_a_driver_without_cards_is_no_cards() -> None:
    runner = Recorded({QUERY_ARGV: CommandResult(6, (FIXTURES / "nvidia-smi-no-devices.txt").read_text())})
    assert discover_gpus(runner) == ((), "")


def test_a_driver_that_does_not_answer_is_reported() -> None:
    runner = Recorded({QUERY_ARGV: CommandResult(9, (FIXTURES / "nvidia-smi-no-driver.txt").read_text())})
    gpus, error = discover_gpus(runner)
    assert gpus == ()
    assert error.startswith(
        "nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate"
    )


def test_the_mig_listing_is_asked_for_only_when_a_card_is_in_mig_mode() -> None:
    runner = Recorded(_smi("8xh100"))
    gpus, error = discover_gpus(runner)
    assert (len(gpus), error) == (8, "")
    assert runner.asked == [QUERY_ARGV]

    runner = Recorded(_smi("2xa100-mig"))
    gpus, error = discover_gpus(runner)
    assert runner.asked == [QUERY_ARGV, LIST_ARGV]
    assert len(gpus[0].mig_devices) == 4


def test_a_failed_mig_listing_keeps_the_cards_and_says_so() -> None:
    answers = _smi("2xa100-mig")
    answers[LIST_ARGV] = CommandResult(1, stderr="Failed to initialize NVML")
    gpus, error = discover_gpus(Recorded(answers))
    assert [g.gpu_class for g in gpus] == ["a100-40g", "a100-40g"]
    assert gpus[0].mig_devices == ()
    assert error == "nvidia-smi -L failed (exit 1): Failed to initialize NVML"


def test_unreadable_output_is_reported() -> None:
    gpus, error = discover_gpus(Recorded({QUERY_ARGV: CommandResult(0, "garbage\n")}))
    assert gpus == ()
    assert "nvidia-smi line 'garbage'" in error


# --- engines ---------------------------------------------------------------------------


def test_llama_server_version_of_a_release_build_is_its_tag() -> None:
    assert (
        llama_server_version(CommandResult(0, stderr="version: 10991 (1a2b3c4)\nbuilt with cc\n")) == "b10991"
    )


def test_llama_server_version_of_the_recorded_build() -> None:
    recorded = (FIXTURES / "llama-server-version.txt").read_text()
    assert llama_server_version(CommandResult(0, stderr=recorded)) == "0.1.0-dev"


def test_vllm_version_after_its_log_lines() -> None:
    assert version_line(CommandResult(0, (FIXTURES / "vllm-version.txt").read_text())) == "0.30.0"


def test_probe_engines_reports_what_answers_and_always_the_sim() -> None:
    probes = default_probes(python="/opt/py", vllm="/opt/vllm/bin/vllm", llama_server="/opt/llama-server")
    runner = Recorded(
        {
            probes["vllm"].argv: CommandResult(0, (FIXTURES / "vllm-version.txt").read_text()),
            probes["llamacpp"].argv: CommandResult(0, stderr="version: 10991 (deadbee)\n"),
            probes["sglang"].argv: CommandResult(1, stderr="PackageNotFoundError: sglang"),
        }
    )
    engines = probe_engines(runner, probes)
    assert engines == {"vllm": "0.30.0", "llamacpp": "b10991", "sim": llmgw.__version__}
    assert probes["sglang"].argv[:2] == ("/opt/py", "-c")
    assert "importlib.metadata" in probes["trtllm"].argv[2]


def test_python_engine_probe_reads_metadata_without_importing_the_engine() -> None:
    probe = default_probes()["sglang"]
    result = run_command((sys.executable, "-c", probe.argv[2].replace("'sglang'", "'pydantic'")))
    assert result.returncode == 0
    assert probe.parse(result)
    missing = run_command(probe.argv)
    assert missing.returncode != 0


def test_run_command_reports_a_missing_program() -> None:
    result = run_command(("llmgw-no-such-program-here", "--version"))
    assert result.missing
    assert result.returncode == 127


def test_run_command_reports_a_hung_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "PROBE_TIMEOUT_S", 0.2)
    result = run_command((sys.executable, "-c", "import time; time.sleep(5)"))
    assert result.returncode == 124
    assert "did not answer within 0.2s" in result.stderr


# --- memory, disk, weights ---------------------------------------------------------------

_MEMINFO = "MemTotal:       131900000 kB\nMemFree:         1000000 kB\nMemAvailable:   98000000 kB\n"


def test_meminfo() -> None:
    assert parse_meminfo(_MEMINFO) == (131900000 * 1024, 98000000 * 1024)
    assert parse_meminfo("MemTotal: 2048 kB\nMemFree: 1024 kB\n") == (2048 * 1024, 1024 * 1024)


def test_disk_space_of_a_directory_not_made_yet_is_its_file_systems(tmp_path: Path) -> None:
    free, total = disk_space(tmp_path / "not" / "yet")
    assert total > 0
    assert 0 <= free <= total


def test_weights_on_disk(tmp_path: Path) -> None:
    (tmp_path / "qwen3-8b-q4_k_m.gguf").write_bytes(b"x" * 1000)
    repo = tmp_path / "models--Qwen--Qwen3-8B"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_bytes(b"y" * 300)
    (repo / "snapshots" / "c0ffee").mkdir(parents=True)
    # A snapshot links to its blob: counted once.
    os.symlink(repo / "blobs" / "abc", repo / "snapshots" / "c0ffee" / "model.safetensors")
    (tmp_path / ".incoming").mkdir()
    (tmp_path / ".incoming" / "part").write_bytes(b"z" * 50)
    entries = list_weights(tmp_path)
    assert [(e.name, e.size_bytes, e.kind) for e in entries] == [
        ("models--Qwen--Qwen3-8B", 300, "dir"),
        ("qwen3-8b-q4_k_m.gguf", 1000, "file"),
    ]


def test_a_missing_weights_directory_holds_nothing(tmp_path: Path) -> None:
    assert list_weights(tmp_path / "none") == ()


# --- labels ------------------------------------------------------------------------------


def test_facility_and_own_labels_are_kept() -> None:
    labels = {
        "llmgw.io/site": "ist1",
        "llmgw.io/room": "b2",
        "llmgw.io/row": "12",
        "llmgw.io/rack": "r12-07",
        "llmgw.io/pdu": "r12-07-a",
        "team": "ml",
        "example.com/fabric": "ib-hdr",
    }
    assert check_labels(labels) == labels


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ({"llmgw.io/rak": "r1"}, "llmgw.io/rak is not a label llmgw knows; did you mean llmgw.io/rack?"),
        ({"llmgw.io/gpu": "x"}, "llmgw.io/gpu is not a label llmgw knows"),
        ({"llmgw.io/rack": "r 12"}, "labels: llmgw.io/rack: domain 'rack:r 12'"),
        ({"llmgw.io/pdu": ""}, "labels: llmgw.io/pdu"),
        ({"bad key": "x"}, "'bad key' is not a label key"),
        ({"team": "-ml"}, "a value is up to 63 letters"),
    ],
)
def test_bad_labels_are_named_with_the_fix(labels: dict[str, str], says: str) -> None:
    problems = label_problems(labels)
    assert len(problems) == 1
    assert says in problems[0]
    with pytest.raises(ConfigError):
        check_labels(labels)


# --- all of it ---------------------------------------------------------------------------


def test_discover_an_eight_card_node(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(_MEMINFO)
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "m.gguf").write_bytes(b"w" * 10)
    probes = {"llamacpp": EngineProbe(("llama-server", "--version"), llama_server_version)}
    answers = {
        **_smi("8xh100"),
        ("llama-server", "--version"): CommandResult(0, stderr="version: 10991 (x)\n"),
    }
    inventory = discover(
        weights_dir=str(weights),
        labels={"llmgw.io/rack": "r1"},
        runner=Recorded(answers),
        probes=probes,
        meminfo_path=meminfo,
        cores=lambda: 96,
        hostname="gpu-07",
    )
    assert inventory.hostname == "gpu-07"
    assert inventory.cpu_cores == 96
    assert inventory.memory_total_bytes == 131900000 * 1024
    assert inventory.gpu_classes() == {"h100-80g": 8}
    assert inventory.gpu_error == ""
    assert inventory.engines == {"llamacpp": "b10991", "sim": llmgw.__version__}
    assert [w.name for w in inventory.weights] == ["m.gguf"]
    assert inventory.disk_total_bytes > 0
    assert inventory.labels == {"llmgw.io/rack": "r1"}


def test_discover_a_machine_without_cards(tmp_path: Path) -> None:
    inventory = discover(weights_dir=str(tmp_path), runner=Recorded({}), probes={}, hostname="cpu-01")
    assert inventory.gpus == ()
    assert inventory.devices() == ()
    assert inventory.gpu_error == ""
    assert inventory.cpu_cores >= 1
    assert inventory.memory_total_bytes > 0
    assert inventory.engines == {"sim": llmgw.__version__}


def test_discover_refuses_bad_labels(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"llmgw\.io/rak"):
        discover(weights_dir=str(tmp_path), labels={"llmgw.io/rak": "1"}, runner=Recorded({}), probes={})
