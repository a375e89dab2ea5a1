"""Discovery: what this machine has, read at registration and again on every refresh.

Every outside source is passed in, so the logic runs on recorded outputs in tests: the
commands run through a `Runner` (nvidia-smi, the engines' version probes), /proc/meminfo
is a path, the core count and host name are arguments. The probes block (subprocesses,
a walk of the weights directory); an agent on an event loop runs `discover` in a thread.

A machine without cards is a valid node: no nvidia-smi means no GPUs, and CPU profiles
(llama.cpp with reserved cores) still place on it. A driver that does not answer is
reported (`Inventory.gpu_error`) rather than fatal, for the same reason.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import llmgw
from llmgw.agent.gpu_smi import LIST_ARGV, QUERY_ARGV, gpus_from
from llmgw.errors import ConfigError
from llmgw.hardware.facility import LEVELS, parse_domain
from llmgw.protocol.inventory import GPU, Inventory, WeightsEntry

# --- running commands -----------------------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    """What a probe command did."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    missing: bool = False
    """The program is not installed (not found, or not executable)."""


Runner = Callable[[Sequence[str]], CommandResult]
"""Runs a command to completion; never raises for the command's own failure."""

PROBE_TIMEOUT_S = 20.0
"""How long one probe may take: a cold `vllm --version` imports for seconds."""


def run_command(argv: Sequence[str]) -> CommandResult:
    """Runs `argv` without a shell and collects its output."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return CommandResult(127, missing=True)
    except PermissionError as exc:
        return CommandResult(126, stderr=f"{argv[0]}: {exc.strerror or exc}", missing=True)
    except subprocess.TimeoutExpired:
        return CommandResult(124, stderr=f"{argv[0]} did not answer within {PROBE_TIMEOUT_S:g}s")
    except OSError as exc:
        return CommandResult(126, stderr=f"{argv[0]}: {exc.strerror or exc}")
    return CommandResult(done.returncode, done.stdout, done.stderr)


# --- cards ----------------------------------------------------------------------------

_NO_DEVICES_RC = 6
"""nvidia-smi's exit status for "No devices were found": a driver, and no card."""


def discover_gpus(runner: Runner) -> tuple[tuple[GPU, ...], str]:
    """The node's NVIDIA cards, and why they could not be read ("" when they could, or
    when there is no nvidia-smi and so no card to read)."""
    query = runner(QUERY_ARGV)
    if query.missing:
        return (), ""
    if query.returncode == _NO_DEVICES_RC:
        return (), ""
    if query.returncode != 0:
        return (), f"nvidia-smi failed (exit {query.returncode}): {_first_line(query.stdout, query.stderr)}"
    listing = runner(LIST_ARGV) if "enabled" in query.stdout.lower() else CommandResult(0)
    if listing.returncode != 0 or listing.missing:
        # The cards are known; only their MIG instances are not.
        detail = _first_line(listing.stdout, listing.stderr)
        error = f"nvidia-smi -L failed (exit {listing.returncode}): {detail}"
        return _parsed(query.stdout, ""), error
    try:
        return gpus_from(query.stdout, listing.stdout), ""
    except ValueError as exc:
        return (), str(exc)


def _parsed(query_text: str, list_text: str) -> tuple[GPU, ...]:
    try:
        return gpus_from(query_text, list_text)
    except ValueError:
        return ()


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return "no output"


# --- cores, memory, disk --------------------------------------------------------------


def cpu_cores() -> int:
    """Cores this process may run on: its affinity, which a container or cgroup narrows."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parse_meminfo(text: str) -> tuple[int, int]:
    """Total and available memory in bytes from /proc/meminfo's text."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    total = values.get("MemTotal", 0)
    # MemAvailable appeared in Linux 3.14; before it, free is the nearest figure.
    available = values.get("MemAvailable", values.get("MemFree", 0))
    return total, available


def read_meminfo(path: str | Path = "/proc/meminfo") -> tuple[int, int]:
    """Total and available memory in bytes; (0, 0) where the file cannot be read."""
    try:
        return parse_meminfo(Path(path).read_text())
    except OSError:
        return 0, 0


def disk_space(path: str | Path) -> tuple[int, int]:
    """Free and total bytes of the file system `path` is on, or would be on once made."""
    here = Path(path).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        usage = shutil.disk_usage(here)
    except OSError:
        return 0, 0
    return usage.free, usage.total


