"""How the gateway picks a replica for each request, and how long it waits on one.

Scoring thresholds here are starting points: measure what a deployment's replicas
sustain, and replace these with those figures.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from llmgw.config.admission import Admission
from llmgw.config.checks import Problem, refuse
from llmgw.config.limits import MIB, Batch, Cache
from llmgw.config.values import (
    HeaderName,
    NetworkText,
    NonNegativeDuration,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveDuration,
    PositiveFloat,
    PositiveInt,
    Share,
)
from llmgw.core.strict import Strict

TENANT_LABELS: tuple[str, ...] = ("none", "org", "team", "project")
DEFAULT_ACTIVATION_WAIT = timedelta(minutes=2)
DEFAULT_TOKENIZE_TIMEOUT = timedelta(milliseconds=250)
DEFAULT_KV_MIN_BLOCKS = 4
DEFAULT_KV_MAX_BLOCKS = 4096
# Prefix-tree amounts the reference left to its router package; these follow the
# cache-aware policies of SGLang's router (half the prompt matching, an absolute gap of
# 32 in-flight requests), with a tree size and entry lifetime sized for one gateway.
DEFAULT_PREFIX_MAX_NODES = 100_000
DEFAULT_PREFIX_MIN_MATCH = 64
DEFAULT_PREFIX_TTL = timedelta(minutes=5)
DEFAULT_PREFIX_MATCH_RATIO = 0.5
DEFAULT_PREFIX_BALANCE_ABS = 32.0
DEFAULT_PREFIX_BALANCE_REL = 1.5


class Prefix(Strict):
    """The approximate prefix tree: send a prompt where a similar one went, so the
    replica's KV cache already holds its start. Off, session affinity alone decides,
    which is most of the gain for multi-turn traffic already. Each 0 below means the
    built-in amount, read through the `effective_…` properties."""

    enabled: bool = False
    """Turns the prefix tree on."""
    max_nodes: NonNegativeInt = 0
    """Size bound of the tree, in nodes; 0 is 100 000."""
    min_match: NonNegativeInt = 0
    """Shortest match, in characters of prompt text, worth acting on; 0 is 64."""
    ttl: NonNegativeDuration = timedelta(0)
    """Lifetime of an entry. Engines drop cached blocks whenever they need room, so an
    old entry is likely to be wrong. 0 is 5m."""
    match_ratio: Share = 0
    """Minimum fraction of the prompt that has to match before the tree steers it; 0 is
    0.5."""
    balance_abs: NonNegativeFloat = 0
    """Load gap (requests in flight) between the busiest and the idlest replica that
    counts as imbalance; 0 is 32."""
    balance_rel: NonNegativeFloat = 0
    """Ratio of busiest to idlest load that counts as imbalance; 0 is 1.5. Affinity is
    abandoned only when both this and balance_abs trip."""

    @property
    def effective_max_nodes(self) -> int:
        return self.max_nodes or DEFAULT_PREFIX_MAX_NODES

    @property
    def effective_min_match(self) -> int:
        return self.min_match or DEFAULT_PREFIX_MIN_MATCH

    @property
    def effective_ttl(self) -> timedelta:
        return self.ttl or DEFAULT_PREFIX_TTL

    @property
    def effective_match_ratio(self) -> float:
        return self.match_ratio or DEFAULT_PREFIX_MATCH_RATIO

    @property
    def effective_balance_abs(self) -> float:
        return self.balance_abs or DEFAULT_PREFIX_BALANCE_ABS

    @property
    def effective_balance_rel(self) -> float:
        return self.balance_rel or DEFAULT_PREFIX_BALANCE_REL


class KVIndex(Strict):
    """Tuning of exact KV-cache routing, fed by block events vLLM replicas publish.
    Which replicas take part is decided by where events come from (a static endpoint's
    `kv_events`); these knobs only shape the lookup (llmgw.router.kv_routing).
    """

    tokenize_timeout: NonNegativeDuration = timedelta(0)
    """Time allowed for the pre-routing tokenize call to a replica of the model; when it
    runs out, the request falls back to approximate routing. 0 is 250ms."""
    min_blocks: NonNegativeInt = 0
    """Matching leading blocks needed before a replica gets preference; shorter matches
    are usually just the shared chat template. 0 is 4 (64 tokens with 16-token blocks)."""
    max_blocks: NonNegativeInt = 0
    """Cap on how many of a prompt's blocks get hashed for the lookup; matches longer
    than that no longer change the choice. 0 is 4096."""

    @property
    def effective_tokenize_timeout(self) -> timedelta:
        return self.tokenize_timeout or DEFAULT_TOKENIZE_TIMEOUT

    @property
    def effective_min_blocks(self) -> int:
        return self.min_blocks or DEFAULT_KV_MIN_BLOCKS

    @property
    def effective_max_blocks(self) -> int:
        return self.max_blocks or DEFAULT_KV_MAX_BLOCKS

    @model_validator(mode="after")
    def _range(self) -> KVIndex:
        if self.effective_min_blocks > self.effective_max_blocks:
            refuse(
                "KVIndex",
                [
                    Problem(
                        ("min_blocks",),
                        f"{self.effective_min_blocks} is above max_blocks {self.effective_max_blocks}: "
                        "lower min_blocks or raise max_blocks",
                    )
                ],
            )
        return self


class Timeouts(Strict):
    """Bounds on each phase of one upstream request. 0 leaves a phase bounded only by
    `total` (and `total: 0s` by nothing). `body` and `body_min_rate` bound the client
    instead, while it sends its request body."""

    dial: NonNegativeDuration = timedelta(seconds=5)
    """Connecting to the replica."""
    response_header: NonNegativeDuration = timedelta(seconds=60)
    """Deadline for response headers of streamed requests. Engines send them before
    generating, so this only detects a dead replica. With generation 0 it is also how
    often a non-streamed answer's replica is checked for life (see generation)."""
    generation: NonNegativeDuration = timedelta(0)
    """Deadline for a non-streamed answer, which arrives (headers included) only when
    finished. Separate from response_header so that a short liveness deadline cannot
    truncate long answers from slow models. 0: only `total` applies, while the replica
    lives: every response_header without an answer, a replica whose metrics were not read
    within stale_after fails the try with the response_header timeout, and the request
    is retried on another replica."""
    first_token: NonNegativeDuration = timedelta(seconds=120)
    """From sending the request to the first streamed token."""
    idle: NonNegativeDuration = timedelta(seconds=60)
    """Longest silence between two chunks of a stream."""
    total: NonNegativeDuration = timedelta(minutes=30)
    """The whole request, start to last byte."""
    body: NonNegativeDuration = timedelta(seconds=30)
    """Time a client has to send its request body, from the end of its headers; a late
    body is answered 408 and its connection closed. 0: no bound."""
    body_min_rate: NonNegativeInt = 16 * 1024
    """Bytes a second of request body that each extend `body` by one second, so a client
    sending at least this fast is never cut off and a large body gets longer. 0: the
    whole body within `body`."""


