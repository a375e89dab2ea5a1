"""Named small worlds for the control plane's pure decisions: node inventories as
agents report them, catalogs from YAML-shaped dicts, replicas where a test puts them,
and a fixed clock. Each test builds the few pieces it needs from these and changes one
thing, so a failure points at the rule that broke."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from llmgw.catalog import Catalog, Model
from llmgw.control.decisions.cluster import (
    Assignment,
    ModelDemand,
    NodeStatus,
    NodeView,
    ReplicaPhase,
    ReplicaView,
)
from llmgw.control.decisions.plan import Plan, plan
from llmgw.protocol.inventory import GPU, Inventory, MigDevice, WeightsEntry

GB = 1 << 30
UTC_ZONE = ZoneInfo("UTC")
NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC).timestamp()  # a Monday, noon UTC
"""Every test's present moment."""

ENGINES = {"vllm": "0.11.1", "llamacpp": "b6000", "sim": "0.1.0"}


def cards(gpu_class: str, count: int, *, watts: float | None = 700.0) -> list[GPU]:
    return [
        GPU(
            index=i,
            uuid=f"GPU-{gpu_class}-{i}",
            name=gpu_class,
            gpu_class=gpu_class,
            memory_mib=80 * 1024,
            power_limit_watts=watts,
        )
        for i in range(count)
    ]


def mig_card(parent: str, index: int, profiles: Sequence[str]) -> GPU:
    """A card in MIG mode, cut into instances of these NVIDIA profiles (`3g.40gb`)."""
    return GPU(
        index=index,
        uuid=f"GPU-{parent}-{index}",
        name=parent,
        gpu_class=parent,
        memory_mib=80 * 1024,
        power_limit_watts=700.0,
        mig_enabled=True,
        mig_devices=tuple(
            MigDevice(
                uuid=f"MIG-{index}-{n}",
                profile=p,
                gpu_class=f"{parent}-mig-{p}",
                memory_gb=int(p.split(".")[1].removesuffix("gb").split("+")[0]),
                device=n,
            )
            for n, p in enumerate(profiles)
        ),
    )


def inventory(
    gpus: Sequence[GPU] = (),
    *,
    cores: int = 64,
    memory_gb: int = 512,
    disk_gb: int = 2000,
    labels: Mapping[str, str] | None = None,
    engines: Mapping[str, str] | None = None,
    weights: Sequence[str] = (),
) -> Inventory:
    return Inventory(
        hostname="node",
        llmgw_version="0.1.0",
        cpu_cores=cores,
        memory_total_bytes=memory_gb * GB,
        memory_available_bytes=memory_gb * GB,
        weights_dir="/var/lib/llmgw/weights",
        disk_free_bytes=disk_gb * GB,
        disk_total_bytes=4 * disk_gb * GB,
        gpus=tuple(gpus),
        labels=dict(labels or {}),
        engines=dict(ENGINES if engines is None else engines),
        weights=tuple(WeightsEntry(name=w, size_bytes=GB, kind="dir") for w in weights),
    )


def h100x8(**kw: Any) -> Inventory:
    """A DGX-like node: eight H100 80 GB."""
    return inventory(cards("h100-80g", 8), **kw)


def a100x4(**kw: Any) -> Inventory:
    return inventory(cards("a100-80g", 4), **kw)


def a100_mig(**kw: Any) -> Inventory:
    """Two A100 80 GB, the first cut into a 3g.40gb and two 1g.10gb instances."""
    return inventory(
        [mig_card("a100-80g", 0, ["3g.40gb", "1g.10gb", "1g.10gb"]), cards("a100-80g", 2)[1]], **kw
    )


def cpu_box(**kw: Any) -> Inventory:
    """No cards, 16 cores."""
    kw.setdefault("cores", 16)
    kw.setdefault("memory_gb", 64)
    return inventory((), **kw)


def node(node_id: str, inv: Inventory, status: NodeStatus = "ready") -> NodeView:
    return NodeView(id=node_id, inventory=inv, status=status)


def model(name: str, *profiles: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """A model definition as YAML gives it; `min` and `max` go into scaling."""
    scaling = dict(fields.pop("scaling", {}))
    for key in ("min", "max"):
        if key in fields:
            scaling[key] = fields.pop(key)
    return {
        "name": name,
        "source": fields.pop("source", f"org/{name}"),
        "profiles": list(profiles),
        "scaling": scaling,
        **fields,
    }


def gpu_profile(name: str = "h100", gpu_class: str = "h100-80g", tp: int = 1, **kw: Any) -> dict[str, Any]:
    return {"name": name, "engine": "vllm", "gpu_class": gpu_class, "tp": tp, **kw}


def cpu_profile(name: str = "cpu", cores: int = 4, **kw: Any) -> dict[str, Any]:
    return {"name": name, "engine": "llamacpp", "cpu_cores": cores, **kw}


def catalog(*definitions: Mapping[str, Any]) -> Catalog:
    return Catalog.build([Model.model_validate(d) for d in definitions])


def replica(
    replica_id: str,
    model_name: str,
    profile: str,
    *parts: tuple[str, Sequence[str]] | tuple[str, Sequence[str], Sequence[int]],
    phase: ReplicaPhase = "ready",
    since: float = NOW - 3600,
) -> ReplicaView:
    """A replica with one part per (node, devices[, cores]) given."""
    return ReplicaView(
        id=replica_id,
        model=model_name,
        profile=profile,
        assignments=tuple(
            Assignment(node_id=p[0], devices=tuple(p[1]), cpu_cores=tuple(p[2]) if len(p) > 2 else ())
            for p in parts
        ),
        phase=phase,
        since=since,
    )


def counter() -> Callable[[str], str]:
    """New replica ids: `<model>-1`, `<model>-2`, … in the order asked."""
    numbers = itertools.count(1)
    return lambda name: f"{name}-{next(numbers)}"


def decide(
    cat: Catalog,
    nodes: Sequence[NodeView],
    replicas: Sequence[ReplicaView] = (),
    demand: Mapping[str, ModelDemand] | None = None,
    now: float = NOW,
    tz: ZoneInfo = UTC_ZONE,
    **kw: Any,
) -> Plan:
    return plan(cat, nodes, replicas, demand or {}, now, tz=tz, new_id=counter(), **kw)


def placed(p: Plan) -> dict[str, list[str]]:
    """Each started model's nodes, in start order (a multi-node replica's joined by +)."""
    out: dict[str, list[str]] = {}
    for s in p.starts:
        out.setdefault(s.model, []).append("+".join(a.node_id for a in s.assignments))
    return out
