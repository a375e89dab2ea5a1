"""A network namespace of its own for a test, with the real `nft` run inside it, so
llmgw's firewall is applied for real and the host's rules are never touched.

The namespace is held by a `sleep` started under `unshare -n`; nft runs in it through
`nsenter --net=/proc/PID/ns/net`, directly (`Namespace.nft`) or through a small script
(`Namespace.nft_program`) that a command taking `--nft PROGRAM` is given. Where nft,
unshare or nsenter is missing, the test does not run as root, or namespaces are
refused, the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HOLD_S = 900
"""How long the holder sleeps at most: a test killed before its clean-up leaves no
namespace behind for longer."""


@dataclass(frozen=True)
class Namespace:
    pid: int
    """The holder's PID: its network namespace is the test's."""
    nft_program: Path
    """A script that runs nft inside the namespace, for `--nft`."""

    @property
    def enter(self) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net"]

    def nft(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """nft inside the namespace (the exit status is the caller's to check)."""
        return subprocess.run(
            [*self.enter, _nft(), *args], input=stdin, capture_output=True, text=True, timeout=30, check=False
        )

    def tables(self) -> list[str]:
        """Every table in the namespace, as `family name`."""
        done = self.nft("-j", "list", "tables")
        assert done.returncode == 0, done.stderr
        items: list[dict[str, Any]] = json.loads(done.stdout)["nftables"]
        return [f"{t['table']['family']} {t['table']['name']}" for t in items if "table" in t]

    def ruleset(self) -> str:
        done = self.nft("list", "ruleset")
        assert done.returncode == 0, done.stderr
        return done.stdout


def _nft() -> str:
    return shutil.which("nft") or "/usr/sbin/nft"


def _why_not() -> str:
    if not Path(_nft()).exists():
        return "nft is not installed (Debian's nftables package)"
    if os.geteuid() != 0:
        return "nft needs root, and the tests do not run as root"
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux)"
    probe = subprocess.run(
        ["unshare", "-n", _nft(), "list", "ruleset"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        return f"a network namespace with nft is refused here: {probe.stderr.strip()}"
    return ""


@contextlib.contextmanager
def network_namespace(tmp: Path) -> Iterator[Namespace]:
    """A fresh network namespace for the block; skips the test where there can be none."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    holder = subprocess.Popen(["unshare", "-n", "sleep", str(HOLD_S)], stdin=subprocess.DEVNULL)
    try:
        script = tmp / "nft-in-namespace"
        script.write_text(f'#!/bin/sh\nexec nsenter --net=/proc/{holder.pid}/ns/net {_nft()} "$@"\n')
        script.chmod(0o755)
        namespace = Namespace(holder.pid, script)
        # unshare has made the namespace once the holder's differs from ours.
        for _ in range(200):
            if holder.poll() is not None or _netns(holder.pid) != _netns(os.getpid()):
                break
            time.sleep(0.05)
        assert holder.poll() is None, "unshare -n sleep ended at once"
        assert _netns(holder.pid) != _netns(os.getpid()), "unshare -n made no namespace in 10 s"
        yield namespace
    finally:
        holder.kill()
        holder.wait(10)


def _netns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""