class Scoring(Strict):
    """What the scorers normalise against."""

    target_waiting: PositiveFloat = 4
    """Queued requests at which a replica scores as fully busy."""
    target_inflight: PositiveFloat = 8
    """Running requests at which a replica scores as fully busy."""
    kv_ceiling: Share = 0.9
    """KV cache use past which a replica is scored as full."""
    session_load_factor: PositiveFloat = 1.25
    """How much busier than the least busy replica a session's replica may be before the
    session moves."""


_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")


def _origin(text: str) -> str:
    if text != "*" and not _ORIGIN.match(text):
        raise ValueError(
            f"{text!r} is not an origin: write scheme://host[:port] with no path, like "
            "https://chat.example.com, or * for any"
        )
    return text.lower()


Origin = Annotated[str, AfterValidator(_origin)]


class Cors(Strict):
    """Cross-origin requests from browsers (a chat UI on another origin calling the API
    with fetch). Off while `origins` is empty: a browser then refuses to let a page on
    another origin read the gateway's answers, which is the safe default."""

    origins: tuple[Origin, ...] = ()
    """Origins allowed, each scheme://host[:port] as browsers send it in `Origin`, or *
    for any. Empty: CORS off."""
    allow_headers: tuple[HeaderName, ...] = ()
    """Request headers a page may send. Empty allows whatever its preflight asks for
    (the openai SDK sends several of its own besides Authorization); list them to allow
    only those."""
    max_age: NonNegativeDuration = timedelta(minutes=10)
    """How long a browser may reuse a preflight's answer."""


