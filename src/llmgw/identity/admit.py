"""Who a successful OIDC sign-in is in the store: found by subject, else matched by
e-mail to a person an operator, SCIM or the signup form made, else created.

A person created here is `active`: the identity provider is the operator's own
directory (they registered llmgw as its client) and `allowed_domains` narrows it
further. With `auth.signup_open` on, the operator has chosen approval as the way in, so
a newcomer from the provider waits (`pending`) like one from the signup form. A person
matched keeps their status. A disabled or rejected person is refused, and their
memberships are left as they are.
"""

from __future__ import annotations

import logging

from llmgw.errors import SignInRefused, StoreConflict
from llmgw.identity.claims import Profile, person_ids
from llmgw.store import Store
from llmgw.store.people import Person

log = logging.getLogger(__name__)


async def admit(store: Store, found: Profile, *, signup_open: bool, now: float) -> Person:
    """The person signing in, made or matched, with their sign-in team memberships
    brought in line with the groups claim."""
    person = await store.people.by_subject(found.subject)
    if person is None:
        person = await _match_by_email(store, found, now)
    if person is None:
        person = await _create(store, found, "pending" if signup_open else "active", now)
    if person.disabled:
        raise SignInRefused(
            f"{person.id} is disabled here: ask an operator to enable the account", code="person_disabled"
        )
    if person.status == "rejected":
        raise SignInRefused(
            f"the signup of {person.id} was not approved: ask an operator if this is a mistake",
            code="signup_rejected",
        )
    await store.people.sync_oidc_teams(person.id, found.groups, now)
    return person


async def _match_by_email(store: Store, found: Profile, now: float) -> Person | None:
    if not found.email or found.email_verified is False:
        # An address the provider itself has not verified could be anyone's: it must
        # not take over a person someone else made for that address.
        return None
    same = await store.people.by_email(found.email)
    if not same:
        return None
    free = [p for p in same if p.subject is None]
    if len(free) != 1:
        raise SignInRefused(
            f"{found.email} belongs to {'several people' if free else 'another sign-in'} here: "
            "ask an operator to sort out the accounts with that address",
            code="email_taken",
        )
    person = free[0]
    await store.people.link(person.id, found.subject, found.name, found.email, now)
    log.info("OIDC: subject %s linked to %s by e-mail", found.subject, person.id)
    return person


async def _create(store: Store, found: Profile, status: str, now: float) -> Person:
    for ident in person_ids(found):
        person = Person(id=ident, email=found.email, name=found.name, subject=found.subject, status=status)
        try:
            await store.people.create(person, now)
        except StoreConflict:
            raced = await store.people.by_subject(found.subject)
            if raced is not None:  # the same person signing in twice at once
                return raced
            continue
        log.info("OIDC: %s signed in for the first time, as %s (%s)", found.subject, ident, status)
        return person
    raise SignInRefused(
        "no free id could be made for this person: ask an operator to create the account", code="no_free_id"
    )
