"""What /Users and /Groups share: which method on which path does what, and the write
that reads a resource, changes it and saves it under the version read.

A write with If-Match must find that version (412 otherwise); one without it reads,
changes and saves, and reads again when another write came in between, a few times at
most. The resource's own rules (what a write must check, what a conflict is called, who
is told after) are the subclass's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from llmgw.errors import StoreConflict, StoreStale
from llmgw.identity.scim.errors import ScimError
from llmgw.identity.scim.patch import apply_patch
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.resources import etag

Answer = tuple[int, Any, list[tuple[str, str]]]
# How many times a write without If-Match reads again after losing a race.
_RETRIES = 3


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


R = TypeVar("R", bound=Versioned)


class ResourceRoutes(ABC, Generic[R]):
    """One SCIM resource type's routes: GET and POST on the collection; GET, PUT, PATCH
    and DELETE on one resource."""

    collection: str
    """The path's name, "Users" or "Groups"."""
    singular: str
    """A resource's name in messages, "User" or "Group"."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock

    async def handle(self, request: Request) -> Answer:
        method, rest = request.method, request.parts[1:]
        if not rest:
            if method == "GET":
                return await self._list(request)
            if method == "POST":
                return await self._create(request)
            raise ScimError(405, f"{method} /{self.collection} is not served: use GET or POST")
        if len(rest) != 1:
            raise ScimError(404, f"/{self.collection}/{'/'.join(rest)} is no resource")
        resource_id = rest[0]
        if method == "GET":
            return await self._get(request, resource_id)
        if method == "PUT":
            return await self._write(
                request, resource_id, lambda current: self._from_json(request.json(), current)
            )
        if method == "PATCH":
            message = request.json()
            return await self._write(
                request,
                resource_id,
                lambda current: self._from_json(apply_patch(self._json(current, request), message), current),
            )
        if method == "DELETE":
            await self._delete(request, resource_id)
            return 204, None, []
        raise ScimError(
            405, f"{method} /{self.collection}/{resource_id} is not served: use GET, PUT, PATCH or DELETE"
        )

    async def _write(self, request: Request, resource_id: str, change: Callable[[R], R]) -> Answer:
        expected = request.expected_version()
        name = f"{self.singular} {resource_id}"
        for _ in range(_RETRIES):
            current = await self._read(resource_id)
            if expected is not None and current.version != expected:
                raise ScimError(412, f"{name} is at version {current.version}, not {expected}: read it again")
            wanted = change(current)
            await self._check(wanted, current)
            try:
                saved = await self._save(wanted, current.version)
            except StoreStale:
                if expected is not None:
                    raise ScimError(412, f"{name} changed meanwhile: read it again") from None
                continue
            except StoreConflict:
                raise ScimError(409, self._taken(wanted), "uniqueness") from None
            await self._saved(saved, current)
            return self._answer(200, saved, request)
        raise ScimError(409, f"{name} kept changing under this write: send it again")

    def _answer(self, status: int, resource: R, request: Request) -> Answer:
        return status, self._json(resource, request), [("etag", etag(resource.version))]

    @abstractmethod
    async def _list(self, request: Request) -> Answer: ...

    @abstractmethod
    async def _create(self, request: Request) -> Answer: ...

    @abstractmethod
    async def _get(self, request: Request, resource_id: str) -> Answer: ...

    @abstractmethod
    async def _delete(self, request: Request, resource_id: str) -> None: ...

    @abstractmethod
    async def _read(self, resource_id: str) -> R:
        """The resource as stored now; ScimError 404 when there is none."""

    @abstractmethod
    async def _save(self, wanted: R, version: int) -> R:
        """Saves `wanted` over `version`: StoreStale when another write came first,
        StoreConflict when a unique name is taken."""

    @abstractmethod
    def _from_json(self, body: Any, current: R) -> R:
        """The resource a PUT body (or a patched resource's JSON) describes."""

    @abstractmethod
    def _json(self, resource: R, request: Request) -> Any:
        """The resource as SCIM JSON."""

    @abstractmethod
    def _taken(self, wanted: R) -> str:
        """The 409 message when a unique attribute of `wanted` belongs to another."""

    async def _check(self, wanted: R, current: R) -> None:
        """Refuses a write the resource's rules forbid (ScimError); nothing by default."""

    async def _saved(self, saved: R, current: R) -> None:
        """Told after a write is saved; nothing by default."""