class Router(Strict):
    """Routing behaviour of the client-facing gateway."""

    activation_wait: NonNegativeDuration = timedelta(0)
    """Time a request may wait while its on-demand model starts; afterwards the client
    gets 503 with Retry-After. 0 is 2m. Zero wait would fail the first call for every
    cold model, an unlimited wait would pin client connections for minutes."""
    scrape_interval: PositiveDuration = timedelta(seconds=2)
    """How often each replica's metrics are read."""
    scrape_timeout: PositiveDuration = timedelta(seconds=1)
    """Bound on one metrics read."""
    stale_after: PositiveDuration = timedelta(seconds=10)
    """How long a replica may go unscraped before it is scored down."""
    retries: NonNegativeInt = 2
    """Extra replicas attempted when one fails, possible only before any response byte
    has reached the client."""
    cooldown: NonNegativeDuration = timedelta(seconds=15)
    """How long a failing replica is left out of the candidates."""
    failure_threshold: PositiveInt = 3
    """Consecutive failures that open a replica's breaker; 1 makes it a plain cooldown."""
    default_profile: str = "chat"
    """The routing profile of a model that names none."""
    prefix: Prefix = Field(default_factory=Prefix)
    kv_index: KVIndex = Field(default_factory=KVIndex)
    session_header: HeaderName = "x-session-id"
    """Carries the session id that keeps a conversation on one replica."""
    inject_usage: bool = True
    """Makes engines report token counts on every request, whether or not the client
    asked, so usage accounting is complete."""
    access_log: bool = True
    """One line per request on the logger llmgw.access (method, route, model, status,
    band, replica, tokens, times, key id; never the key or the content), refusals the
    gateway makes included. Off writes none."""
    tenant_label: str = "team"
    """Tenancy level used as the label of per-tenant metrics: org, team, project or
    none. Per-project series multiply quickly on big installations, and alerts tend to
    target teams, hence the default. Empty behaves as none."""
    tag_labels: tuple[str, ...] = ()
    """Tag names (from metadata or x-llmgw-tags) broken out by value in the
    llmgw_tagged_* metrics. Clients choose tag values freely, so only listed tags are
    counted and each keeps at most 100 distinct values, later ones folding into
    "other". Usage records store all tags regardless."""
    max_body_bytes: PositiveInt = 32 * MIB
    """Largest request body read; larger is refused with 413."""
    max_body_memory_bytes: PositiveInt = 256 * MIB
    """Request body bytes all client connections together may hold while they arrive,
    before the gateway has taken them; a body that does not fit is refused with 503 and
    Retry-After. At least max_body_bytes."""
    batch: Batch = Field(default_factory=Batch)
    cache: Cache = Field(default_factory=Cache)
    trusted_proxies: tuple[NetworkText, ...] = ()
    """Addresses or CIDR prefixes of proxies allowed to set X-Forwarded-For/-Proto/-Host;
    those headers from anyone else are ignored."""
    timeouts: Timeouts = Field(default_factory=Timeouts)
    cors: Cors = Field(default_factory=Cors)
    scoring: Scoring = Field(default_factory=Scoring)
    admission: Admission = Field(default_factory=Admission)

    @property
    def effective_activation_wait(self) -> timedelta:
        return self.activation_wait or DEFAULT_ACTIVATION_WAIT

    @property
    def effective_tenant_label(self) -> str:
        return self.tenant_label or "none"

    @model_validator(mode="after")
    def _body_fits_budget(self) -> Router:
        if self.max_body_memory_bytes < self.max_body_bytes:
            refuse(
                "Router",
                [
                    Problem(
                        ("max_body_memory_bytes",),
                        f"{self.max_body_memory_bytes} is below max_body_bytes {self.max_body_bytes}, "
                        "so a body of the largest size could never be taken: raise it",
                    )
                ],
            )
        return self

    @field_validator("tenant_label")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value not in ("", *TENANT_LABELS):
            raise ValueError(f"{value!r} is not a tenancy level: use org, team, project or none")
        return value
