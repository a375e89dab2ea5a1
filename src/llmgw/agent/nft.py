"""Applying llmgw's nftables table with the real `nft` program.

Every change is one `nft -f -` transaction of `firewall.ruleset` text, which deletes and
recreates llmgw's table and nothing else. `command` is the program and any words before
it (`("nft",)`; tests give `("nsenter", "--net=/proc/PID/ns/net", "nft")` to work inside
a network namespace, or a script that does).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from llmgw.agent.firewall import FAMILY, TABLE, FirewallPlan, ruleset
from llmgw.errors import FirewallError

NFT_TIMEOUT_S = 30.0
"""How long one nft call may take; it normally takes milliseconds."""


class Nft:
    """llmgw's table through one `nft` command."""

    def __init__(self, command: Sequence[str] = ("nft",)) -> None:
        self.command = tuple(command)

    def apply(self, firewall: FirewallPlan) -> None:
        """Makes llmgw's table what `firewall` says, in one transaction."""
        self._run(["-f", "-"], ruleset(firewall))

    def remove(self) -> None:
        """Deletes llmgw's table; nothing when there is none."""
        self._run(["-f", "-"], f"table {FAMILY} {TABLE}\ndelete table {FAMILY} {TABLE}\n")

    def table(self) -> list[dict[str, Any]] | None:
        """llmgw's table as `nft -j` lists it (its objects: table, sets, chain, rules), or
        None where there is none."""
        try:
            out = self._run(["-j", "list", "table", FAMILY, TABLE], "")
        except FirewallError as exc:
            if "No such file or directory" in str(exc):
                return None
            raise
        items: list[dict[str, Any]] = json.loads(out)["nftables"]
        return [item for item in items if "metainfo" not in item]

    def _run(self, args: list[str], stdin: str) -> str:
        argv = [*self.command, *args]
        try:
            done = subprocess.run(
                argv, input=stdin, capture_output=True, text=True, timeout=NFT_TIMEOUT_S, check=False
            )
        except FileNotFoundError:
            raise FirewallError(
                f"{self.command[0]} is not installed: install nftables (Debian's nftables package),"
                " or set firewall.enabled: false"
            ) from None
        except subprocess.TimeoutExpired:
            raise FirewallError(f"{' '.join(argv)} did not answer within {NFT_TIMEOUT_S:.0f}s") from None
        if done.returncode != 0:
            said = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
            raise FirewallError(f"nft refused llmgw's table: {said}")
        return done.stdout
