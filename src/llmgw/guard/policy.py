"""Policies compiled for the request path: per stage, the checks to run and what a hit
does.

The settings (`llmgw.config.guard`) say what an operator wants; this turns each policy
into tuples of `Rule`s, one per check and stage, with the detectors built once, so a
request only walks tuples. Which policies apply to a caller is `PolicySet.for_scopes`:
the default, plus the policies attached nearest the caller (person, project, team,
org: the first level with any attachment wins, and adds to the default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from llmgw.config.guard import Guard, GuardCheck, GuardPolicy
from llmgw.guard.detectors import PII, SECRETS, Detector, regex_detectors

INPUT = "input"
OUTPUT = "output"
SCOPE_KINDS: tuple[str, ...] = ("user", "project", "team", "org")
"""Attachment levels, nearest the caller first."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One check of one policy, at one stage."""

    policy: str
    check: str
    action: str
    detectors: tuple[Detector, ...] = ()
    judge: str = ""
    categories: frozenset[str] = frozenset()
    on_error: str = "block"
    timeout_s: float = 5.0


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    name: str
    input: tuple[Rule, ...]
    output: tuple[Rule, ...]


def _detectors(check: GuardCheck) -> tuple[Detector, ...]:
    if check.type == "pii":
        return PII
    if check.type == "secrets":
        return SECRETS
    if check.type == "regex":
        return regex_detectors(check.patterns)
    return ()


def compile_policy(policy: GuardPolicy) -> CompiledPolicy:
    """The policy's checks as rules, split by stage, in their declared order."""
    inputs: list[Rule] = []
    outputs: list[Rule] = []
    for check in policy.checks:
        rule = Rule(
            policy.name,
            check.type,
            check.action,
            _detectors(check),
            check.model,
            frozenset(c.lower() for c in check.categories),
            check.on_error,
            check.timeout.total_seconds(),
        )
        if check.stage in (INPUT, "both"):
            inputs.append(rule)
        if check.stage in (OUTPUT, "both"):
            outputs.append(rule)
    return CompiledPolicy(policy.name, tuple(inputs), tuple(outputs))


@dataclass(frozen=True, slots=True)
class Applied:
    """The rules a request runs: what its caller's policies add up to."""

    input: tuple[Rule, ...]
    output: tuple[Rule, ...]

    @property
    def empty(self) -> bool:
        return not self.input and not self.output


NOTHING = Applied((), ())


def _join(policies: Iterable[CompiledPolicy]) -> Applied:
    seen: set[str] = set()
    inputs: list[Rule] = []
    outputs: list[Rule] = []
    for p in policies:
        if p.name in seen:
            continue
        seen.add(p.name)
        inputs.extend(p.input)
        outputs.extend(p.output)
    return Applied(tuple(inputs), tuple(outputs))


@dataclass(slots=True)
class PolicySet:
    """The compiled library, the default, and the attachments (replaced as a whole when
    the store's copy changes, so a request never sees half an update)."""

    library: dict[str, CompiledPolicy]
    default: Applied
    default_name: str
    attachments: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(scope kind, scope id) → policy names."""
    _cache: dict[tuple[tuple[str, str], ...], Applied] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, guard: Guard) -> PolicySet:
        library = {p.name: compile_policy(p) for p in guard.policies}
        default = _join([library[guard.default]]) if guard.default else NOTHING
        return cls(library, default, guard.default)

    @property
    def active(self) -> bool:
        """Whether any request can be checked at all (the request path asks first)."""
        return not self.default.empty or bool(self.attachments)

    def replace_attachments(self, attachments: Mapping[tuple[str, str], tuple[str, ...]]) -> None:
        self.attachments = dict(attachments)
        self._cache = {}

    def for_scopes(self, scopes: tuple[tuple[str, str], ...]) -> Applied:
        """The rules for a caller in `scopes` ((kind, id), nearest first)."""
        if not self.attachments or not scopes:
            return self.default
        cached = self._cache.get(scopes)
        if cached is not None:
            return cached
        names: tuple[str, ...] = ()
        for scope in scopes:
            names = self.attachments.get(scope, ())
            if names:
                break
        chosen = [self.library[self.default_name]] if self.default_name else []
        chosen.extend(self.library[n] for n in names if n in self.library)
        applied = _join(chosen)
        if len(self._cache) < 10_000:
            self._cache[scopes] = applied
        return applied
