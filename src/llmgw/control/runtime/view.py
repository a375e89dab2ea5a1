"""What the admin routes need from the running control plane, as a Protocol.

The control plane (`llmgw.control.runtime.plane.ControlPlane`) satisfies it structurally; so
does a small fake in tests, which is how the routes and `llmgw ctl` are tested without
agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from llmgw.catalog import Catalog
from llmgw.control.decisions.cluster import NodeView, ReplicaView


class ControlView(Protocol):
    """The running control plane, as the admin routes use it."""

    @property
    def catalog(self) -> Catalog:
        """The catalog the control plane places now."""
        ...

    def nodes(self) -> Sequence[NodeView]: ...

    def replicas(self) -> Sequence[ReplicaView]: ...

    def explain(self, model: str) -> list[str]:
        """Why `model` runs where it does, or does not run, one sentence a line."""
        ...

    def replace_catalog(self, catalog: Catalog) -> None:
        """Places against `catalog` from the next pass on."""
        ...
