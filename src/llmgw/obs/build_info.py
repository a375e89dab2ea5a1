"""What build of llmgw a process runs, for `llmgw_build_info`: its version, the Python
it runs on, and the commit it was built from when that is known.

The commit comes from the installation's own record (PEP 610's `direct_url.json`, which
pip writes for an install from a git URL), else, for an editable install, from
`git rev-parse` where the imported package's files are (the checkout actually run,
which for a virtual environment shared by several work trees is not always the one the
record names), asked once at start with a short timeout. Anything else (a wheel from
an index, no git on the machine) leaves it empty: an unknown commit is no reason to fail.
"""

from __future__ import annotations

import contextlib
import json
import platform
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import llmgw

_GIT_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class BuildInfo:
    version: str
    python: str
    commit: str


def commit_of(direct_url: str | None, source: Path) -> str:
    """The commit named by an installation's `direct_url.json` text, asking git in
    `source` (the package's directory) for an editable install; "" when neither says."""
    if not direct_url:
        return ""
    try:
        record = json.loads(direct_url)
    except ValueError:
        return ""
    if not isinstance(record, dict):
        return ""
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return str(vcs["commit_id"])
    directory = record.get("dir_info")
    if isinstance(directory, dict) and directory.get("editable"):
        return _git_head(source)
    return ""


def _git_head(directory: Path) -> str:
    if not directory.is_dir():
        return ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0:
            return done.stdout.strip()
    return ""


def build_info() -> BuildInfo:
    """This process's build."""
    direct_url = None
    with contextlib.suppress(metadata.PackageNotFoundError):
        direct_url = metadata.distribution("llmgw").read_text("direct_url.json")
    source = Path(llmgw.__file__).parent
    return BuildInfo(llmgw.__version__, platform.python_version(), commit_of(direct_url, source))


class BuildInfoCollector(Collector):
    """`llmgw_build_info`: always 1, the build in its labels."""

    def __init__(self, info: BuildInfo) -> None:
        self._info = info

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "llmgw_build_info",
            "Always 1: the llmgw version, the Python version and the commit (empty when unknown).",
            labels=["version", "python", "commit"],
        )
        family.add_metric([self._info.version, self._info.python, self._info.commit], 1)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())
