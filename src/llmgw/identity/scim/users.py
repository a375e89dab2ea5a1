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

from llmgw.errors import StoreConflict
from llmgw.identity.scim.discovery import list_response
from llmgw.identity.scim.errors import ScimError
from llmgw.identity.scim.filter import parse_filter
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.resource_routes import Answer, ResourceRoutes
from llmgw.identity.scim.resources import person_from_json, user_json
from llmgw.store.provisioning import PersonAttribute, ProvisionedPerson, ProvisioningRepo
from llmgw.store.rows import Scope

PersonChanged = Callable[[str, Scope | None], Awaitable[None]]
"""Told the id of a person whose standing changed (made, made inactive or active again,
deprovisioned), with their row as the gateway's directory holds it when that is known
without reading it (a person just made), else None."""
FILTERABLE: dict[str, PersonAttribute] = {"username": "userName", "externalid": "externalId", "id": "id"}


class UsersRoutes(ResourceRoutes[ProvisionedPerson]):
    collection, singular = "Users", "User"

    def __init__(
        self, people: ProvisioningRepo, clock: Callable[[], float], on_person: PersonChanged
    ) -> None:
        super().__init__(clock)
        self._people = people
        self._on_person = on_person

    async def _get(self, request: Request, resource_id: str) -> Answer:
        return self._answer(200, await self._people.person(resource_id), request)

    async def _delete(self, request: Request, resource_id: str) -> None:
        await self._people.deprovision_person(resource_id, request.expected_version(), self._clock())
        await self._on_person(resource_id, None)

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

    async def _read(self, resource_id: str) -> ProvisionedPerson:
        return await self._people.person(resource_id)

    async def _save(self, wanted: ProvisionedPerson, version: int) -> ProvisionedPerson:
        return await self._people.save_person(wanted, version, self._clock())

    def _from_json(self, body: Any, current: ProvisionedPerson) -> ProvisionedPerson:
        return person_from_json(body, current)

    def _json(self, resource: ProvisionedPerson, request: Request) -> Any:
        return user_json(resource, request.base_url)

    def _taken(self, wanted: ProvisionedPerson) -> str:
        return f"userName or externalId {wanted.external_id!r} belongs to another User"

    async def _check(self, wanted: ProvisionedPerson, current: ProvisionedPerson) -> None:
        """userName is unique without regard to case (RFC 7643 §4.1.1)."""
        if wanted.user_name.lower() == current.user_name.lower():
            return
        total, found = await self._people.find_people("userName", wanted.user_name, 0, 1)
        if total and (not found or found[0].id != wanted.id or not wanted.id):
            raise ScimError(409, f"userName {wanted.user_name!r} is provisioned already", "uniqueness")

    async def _saved(self, saved: ProvisionedPerson, current: ProvisionedPerson) -> None:
        if saved.active != current.active or not saved.active:
            await self._on_person(saved.id, None)


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
