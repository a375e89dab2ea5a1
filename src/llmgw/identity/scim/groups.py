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

from llmgw.errors import StoreConflict, StoreStale
from llmgw.identity.scim.discovery import list_response
from llmgw.identity.scim.errors import ScimError, invalid_value
from llmgw.identity.scim.filter import parse_filter
from llmgw.identity.scim.patch import apply_patch
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.resources import etag, group_from_json, group_json
from llmgw.store.provisioning import GroupAttribute, IdpGroup, ProvisioningRepo

Answer = tuple[int, Any, list[tuple[str, str]]]
FILTERABLE: dict[str, GroupAttribute] = {"displayname": "displayName", "externalid": "externalId", "id": "id"}
_RETRIES = 3


class GroupsRoutes:
    def __init__(self, people: ProvisioningRepo, clock: Callable[[], float]) -> None:
        self._people = people
        self._clock = clock

    async def handle(self, request: Request) -> Answer:
        method, rest = request.method, request.parts[1:]
        if not rest:
            if method == "GET":
                return await self._list(request)
            if method == "POST":
                return await self._create(request)
            raise ScimError(405, f"{method} /Groups is not served: use GET or POST")
        if len(rest) != 1:
            raise ScimError(404, f"/Groups/{'/'.join(rest)} is no resource")
        group_id = rest[0]
        if method == "GET":
            members = not request.excluded_members()
            group = await self._people.group(group_id, with_members=members)
            return self._answer(200, group, request, with_members=members)
        if method == "PUT":
            return await self._write(
                request, group_id, lambda current: group_from_json(request.json(), group_id, current)
            )
        if method == "PATCH":
            message = request.json()
            return await self._write(
                request,
                group_id,
                lambda current: group_from_json(
                    apply_patch(group_json(current, request.base_url), message), group_id, current
                ),
            )
        if method == "DELETE":
            await self._people.delete_group(group_id, request.expected_version(), self._clock())
            return 204, None, []
        raise ScimError(405, f"{method} /Groups/{group_id} is not served: use GET, PUT, PATCH or DELETE")

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
            raise ScimError(
                409,
                f"displayName {group.display_name!r} or externalId {group.external_id!r} is taken",
                "uniqueness",
            ) from None
        return self._answer(201, made, request)

    async def _write(self, request: Request, group_id: str, change: Callable[[IdpGroup], IdpGroup]) -> Answer:
        expected = request.expected_version()
        for _ in range(_RETRIES):
            current = await self._people.group(group_id)
            if expected is not None and current.version != expected:
                raise ScimError(
                    412, f"Group {group_id} is at version {current.version}, not {expected}: read it again"
                )
            wanted = change(current)
            await self._check_members(wanted)
            try:
                saved = await self._people.save_group(wanted, current.version, self._clock())
            except StoreStale:
                if expected is not None:
                    raise ScimError(412, f"Group {group_id} changed meanwhile: read it again") from None
                continue
            except StoreConflict:
                raise ScimError(
                    409,
                    f"displayName {wanted.display_name!r} or externalId {wanted.external_id!r} is taken",
                    "uniqueness",
                ) from None
            return self._answer(200, saved, request)
        raise ScimError(409, f"Group {group_id} kept changing under this write: send it again")

    async def _check_members(self, group: IdpGroup) -> None:
        unknown = await self._people.unknown_people(group.members)
        if unknown:
            raise invalid_value(f"members {', '.join(unknown)} are not provisioned Users: create them first")

    def _answer(self, status: int, group: IdpGroup, request: Request, *, with_members: bool = True) -> Answer:
        return (
            status,
            group_json(group, request.base_url, with_members=with_members),
            [("etag", etag(group.version))],
        )
