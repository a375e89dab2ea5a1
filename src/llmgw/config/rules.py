"""The rules that span sections of the settings, each returning every problem it finds.

A rule about one section lives on that section's model, where pydantic runs it
whenever that section is well formed. The rules here need several sections at once, so
they run on a whole `Settings`, which exists only once every field is well formed: a
file with a type error is told about that first, and about these on the next check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from llmgw.config.backup import parse_copy_target
from llmgw.config.checks import Loc, Problem
from llmgw.config.secrets import VAULT_PREFIX
from llmgw.config.values import is_loopback_host, split_host_port
from llmgw.evals.suite import missing_sentence, suite_exists

if TYPE_CHECKING:
    from llmgw.config.server import Settings

_LISTENERS: tuple[str, ...] = ("listen", "admin_listen", "agent_listen", "metrics_listen")


def check(settings: Settings) -> list[Problem]:
    """Every cross-section problem of `settings`, in document order."""
    return [
        *_admin_stays_local(settings),
        *_listeners_apart(settings),
        *_backup_copies(settings),
        *_vault_references(settings),
        *_guard_judges(settings),
        *_eval_suites(settings),
    ]


def _admin_stays_local(s: Settings) -> Iterator[Problem]:
    host, _ = split_host_port(s.admin_listen)
    if not s.admin_remote and not is_loopback_host(host):
        yield Problem(
            ("admin_listen",),
            f"{s.admin_listen!r} is reachable from other machines, and the admin listener serves the "
            "management API: keep it on 127.0.0.1, or set admin_remote: true",
        )


def start_problems(s: Settings) -> list[str]:
    """What stops a server on these settings although each section is valid on its own:
    said by `llmgw config check` and before the server opens any port, so a file the check
    accepts never stops the server it configures. (Not a validation rule: the defaults
    alone are such a file, a control plane with no agent certificates yet.)"""
    problems = []
    if s.control_plane_mode and not s.agent_tls.enabled and not s.agent_insecure:
        why = (
            "control.enabled is on"
            if s.control.enabled
            else "this file runs a control plane (it lists no static endpoints, or a model with profiles)"
        )
        problems.append(
            f"agent_tls: {why}, and its agent port has no certificates: give agent_tls.cert_file, "
            "key_file and ca_file, or set agent_insecure: true for a single machine or a trusted network"
        )
    return problems


def _listeners_apart(s: Settings) -> Iterator[Problem]:
    # Two listeners on one port fail at start with "address in use"; an empty host binds
    # every interface, so it collides with any host on that port.
    taken: dict[int, list[tuple[str, str]]] = {}
    for name in _LISTENERS:
        address = getattr(s, name)
        if not address:
            continue
        host, port = split_host_port(address)
        if port == 0:
            continue
        for other, other_host in taken.get(port, []):
            if host == other_host or not host or not other_host:
                yield Problem(
                    (name,), f"{address!r} is the port {other} already listens on: give it another port"
                )
                break
        taken.setdefault(port, []).append((name, host))


def _backup_copies(s: Settings) -> Iterator[Problem]:
    for i, text in enumerate(s.backup_copy_to):
        if parse_copy_target(text).kind == "ssh" and not s.backup_copy_key:
            yield Problem(("backup_copy_to", i), f"{text!r} needs an SSH key: set backup_copy_key")
    if s.backup_copy_to and not s.backup_recipients:
        yield Problem(
            ("backup_copy_to",),
            "is set without backup_recipients: copies would carry the CA key and all stored "
            "secrets in clear; add at least one recipient",
        )


def _secret_references(s: Settings) -> Iterator[tuple[Loc, str]]:
    yield ("auth", "oidc", "client_secret_file"), s.auth.oidc.client_secret_file
    yield ("auth", "scim", "token_file"), s.auth.scim.token_file
    yield ("secrets", "master_key"), s.secrets.master_key
    for i, hook in enumerate(s.notify.webhooks):
        yield ("notify", "webhooks", i, "secret_file"), hook.secret_file


def _vault_references(s: Settings) -> Iterator[Problem]:
    if s.secrets.vault.enabled:
        return
    for loc, reference in _secret_references(s):
        # master_key's vault-transit: is refused on its own model, with its own reason.
        if reference.startswith(VAULT_PREFIX):
            yield Problem(
                loc, f"{reference!r} is read from Vault, but secrets.vault.address is empty: configure it"
            )


def _guard_judges(s: Settings) -> Iterator[Problem]:
    # A judge the gateway cannot ask would fail every request it checks (or, with
    # on_error allow, check nothing while the operator believes otherwise).
    roles = {name: m.role for m in s.models for name in (m.name, *m.aliases)}
    for i, policy in enumerate(s.guard.policies):
        for j, check in enumerate(policy.checks):
            if check.type != "model":
                continue
            loc: Loc = ("guard", "policies", i, "checks", j, "model")
            if check.model not in roles:
                yield Problem(
                    loc,
                    f"{check.model!r} is not a model of this file: define it under models with role: guard",
                )
            elif roles[check.model] != "guard":
                yield Problem(
                    loc, f"{check.model!r} serves clients and judges nothing: name a model with role: guard"
                )


def _eval_suites(s: Settings) -> Iterator[Problem]:
    # A gate naming no suite could never be passed: every candidate would be held back
    # for a typo, found only when the first eval runs.
    for i, model in enumerate(s.models):
        gate = model.eval
        if gate is None or not gate.suite:
            continue
        if not suite_exists(gate.suite, s.control.eval_dir):
            yield Problem(("models", i, "eval", "suite"), missing_sentence(gate.suite, s.control.eval_dir))
