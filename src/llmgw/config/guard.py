"""Guardrails: named policies saying which checks run on prompts and answers, and the
reaction to a hit.

`guard.default` names the policy meant for all traffic. This version enforces none of
it (`llmgw.config.inert`): the policies are checked and nothing is inspected.
"""

from __future__ import annotations

import difflib
import re
from datetime import timedelta

from pydantic import field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import PositiveDuration
from llmgw.core.strict import Strict

CHECK_TYPES: tuple[str, ...] = ("pii", "secrets", "regex", "model")
CHECK_STAGES: tuple[str, ...] = ("input", "output", "both")
CHECK_ACTIONS: tuple[str, ...] = ("block", "redact", "flag")
ON_ERROR: tuple[str, ...] = ("block", "allow")
DEFAULT_JUDGE_TIMEOUT = timedelta(seconds=5)


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{value!r} is not a {what}: use one of {', '.join(allowed)}")
    return value


class GuardCheck(Strict):
    """One check within a policy.

    `pii` finds personal data (e-mail addresses, phone, card and national id numbers);
    `secrets` finds credentials (API keys, private keys, tokens); `regex` finds the
    given `patterns`; `model` asks a judge model (a catalog model with `role: guard`)
    whether the text is unsafe, optionally only for some `categories`.
    """

    type: str
    """pii, secrets, regex or model."""
    stage: str = "input"
    """What is checked: input (the request), output (the answer) or both."""
    action: str = "block"
    """block refuses (400 before any byte of an answer, an error event after); redact
    replaces what matched and lets the rest through; flag lets it through and records
    it in the usage record."""
    patterns: tuple[str, ...] = ()
    """Python regular expressions, for type regex."""
    model: str = ""
    """The judge model, for type model."""
    categories: tuple[str, ...] = ()
    """The judge's categories that count, for type model; empty is any unsafe answer."""
    timeout: PositiveDuration = DEFAULT_JUDGE_TIMEOUT
    """How long the judge may take, for type model; past it, on_error decides."""
    on_error: str = "block"
    """For type model, when the judge does not answer in time or answers something its
    format cannot read: block treats the text as unsafe, allow lets it through."""

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        return _one_of(value, CHECK_TYPES, "check type")

    @field_validator("stage")
    @classmethod
    def _stage(cls, value: str) -> str:
        return _one_of(value, CHECK_STAGES, "stage")

    @field_validator("action")
    @classmethod
    def _action(cls, value: str) -> str:
        return _one_of(value, CHECK_ACTIONS, "guard action")

    @field_validator("on_error")
    @classmethod
    def _on_error(cls, value: str) -> str:
        return _one_of(value, ON_ERROR, "judge failure mode")

    @model_validator(mode="after")
    def _fits_type(self) -> GuardCheck:
        problems: list[Problem] = []
        if self.type == "regex" and not self.patterns:
            problems.append(
                Problem(("patterns",), "a regex check needs patterns: give at least one expression")
            )
        if self.patterns and self.type != "regex":
            problems.append(Problem(("patterns",), f"are for type regex, not {self.type}: remove them"))
        for i, pattern in enumerate(self.patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(Problem(("patterns", i), f"{pattern!r} is not a regular expression: {exc}"))
        if self.type == "model" and not self.model:
            problems.append(
                Problem(("model",), "a model check needs the judge: name a catalog model with role guard")
            )
        if self.type != "model":
            for name in ("model", "categories"):
                if getattr(self, name):
                    problems.append(Problem((name,), f"is for type model, not {self.type}: remove it"))
        if self.type == "model" and self.action == "redact":
            problems.append(
                Problem(
                    ("action",),
                    "a judge rates the whole text and marks nothing to cut out: use block or flag",
                )
            )
        refuse("GuardCheck", problems)
        return self


class GuardPolicy(Strict):
    """A named set of checks."""

    name: str
    """How `default` refers to it."""
    description: str = ""
    """What the policy is for, shown in the console."""
    checks: tuple[GuardCheck, ...]
    """Run in order; the first that blocks ends the request."""

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a policy needs a name, like strict")
        return value

    @field_validator("checks")
    @classmethod
    def _checks_something(cls, value: tuple[GuardCheck, ...]) -> tuple[GuardCheck, ...]:
        if not value:
            raise ValueError("a policy with no checks does nothing: give at least one check")
        return value


class Guard(Strict):
    """The policy library and the one applied to every request (llmgw.guard enforces
    them; docs/guard.md)."""

    policies: tuple[GuardPolicy, ...] = ()
    """The library; policies are named for `default` and for attaching."""
    default: str = ""
    """The policy every request is checked by; empty is none."""

    def policy(self, name: str) -> GuardPolicy | None:
        return next((p for p in self.policies if p.name == name), None)

    @model_validator(mode="after")
    def _names(self) -> Guard:
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for i, policy in enumerate(self.policies):
            if policy.name in seen:
                problems.append(
                    Problem(
                        ("policies", i, "name"),
                        f"{policy.name!r} is already policies[{seen[policy.name]}]'s name",
                    )
                )
            seen.setdefault(policy.name, i)
        if self.default and self.default not in seen:
            guess = difflib.get_close_matches(self.default, list(seen), n=1)
            hint = f"did you mean {guess[0]!r}?" if guess else "define it under guard.policies"
            problems.append(Problem(("default",), f"{self.default!r} is not a policy: {hint}"))
        refuse("Guard", problems)
        return self
