"""/scim/v2/Users: people provisioned, changed, made inactive and deprovisioned.

A person made inactive (PUT or PATCH `active: false`) is refused at once: the store
ends their browser sessions in the same write, and the gateway this request reached
drops their keys' principals now (`on_person`); the other gateways follow within
`auth.cache_ttl`, as for any disabled person. DELETE deprovisions (llmgw.store.provisioning):
the row and the usage that names it stay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from llmgw.errors import StoreConflict, StoreStale
from llmgw.identity.scim.discovery import list_response
from llmgw.identity.scim.errors import ScimError
from llmgw.identity.scim.filter import parse_filter
from llmgw.identity.scim.patch import apply_patch
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.resources import etag, person_from_json, user_json
from llmgw.store.provisioning import PersonAttribute, ProvisionedPerson, ProvisioningRepo
from llmgw.store.rows import Scope

Answer = tuple[int, Any, list[tuple[str, str]]]
PersonChanged = Callable[[str, Scope | None], Awaitable[None]]
"""Told the id of a person whose standing changed (made, made inactive or active again,
deprovisioned), with their row as the gateway's directory holds it when that is known
without reading it (a person just made), else None."""
FILTERABLE: dict[str, PersonAttribute] = {"username": "userName", "externalid": "externalId", "id": "id"}
# Writes without If-Match read, change and write back under the version read; another
# write in between makes it read again, this many times at most.
_RETRIES = 3


class UsersRoutes:
    def __init__(
        self, people: ProvisioningRepo, clock: Callable[[], float], on_person: PersonChanged
    ) -> None:
        self._people = people
        self._clock = clock
        self._on_person = on_person

    async def handle(self, request: Request) -> Answer:
        method, rest = request.method, request.parts[1:]
        if not rest:
            if method == "GET":
                return await self._list(request)
            if method == "POST":
                return await self._create(request)
            raise ScimError(405, f"{method} /Users is not served: use GET or POST")
        if len(rest) != 1:
            raise ScimError(404, f"/Users/{'/'.join(rest)} is no resource")
        user_id = rest[0]
        if method == "GET":
            return self._answer(200, await self._people.person(user_id), request)
        if method == "PUT":
            return await self._write(
                request, user_id, lambda current: person_from_json(request.json(), current)
            )
        if method == "PATCH":
            message = request.json()
            return await self._write(
                request,
                user_id,
                lambda current: person_from_json(
                    apply_patch(user_json(current, request.base_url), message), current
                ),
            )
        if method == "DELETE":
            await self._people.deprovision_person(user_id, request.expected_version(), self._clock())
            await self._on_person(user_id, None)
            return 204, None, []
        raise ScimError(405, f"{method} /Users/{user_id} is not served: use GET, PUT, PATCH or DELETE")

    async def _list(self, request: Request) -> Answer:
        start, count = request.page()
        text = request.query.get("filter")
        found = parse_filter(text, FILTERABLE) if text is not None else None
        total, people = await self._people.find_people(
            FILTERABLE[found.attribute.lower()] if found else None,
            found.value if found else None,
            start - 1,
            count,
        )
        resources = [user_json(person, request.base_url) for person in people]
        return 200, list_response(resources, total, start), []

    async def _create(self, request: Request) -> Answer:
        person = person_from_json(request.json())
        try:
            made = await self._people.create_person(person, self._clock())
        except StoreConflict:
            raise ScimError(
                409,
                f"userName {person.user_name!r} or externalId {person.external_id!r} is taken",
                "uniqueness",
            ) from None
        # So a key made for them at once through this server's admin API works at once.
        await self._on_person(made.id, _new_scope(made) if made.version == 1 else None)
        return self._answer(201, made, request)

    async def _write(
        self, request: Request, user_id: str, change: Callable[[ProvisionedPerson], ProvisionedPerson]
    ) -> Answer:
        expected = request.expected_version()
        for _ in range(_RETRIES):
            current = await self._people.person(user_id)
            if expected is not None and current.version != expected:
                raise ScimError(
                    412, f"User {user_id} is at version {current.version}, not {expected}: read it again"
                )
            wanted = change(current)
            if wanted.user_name.lower() != current.user_name.lower():
                await self._check_name_free(wanted)
            try:
                saved = await self._people.save_person(wanted, current.version, self._clock())
            except StoreStale:
                if expected is not None:
                    raise ScimError(412, f"User {user_id} changed meanwhile: read it again") from None
                continue
            except StoreConflict:
                raise ScimError(
                    409,
                    f"userName or externalId {wanted.external_id!r} belongs to another User",
                    "uniqueness",
                ) from None
            if saved.active != current.active or not saved.active:
                await self._on_person(user_id, None)
            return self._answer(200, saved, request)
        raise ScimError(409, f"User {user_id} kept changing under this write: send it again")

    async def _check_name_free(self, person: ProvisionedPerson) -> None:
        """userName is unique without regard to case (RFC 7643 §4.1.1)."""
        total, found = await self._people.find_people("userName", person.user_name, 0, 1)
        if total and (not found or found[0].id != person.id or not person.id):
            raise ScimError(409, f"userName {person.user_name!r} is provisioned already", "uniqueness")

    def _answer(self, status: int, person: ProvisionedPerson, request: Request) -> Answer:
        return status, user_json(person, request.base_url), [("etag", etag(person.version))]


def _new_scope(person: ProvisionedPerson) -> Scope:
    """A person just made, as the directory holds people: nothing of their own set yet
    (their limits, budget and models are inherited), so no read is needed to know it."""
    return Scope(
        kind="user",
        id=person.id,
        email=person.email,
        disabled=not person.active,
        created_at=person.created_at,
        updated_at=person.updated_at,
    )