def _tree_size(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes under `path`, counting a file reached by several links once (a Hugging Face
    snapshot links into its blobs)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                stat = (Path(root) / name).stat()
            except OSError:
                continue
            key = (stat.st_dev, stat.st_ino)
            if key not in seen:
                seen.add(key)
                total += stat.st_size
    return total


def list_weights(weights_dir: str | Path) -> tuple[WeightsEntry, ...]:
    """What lies directly under the weights directory, with sizes. Hidden entries (a
    download in progress, a lock) are left out; a missing directory holds nothing."""
    root = Path(weights_dir)
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return ()
    out: list[WeightsEntry] = []
    seen: set[tuple[int, int]] = set()
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_dir():
                out.append(WeightsEntry(name=entry.name, size_bytes=_tree_size(entry, seen), kind="dir"))
            elif entry.is_file():
                out.append(WeightsEntry(name=entry.name, size_bytes=entry.stat().st_size, kind="file"))
        except OSError:
            continue
    return tuple(out)


# --- labels ---------------------------------------------------------------------------

FACILITY_LABELS: tuple[str, ...] = tuple(level.label for level in LEVELS)
"""`llmgw.io/site`, `room`, `row`, `rack` and `pdu`: where the node is in the building."""
RESERVED_PREFIX = "llmgw.io/"

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")


def label_problems(labels: Mapping[str, str]) -> list[str]:
    """Every problem with a node's labels, one sentence each naming the label and the fix.

    Keys are written as Kubernetes writes them (an optional DNS prefix and '/', then a
    name of letters, digits, '-', '_' and '.'), so labels copied from a cluster carry
    over. The `llmgw.io/` prefix is llmgw's: only the facility labels live there, and
    their values name a place as a facility domain does."""
    out: list[str] = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not _LABEL_PREFIX.match(prefix)) or not _LABEL_NAME.match(name):
            out.append(
                f"labels: {key!r} is not a label key; write name or prefix/name, the name up to 63"
                " letters, digits, '-', '_' or '.'"
            )
            continue
        if key.startswith(RESERVED_PREFIX):
            if key not in FACILITY_LABELS:
                guess = difflib.get_close_matches(key, FACILITY_LABELS, n=1)
                hint = f"did you mean {guess[0]}?" if guess else f"use one of {', '.join(FACILITY_LABELS)}"
                out.append(f"labels: {key} is not a label llmgw knows; {hint}")
                continue
            try:
                parse_domain(f"{name}:{value}")
            except ValueError as exc:
                out.append(f"labels: {key}: {exc}")
            continue
        if not _LABEL_VALUE.match(value):
            out.append(
                f"labels: {key}={value!r}: a value is up to 63 letters, digits, '-', '_' or '.',"
                " starting and ending with a letter or digit"
            )
    return out


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels, once every one is valid; raises ConfigError listing each problem."""
    problems = label_problems(labels)
    if problems:
        raise ConfigError(problems)
    return dict(labels)


# --- engines --------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineProbe:
    """How to ask an installed engine its version."""

    argv: tuple[str, ...]
    parse: Callable[[CommandResult], str]
    """The version in the command's output, or "" when it names none."""


_VERSION = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?\S*)$")


def version_line(result: CommandResult) -> str:
    """The last line of stdout that is only a version: `vllm --version` may log before it."""
    for line in reversed(result.stdout.splitlines()):
        match = _VERSION.match(line.strip())
        if match:
            return match.group(1)
    return ""


def llama_server_version(result: CommandResult) -> str:
    """`llama-server --version` prints `version: 10991 (1a2b3c4)` (to stderr): the build
    number, written as its release tag, b10991. A build made outside llama.cpp's tree
    prints something else, which is kept as it is."""
    match = re.search(r"version:\s*(\S+)", result.stderr + "\n" + result.stdout)
    if not match:
        return ""
    build = match.group(1)
    return f"b{build}" if build.isdigit() else build


def _python_package(python: str, distribution: str) -> tuple[str, ...]:
    # The package's metadata, not an import: importing vLLM or TensorRT-LLM loads torch
    # and CUDA for tens of seconds.
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    return (python, "-c", code)


def default_probes(
    python: str = sys.executable, vllm: str = "vllm", llama_server: str = "llama-server"
) -> dict[str, EngineProbe]:
    """The probes for every engine the agent can start: the Python engines through the
    interpreter they are installed for, the others by their programs."""
    return {
        "vllm": EngineProbe((vllm, "--version"), version_line),
        "llamacpp": EngineProbe((llama_server, "--version"), llama_server_version),
        "sglang": EngineProbe(_python_package(python, "sglang"), version_line),
        "trtllm": EngineProbe(_python_package(python, "tensorrt_llm"), version_line),
    }


def probe_engines(runner: Runner, probes: Mapping[str, EngineProbe]) -> dict[str, str]:
    """Each installed engine's version. The simulated engine is part of llmgw and always
    there, at llmgw's version."""
    found: dict[str, str] = {}
    for engine, probe in probes.items():
        result = runner(probe.argv)
        if result.missing or result.returncode != 0:
            continue
        version = probe.parse(result)
        if version:
            found[engine] = version
    found["sim"] = llmgw.__version__
    return found


# --- all of it --------------------------------------------------------------------------


def discover(
    *,
    weights_dir: str,
    labels: Mapping[str, str] | None = None,
    runner: Runner = run_command,
    probes: Mapping[str, EngineProbe] | None = None,
    meminfo_path: str | Path = "/proc/meminfo",
    cores: Callable[[], int] = cpu_cores,
    hostname: str | None = None,
) -> Inventory:
    """This node's inventory. Raises ConfigError for labels that are not valid, the one
    thing here an operator wrote; every other source that fails is reported as empty."""
    checked = check_labels(labels or {})
    gpus, gpu_error = discover_gpus(runner)
    total, available = read_meminfo(meminfo_path)
    free, disk_total = disk_space(weights_dir)
    return Inventory(
        hostname=hostname if hostname is not None else socket.gethostname(),
        llmgw_version=llmgw.__version__,
        cpu_cores=cores(),
        memory_total_bytes=total,
        memory_available_bytes=available,
        weights_dir=str(weights_dir),
        disk_free_bytes=free,
        disk_total_bytes=disk_total,
        gpus=gpus,
        gpu_error=gpu_error,
        labels=checked,
        engines=probe_engines(runner, default_probes() if probes is None else probes),
        weights=list_weights(weights_dir),
    )
