"""The control plane's own settings: its reconcile loop, node expiry, the leader lease,
the power caps it places under, and its side of federation with other clusters."""

from __future__ import annotations

import socket
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from pydantic import field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import NonNegativeDuration, NonNegativeFloat, PositiveDuration
from llmgw.core.strict import Strict
from llmgw.hardware.facility import Domain, parse_domain

DEFAULT_LEASE_TTL = timedelta(seconds=15)
DEFAULT_MEASURED_FRESH = timedelta(minutes=2)
DEFAULT_FEDERATION_INTERVAL = timedelta(seconds=10)


class Control(Strict):
    """Timing of the reconcile loop (catalog, scaling and demand compared with the
    agents' reports), of retries for models that fail, and of node expiry."""

    interval: PositiveDuration = timedelta(seconds=5)
    """Period of one reconcile pass."""
    base_backoff: PositiveDuration = timedelta(seconds=10)
    """First wait before retrying a failing model."""
    max_backoff: PositiveDuration = timedelta(minutes=10)
    """Longest wait between retries of a model that keeps failing; the wait doubles
    from base_backoff up to this."""
    unreachable_after: PositiveDuration = timedelta(seconds=15)
    """Heartbeat silence after which a node counts as unreachable: no new traffic, but
    its replicas stay where they are."""
    lost_after: PositiveDuration = timedelta(seconds=60)
    """Heartbeat silence after which a node is written off and its replicas are
    rescheduled. Keep it well above unreachable_after: a brief outage should not
    destroy working replicas, and reloading a large multi-node model is slow."""
    port_range: tuple[int, int] = (20000, 20999)
    """Inclusive [first, last] port range per node, handed out to engine HTTP servers
    and their distributed-init sockets."""
    mgmt_interface: str = "eth0"
    """Network interface NCCL uses to set up multi-node replicas."""
    timezone: str = ""
    """IANA time zone for interpreting scaling schedules (e.g. Europe/Istanbul). Empty
    uses the host's local zone."""
    eval_dir: str = "/etc/llmgw/eval"
    """Directory of named evaluation suites (`NAME.jsonl`, llmgw.evals.suite) for
    `llmgw ctl eval` and model eval gates; one here replaces a built-in suite of its name."""
    enabled: bool = False
    """Forces the control plane on, for deployments whose whole catalog lives in the
    store and whose file therefore lists static endpoints but no placeable model."""
    scale_up_at: NonNegativeFloat = 1.0
    """Load scaling: the saturation level (1.0 = at router.scoring's targets) at or above
    which a model is saturated and, after scale_up_after, gets one more replica (up to
    its max). 0 turns scaling on load off."""
    scale_up_after: PositiveDuration = timedelta(seconds=30)
    """Load scaling: how long a model must stay saturated, with every replica serving,
    before one more replica is started."""
    scale_down_at: NonNegativeFloat = 0.6
    """Load scaling: a replica is stopped (down to min) once the load would be at or below
    this level on one replica fewer for scale_down_after. Keep it well below scale_up_at:
    the gap is what stops flapping."""
    scale_down_after: PositiveDuration = timedelta(minutes=5)
    """Load scaling: how long the load must fit in one replica fewer before one is
    drained and stopped. Longer than scale_up_after, as a stopped replica costs a
    startup to get back."""
    lease_ttl: NonNegativeDuration = timedelta(0)
    """Validity of the leadership lease when several control planes share a store. It
    should survive a sluggish query yet expire quickly enough for a standby to step in
    within seconds. 0 is 15s."""

    @property
    def effective_lease_ttl(self) -> timedelta:
        return self.lease_ttl or DEFAULT_LEASE_TTL

    @field_validator("port_range")
    @classmethod
    def _ports(cls, value: tuple[int, int]) -> tuple[int, int]:
        low, high = value
        if not (1 <= low <= high <= 65535):
            raise ValueError(
                f"[{low}, {high}] is not a port range: give [first, last] within 1-65535, first <= last"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        if value:
            try:
                zoneinfo.ZoneInfo(value)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"{value!r} is not a known time zone: give an IANA name like Europe/Istanbul"
                ) from None
        return value

    @model_validator(mode="after")
    def _stages(self) -> Control:
        if self.scale_up_at > 0 and self.scale_down_at >= self.scale_up_at:
            refuse(
                "Control",
                [
                    Problem(
                        ("scale_down_at",),
                        "is not below scale_up_at: lower it (e.g. 0.6 for scale_up_at 1.0)"
                        " so a model scaled down is not saturated at once",
                    )
                ],
            )
        if self.lost_after < self.unreachable_after:
            refuse(
                "Control",
                [
                    Problem(
                        ("lost_after",),
                        "is shorter than unreachable_after: a node is lost only after it is unreachable",
                    )
                ],
            )
        return self


