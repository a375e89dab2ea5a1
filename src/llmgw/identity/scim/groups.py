"""/scim/v2/Groups: the identity provider's groups and their members.

Every write also rewrites the memberships of the teams whose `idp_group` is the group's
display name (llmgw.store.provisioning), so a person pushed into a group is in its team on
the next request that asks. Members must be provisioned people: an id that names none
is refused (400 invalidValue) with the ids, rather than kept as a member who is nobody.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from llmgw.errors import StoreConflict
from llmgw.identity.scim.discovery import list_response
from llmgw.identity.scim.errors import ScimError, invalid_value
from llmgw.identity.scim.filter import parse_filter
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.resource_routes import Answer, ResourceRoutes
from llmgw.identity.scim.resources import etag, group_from_json, group_json
from llmgw.store.provisioning import GroupAttribute, IdpGroup, ProvisioningRepo

FILTERABLE: dict[str, GroupAttribute] = {"displayname": "displayName", "externalid": "externalId", "id": "id"}


class GroupsRoutes(ResourceRoutes[IdpGroup]):
    collection, singular = "Groups", "Group"

    def __init__(self, people: ProvisioningRepo, clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self._people = people

    async def _get(self, request: Request, resource_id: str) -> Answer:
        members = not request.excluded_members()
        group = await self._people.group(resource_id, with_members=members)
        return 200, group_json(group, request.base_url, with_members=members), [("etag", etag(group.version))]

    async def _delete(self, request: Request, resource_id: str) -> None:
        await self._people.delete_group(resource_id, request.expected_version(), self._clock())

    async def _list(self, request: Request) -> Answer:
        start, count = request.page()
        text = request.query.get("filter")
        found = parse_filter(text, FILTERABLE) if text is not None else None
        members = not request.excluded_members()
        total, groups = await self._people.find_groups(
            FILTERABLE[found.attribute.lower()] if found else None,
            found.value if found else None,
            start - 1,
            count,
            with_members=members,
        )
        resources = [group_json(group, request.base_url, with_members=members) for group in groups]
        return 200, list_response(resources, total, start), []

    async def _create(self, request: Request) -> Answer:
        group = group_from_json(request.json(), uuid.uuid4().hex)
        await self._check_members(group)
        try:
            made = await self._people.create_group(group, self._clock())
        except StoreConflict:
            raise ScimError(409, self._taken(group), "uniqueness") from None
        return self._answer(201, made, request)

    async def _read(self, resource_id: str) -> IdpGroup:
        return await self._people.group(resource_id)

    async def _save(self, wanted: IdpGroup, version: int) -> IdpGroup:
        return await self._people.save_group(wanted, version, self._clock())

    def _from_json(self, body: Any, current: IdpGroup) -> IdpGroup:
        return group_from_json(body, current.id, current)

    def _json(self, resource: IdpGroup, request: Request) -> Any:
        return group_json(resource, request.base_url)

    def _taken(self, wanted: IdpGroup) -> str:
        return f"displayName {wanted.display_name!r} or externalId {wanted.external_id!r} is taken"

    async def _check(self, wanted: IdpGroup, current: IdpGroup) -> None:
        await self._check_members(wanted)

    async def _check_members(self, group: IdpGroup) -> None:
        unknown = await self._people.unknown_people(group.members)
        if unknown:
            raise invalid_value(f"members {', '.join(unknown)} are not provisioned Users: create them first")
