"""API keys, people and what they may spend on the client-facing port.

Disabled unless asked for, so a gateway on a private network works before anyone has
issued a key. Enabling it is the precondition for exposing the client port at all, and
it brings in the SQLite store for keys, the tenancy tree and usage records.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.identity import OIDC, SCIM
from llmgw.config.values import NonNegativeDuration, NonNegativeInt, PositiveDuration
from llmgw.core.durations import format_duration
from llmgw.core.strict import Strict

BUDGET_PERIODS: tuple[str, ...] = ("day", "month")
MIN_USAGE_RETENTION = timedelta(hours=24)
MICROS_PER_UNIT = 1_000_000
MAX_BUDGET_UNITS = 1e12
"""The largest budget anything takes, in units: a trillion is more than any real one,
and far enough under what the store's integer columns hold in millionths."""


def _budget(value: float) -> float:
    if not 0 <= value <= MAX_BUDGET_UNITS:  # also refuses nan and inf
        raise ValueError(f"{value} is not a budget: give 0 or more units, up to {MAX_BUDGET_UNITS:.0e}")
    return value


Budget = Annotated[float, AfterValidator(_budget)]
"""A budget in whole units, from 0 up to `MAX_BUDGET_UNITS`."""

# What a 0 in the seed's defaults stands for. Each is a choice, written once here:
# a revoked key keeps working at most half a minute, and a client looping with a bad
# key costs one store read per half minute; usage reaches the store within a second,
# in statements of at most 500 rows; 100000 waiting records (a few tens of MB) ride
# out a store that stalls for tens of seconds at thousands of requests a second.
DEFAULT_CACHE_TTL = timedelta(seconds=30)
DEFAULT_NEGATIVE_TTL = timedelta(seconds=30)
DEFAULT_FLUSH_INTERVAL = timedelta(seconds=1)
DEFAULT_BATCH_SIZE = 500
DEFAULT_BUFFER_SIZE = 100_000


class Price(Strict):
    """Cost of a model, in millionths of a budget unit per 1000 tokens.

    The unit means whatever the operator decides. Models run in-house have no list
    price: charge GPU-seconds, an internal rate, or the same 1000 for every model so
    that budgets behave as token quotas.
    """

    prompt_per_1k: NonNegativeInt = 0
    """Per thousand prompt tokens."""
    completion_per_1k: NonNegativeInt = 0
    """Per thousand completion tokens."""


class Personal(Strict):
    """Use by an individual rather than through a project: their own keys and the chat
    page. Allowed unless disabled. The limits below are shared by all of one person's
    personal keys, and a limit set explicitly for that person replaces them."""

    disabled: bool = False
    """Turns personal use off; access then comes only through project membership."""
    rpm: NonNegativeInt = 0
    """Requests a minute; 0 is no limit of its own."""
    tpm: NonNegativeInt = 0
    """Tokens a minute; 0 is no limit of its own."""
    budget: Budget = 0
    """Whole units a person may spend each `period`; 0 is no budget."""
    period: str = ""
    """day or month; empty is month."""

    @property
    def effective_period(self) -> str:
        return self.period or "month"

    @property
    def budget_micros(self) -> int | None:
        """The budget in millionths of a unit, the store's unit; None when there is none."""
        return round(self.budget * MICROS_PER_UNIT) if self.budget > 0 else None

    @field_validator("period")
    @classmethod
    def _known_period(cls, value: str) -> str:
        if value not in ("", *BUDGET_PERIODS):
            raise ValueError(f"{value!r} is not a budget period: use day or month")
        return value


DEFAULT_SESSION_LIFETIME = timedelta(hours=12)
DEFAULT_SESSION_IDLE = timedelta(hours=2)


class Session(Strict):
    """Browser sessions of people signed in (OIDC or an approved signup): how long one
    lasts. Held server-side, so signing out or disabling a person ends every one of
    theirs; a session ends at whichever bound comes first."""

    lifetime: PositiveDuration = DEFAULT_SESSION_LIFETIME
    """The longest a session lasts from sign-in, however busy: a working day by default,
    so a cookie left on a shared machine does not outlive it."""
    idle: PositiveDuration = DEFAULT_SESSION_IDLE
    """How long a session lasts with no request from its browser."""

    @model_validator(mode="after")
    def _bounds(self) -> Session:
        problems: list[Problem] = []
        if self.idle > self.lifetime:
            problems.append(
                Problem(
                    ("idle",),
                    f"{format_duration(self.idle)} is longer than lifetime {format_duration(self.lifetime)}: "
                    "the idle bound would never apply; make it shorter",
                    self.idle,
                )
            )
        refuse("Session", problems)
        return self