class FacilityBudget(Strict):
    """One domain's power cap."""

    domain: str
    """The capped place, written level:name to match node labels, e.g. rack:r12-07."""
    cap_watts: float
    """Power limit in watts. With redundant feeds, give the capacity of a single feed
    after the site's derating (often 80%), since one feed must carry the load alone."""
    other_watts: NonNegativeFloat = 0
    """Load in the domain that llmgw does not manage (network gear, storage, foreign
    servers), subtracted from the cap up front."""

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        parse_domain(value)
        return value

    @field_validator("cap_watts")
    @classmethod
    def _cap(cls, value: float) -> float:
        if value <= 0:
            raise ValueError(f"{value} W is not a usable cap: give the domain's limit in watts, above 0")
        return value


@dataclass(frozen=True)
class PowerBudget:
    cap_watts: float
    other_watts: float


@dataclass(frozen=True)
class FacilityPolicy:
    """The facility settings as placement reads them, defaults applied."""

    margin: float
    gpu_watts: float
    cpu_core_watts: float
    node_watts: float
    measured_fresh: timedelta
    budgets: Mapping[Domain, PowerBudget] = field(default_factory=lambda: MappingProxyType({}))


class Facility(Strict):
    """Power limits per rack, PDU or other domain, plus the per-device figures used to
    estimate a replica's consumption when its profile gives no `power_watts`. Node
    locations come from node labels; domains without a budget are unlimited."""

    budgets: tuple[FacilityBudget, ...] = ()
    """Capped domains, one entry per domain."""
    margin: float = 0
    """Headroom left under every cap, as a fraction (0.1 = 10%). Use 0 if the caps are
    already derated."""
    gpu_watts: NonNegativeFloat = 0
    """Watts assumed per GPU whose power limit is unknown (0 ignores such GPUs)."""
    cpu_core_watts: NonNegativeFloat = 0
    """Watts assumed per CPU core reserved by a CPU-only replica (0 ignores them)."""
    node_watts: NonNegativeFloat = 0
    """Base load of a node apart from GPUs and reserved cores; charged for each node
    inside a capped domain whether or not it runs anything."""
    measured_fresh: NonNegativeDuration = timedelta(0)
    """Maximum age of a node's measured power before estimates replace it. 0 is 2m."""

    @property
    def effective_measured_fresh(self) -> timedelta:
        return self.measured_fresh or DEFAULT_MEASURED_FRESH

    @field_validator("margin")
    @classmethod
    def _margin(cls, value: float) -> float:
        if not 0 <= value < 1:
            raise ValueError(f"{value} is outside [0, 1): write the headroom as a fraction, 0.1 for 10%")
        return value

    @model_validator(mode="after")
    def _once_each(self) -> Facility:
        seen: dict[Domain, int] = {}
        problems: list[Problem] = []
        for i, budget in enumerate(self.budgets):
            domain = parse_domain(budget.domain)
            if domain in seen:
                problems.append(
                    Problem(
                        ("budgets", i, "domain"),
                        f"{domain} already has a cap at budgets[{seen[domain]}]: give each domain once",
                    )
                )
            seen.setdefault(domain, i)
        refuse("Facility", problems)
        return self

    def policy(self) -> FacilityPolicy:
        """The caps keyed by domain, with the defaults in force filled in."""
        budgets = {
            parse_domain(b.domain): PowerBudget(cap_watts=b.cap_watts, other_watts=b.other_watts)
            for b in self.budgets
        }
        return FacilityPolicy(
            margin=self.margin,
            gpu_watts=self.gpu_watts,
            cpu_core_watts=self.cpu_core_watts,
            node_watts=self.node_watts,
            measured_fresh=self.effective_measured_fresh,
            budgets=MappingProxyType(budgets),
        )


class Federation(Strict):
    """How this cluster would present itself to federated peers. This version has no
    federation (`llmgw.config.inert`): the settings are only checked."""

    name: str = ""
    """Name reported to peers in the federated_from tag; empty uses the host name."""
    interval: NonNegativeDuration = timedelta(0)
    """Polling period for each peer's health and offered models; an unresponsive peer
    is skipped by routing until it answers again. 0 is 10s."""

    @property
    def effective_interval(self) -> timedelta:
        return self.interval or DEFAULT_FEDERATION_INTERVAL

    def effective_name(self, hostname: Callable[[], str] = socket.gethostname) -> str:
        return self.name or hostname()
