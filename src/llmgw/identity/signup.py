"""Signup with approval (`auth.signup_open`): a form (name, e-mail, reason) that makes a
`pending` person, whom an operator approves (`llmgw users approve`) or rejects.

The answer is the same whether the address is new or known, so the form tells nobody
who has an account here; a known address changes nothing. Each address and each client
address may use the form a few times an hour (`Throttle`), which bounds both the
pending list a script can fill and how fast it could probe. Once approved, the person
signs in through the identity provider with that address (`admit` matches by e-mail).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from llmgw.errors import BadRequest, RateLimited, StoreConflict
from llmgw.identity.claims import MAX_ID_CHARS
from llmgw.identity.throttle import Allowance, Throttle
from llmgw.store import Store
from llmgw.store.people import Person

log = logging.getLogger(__name__)

# A person asking twice for an account is normal, ten times an hour is not; an office
# behind one NAT address may have a few dozen people signing up in an hour.
PER_ADDRESS = Allowance(count=3, window_s=3600.0)
PER_CLIENT = Allowance(count=30, window_s=3600.0)
MAX_NAME = 200
MAX_REASON = 2000
# Deliberately loose (RFC 5322 is not checked by a regex): something@domain.tld.
_EMAIL = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}$")
_ID_UNSAFE = re.compile(r"[^a-z0-9._@-]+")


@dataclass(frozen=True, slots=True)
class SignupForm:
    name: str
    email: str
    reason: str


def read_form(fields: Mapping[str, str]) -> SignupForm:
    """The form checked; a `BadRequest` naming the field and the fix otherwise."""
    name = fields.get("name", "").strip()
    email = fields.get("email", "").strip().lower()
    reason = fields.get("reason", "").strip()
    if not name or len(name) > MAX_NAME:
        raise BadRequest(f"name: give your name, up to {MAX_NAME} characters", param="name")
    if not _EMAIL.match(email):
        raise BadRequest("email: give an address like ada@example.com", param="email")
    if len(reason) > MAX_REASON:
        raise BadRequest(f"reason: keep it under {MAX_REASON} characters", param="reason")
    return SignupForm(name, email, reason)


class Signups:
    """The signup form's work: throttled, then a pending person made for a new address."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._per_address = Throttle(PER_ADDRESS)
        self._per_client = Throttle(PER_CLIENT)

    async def request(self, form: SignupForm, client: str, now: float) -> None:
        """Records the request; `RateLimited` when this address or client asked too often."""
        if not self._per_client.allow(client, now) or not self._per_address.allow(form.email, now):
            log.warning("signup: too many requests from %s or for one address", client or "an unknown client")
            raise RateLimited("too many signup requests: try again in an hour", retry_after=3600)
        if await self._store.people.by_email(form.email):
            log.info("signup: a request for an address already known; nothing changed")
            return
        base = _ID_UNSAFE.sub("-", form.email)[:MAX_ID_CHARS]
        for ident in (base, *(f"{base[: MAX_ID_CHARS - 3]}-{n}" for n in range(2, 10))):
            person = Person(
                id=ident, email=form.email, name=form.name, status="pending", signup_reason=form.reason
            )
            try:
                await self._store.people.create(person, now)
            except StoreConflict:
                continue
            log.info("signup: %s is waiting for approval", ident)
            return
        log.warning("signup: no free id for a request; nothing made")