class Auth(Strict):
    """Client authentication, tenancy limits, budgets and usage accounting."""

    enabled: bool = False
    """Demands an API key on the client port."""
    store: str = ""
    """Path of the SQLite database for keys, tenancy and usage, or a postgresql:// URL
    for a server several gateways share; needed once enabled. Empty with auth off: a
    control plane keeps its runtime catalog in `llmgw.db` beside the admin token."""
    cache_ttl: NonNegativeDuration = timedelta(0)
    """How long a key that checked out is cached before the store is consulted again.
    It bounds how long a revoked key still works; shorter means more store reads."""
    negative_ttl: NonNegativeDuration = timedelta(0)
    """How long an unknown or revoked key stays cached as rejected, so a client retrying
    with a bad key costs no database lookups."""
    default_rpm: NonNegativeInt = 0
    """Request rate (per minute) applied to keys that inherit no limit from their
    organization, team or project. Any explicit limit, larger or smaller, takes
    precedence. 0 means unlimited; leaving it so should be deliberate."""
    default_tpm: NonNegativeInt = 0
    """Tokens a minute, as `default_rpm`."""
    signup_open: bool = False
    """Offers a self-service sign-up page at /signup (name, e-mail, reason). New accounts
    stay pending until an operator approves them (`llmgw users approve`), and so do people
    signing in through OIDC for the first time; when closed, operators add people with
    `llmgw users create` and the identity provider's people are active at once."""
    oidc: OIDC = Field(default_factory=OIDC)
    session: Session = Field(default_factory=Session)
    scim: SCIM = Field(default_factory=SCIM)
    max_key_ttl: NonNegativeDuration = timedelta(0)
    """Upper bound on key lifetime, also used as the expiry of keys requested without
    one. Lower bounds can be set per organization, team or project. 0: unbounded."""
    personal: Personal = Field(default_factory=Personal)
    pricing: dict[str, Price] = Field(default_factory=dict)
    """Cost per model name, for budgets. A model not listed costs `default_price`."""
    default_price: Price = Field(default_factory=Price)
    flush_interval: NonNegativeDuration = timedelta(0)
    """How often buffered usage records are written."""
    batch_size: NonNegativeInt = 0
    """How many usage records are written at once."""
    buffer_size: NonNegativeInt = 0
    """Usage records that may wait in memory. Beyond it new records are discarded (and
    counted) instead of slowing requests: missing some accounting beats letting a slow
    database stall traffic."""
    usage_retention: NonNegativeDuration = timedelta(0)
    """Retention of per-request records (`GET /api/usage/records` lists them); 0 keeps
    them indefinitely. Dashboards, totals and budgets use five-minute aggregates that
    are kept regardless, so pruning only trims the largest table (whole batches of
    records, once the newest of a batch is past it). Minimum 24h."""

    @property
    def effective_cache_ttl(self) -> timedelta:
        """`cache_ttl`; 0 is 30s."""
        return self.cache_ttl or DEFAULT_CACHE_TTL

    @property
    def effective_negative_ttl(self) -> timedelta:
        """`negative_ttl`; 0 is 30s."""
        return self.negative_ttl or DEFAULT_NEGATIVE_TTL

    @property
    def effective_flush_interval(self) -> timedelta:
        """`flush_interval`; 0 is 1s."""
        return self.flush_interval or DEFAULT_FLUSH_INTERVAL

    @property
    def effective_batch_size(self) -> int:
        """`batch_size`; 0 is 500."""
        return self.batch_size or DEFAULT_BATCH_SIZE

    @property
    def effective_buffer_size(self) -> int:
        """`buffer_size`; 0 is 100000."""
        return self.buffer_size or DEFAULT_BUFFER_SIZE

    @property
    def effective_max_key_ttl(self) -> timedelta | None:
        """`max_key_ttl`; 0 is None, no bound."""
        return self.max_key_ttl or None

    @property
    def effective_usage_retention(self) -> timedelta | None:
        """`usage_retention`; 0 is None, records kept for ever."""
        return self.usage_retention or None

    def price(self, model: str) -> Price:
        """What `model` costs: its `pricing` entry, else `default_price`."""
        return self.pricing.get(model, self.default_price)

    @model_validator(mode="after")
    def _store_and_retention(self) -> Auth:
        problems: list[Problem] = []
        if self.enabled and not self.store:
            problems.append(
                Problem(
                    ("store",),
                    "is empty but auth is on: give the SQLite database path, like /var/lib/llmgw/auth.db",
                )
            )
        if timedelta(0) < self.usage_retention < MIN_USAGE_RETENTION:
            problems.append(
                Problem(
                    ("usage_retention",),
                    f"{format_duration(self.usage_retention)} is below the 24h minimum: "
                    "raise it, or use 0s for unlimited retention",
                    self.usage_retention,
                )
            )
        refuse("Auth", problems)
        return self
