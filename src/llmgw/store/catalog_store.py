"""The runtime catalog: model definitions kept in the store, laid over the configuration's
`models:` by name.

A stored definition adds a model, or replaces the configuration's model of that name; a
stored tombstone (no definition) removes the configuration's model. The catalog in force
is always `Catalog.build` over the merged list, with the configuration's static
endpoints, so a model changed at runtime is held to exactly the rules, and refused with
exactly the sentences, of one written in the file.

Every change is validated against the whole merged catalog *before* it is written, in
the same transaction that reads the current entries: a definition the catalog refuses
never reaches the store, and removing a model another one falls back to is refused like
a dangling fallback in the file. On PostgreSQL an advisory lock makes concurrent
changes (from any server) take turns, so two changes that are each valid alone cannot
both land and leave an invalid catalog behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from llmgw.catalog import Catalog, Model
from llmgw.catalog.lifecycle import Changed
from llmgw.catalog.quoting import q
from llmgw.config import Settings
from llmgw.core.problems import describe_validation_error
from llmgw.core.yamlio import dump_yaml, load_yaml
from llmgw.errors import CatalogError, ConfigError, StoreConflict, StoreMissing
from llmgw.store import Store, schema
from llmgw.store.engine import transaction, upsert

_ROWS = schema.catalog_models
# Any constant of our own; catalog changes from every server take turns on it.
_PG_CATALOG_LOCK = 0x6C6C6D6763
# Far above a double's resolution at today's UNIX times (about 2e-7 s), and far below
# anything a person would read as a different time.
_STAMP_STEP_S = 0.001

Origin = Literal["config", "store", "store over config"]


@dataclass(frozen=True)
class StoredModel:
    """One row: a definition as written, or a tombstone (`definition` None)."""

    name: str
    definition: str | None
    updated_at: float
    updated_by: str

    @property
    def tombstone(self) -> bool:
        return self.definition is None


@dataclass(frozen=True)
class LayeredModel:
    """A model of the merged catalog and where its definition comes from."""

    model: Model
    origin: Origin
    updated_at: float | None = None
    updated_by: str = ""


def parse_definition(text: str) -> Model:
    """A model definition (YAML or JSON) as a `Model`; CatalogError with every problem,
    each naming its field the way the configuration's loader does."""
    document = load_yaml(text, "the model definition")
    if not isinstance(document, dict):
        raise CatalogError(
            ["the model definition must be a mapping of its fields (name:, source:, profiles:…)"]
        )
    try:
        model = Model.model_validate(document)
    except ValidationError as exc:
        raise CatalogError(describe_validation_error(exc, Model)) from None
    if not model.name:
        raise CatalogError(["name: is required: give the name clients will ask for"])
    return model


def definition_text(model: Model) -> str:
    """A model written back as YAML, fields left at their defaults omitted (as
    `llmgw config effective` writes them): what `scale` stores for a model it changed."""
    return dump_yaml(model.model_dump(mode="json", exclude_defaults=True, exclude_none=True, by_alias=True))


def layer(configured: Sequence[Model], stored: Iterable[StoredModel]) -> list[LayeredModel]:
    """The configuration's models with the store's entries laid over them by name:
    replacements keep the configured model's place, removals drop it, additions follow
    in name order. A stored definition that no longer parses is a CatalogError naming it."""
    by_name = {entry.name: entry for entry in stored}
    problems: list[str] = []
    out: list[LayeredModel] = []

    def parsed(entry: StoredModel) -> Model | None:
        assert entry.definition is not None
        try:
            return parse_definition(entry.definition)
        except ConfigError as exc:
            problems.extend(f"stored model {q(entry.name)}: {p}" for p in exc.problems)
            return None

    for model in configured:
        entry = by_name.pop(model.name, None)
        if entry is None:
            out.append(LayeredModel(model, "config"))
        elif not entry.tombstone and (found := parsed(entry)) is not None:
            out.append(LayeredModel(found, "store over config", entry.updated_at, entry.updated_by))
    for name in sorted(by_name):
        entry = by_name[name]
        if not entry.tombstone and (found := parsed(entry)) is not None:
            out.append(LayeredModel(found, "store", entry.updated_at, entry.updated_by))
    if problems:
        raise CatalogError(problems)
    return out


def served_statically(settings: Settings) -> set[str]:
    """The model names the configuration's static endpoints serve."""
    return {name for endpoint in settings.endpoints for name in endpoint.models}


@dataclass(frozen=True)
class RuntimeCatalog:
    """The catalog in force and where each of its models comes from."""

    catalog: Catalog
    layers: tuple[LayeredModel, ...]
    changed: str = ""
    """The model a change was about, when this is the result of one."""

    def origin(self, name: str) -> LayeredModel | None:
        for entry in self.layers:
            if entry.model.name == name:
                return entry
        return None


def _row(row: sa.Row[Any]) -> StoredModel:
    return StoredModel(
        name=str(row.name),
        definition=None if row.definition is None else str(row.definition),
        updated_at=float(row.updated_at),
        updated_by=str(row.updated_by),
    )


class CatalogStore:
    """Reads and changes the runtime catalog. `clock` gives `updated_at` (UNIX seconds)."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self._engine = store.engine
        self._configured = settings.models
        self._static = served_statically(settings)
        self._clock = clock
        # SQLite has no advisory lock; its writers are one process in practice (the
        # embedded default), and this lock orders that process's own changes.
        self._local = asyncio.Lock()

    def build(self, stored: Iterable[StoredModel]) -> RuntimeCatalog:
        """The catalog the configuration and these entries make; CatalogError if refused."""
        layers = layer(self._configured, stored)
        catalog = Catalog.build([entry.model for entry in layers], served_statically=self._static)
        return RuntimeCatalog(catalog, tuple(layers))

    async def entries(self) -> list[StoredModel]:
        async with transaction(self._engine) as conn:
            return await _entries(conn)

    async def load(self) -> RuntimeCatalog:
        """The catalog in force now."""
        return self.build(await self.entries())

    async def version(self) -> tuple[int, float | None]:
        """What names the table's content: the row count (a store-only model's removal
        deletes its row) and the latest `updated_at` (every other change; see `next_stamp`)."""
        async with transaction(self._engine) as conn:
            result = await conn.execute(sa.select(sa.func.count(), sa.func.max(_ROWS.c.updated_at)))
            count, latest = result.one()
        return int(count), None if latest is None else float(latest)

    async def add(self, text: str, by: str) -> RuntimeCatalog:
        """Adds a model; StoreConflict when one of that name is in force already."""
        model = parse_definition(text)

        def change(current: RuntimeCatalog, now: float) -> StoredModel | None:
            if current.origin(model.name) is not None:
                raise StoreConflict(
                    f"model {q(model.name)} exists already; change it with `llmgw ctl model edit "
                    f"{model.name} FILE`, or give the new one another name"
                )
            return StoredModel(model.name, text, now, by)

        return await self._change(model.name, change)

    async def replace(self, name: str, text: str, by: str) -> RuntimeCatalog:
        """Replaces a model's whole definition; StoreMissing when none of that name is in force."""
        model = parse_definition(text)
        if model.name != name:
            raise CatalogError(
                [
                    f"name: {q(model.name)} differs from the model being edited, {q(name)}; a model "
                    "cannot be renamed by editing: add the new name and remove the old one"
                ]
            )

        def change(current: RuntimeCatalog, now: float) -> StoredModel | None:
            _require(current, name)
            return StoredModel(name, text, now, by)

        return await self._change(name, change)

    async def remove(self, name: str, by: str) -> RuntimeCatalog:
        """Removes a model: a store-only model's row goes, a configured model gets a tombstone."""

        def change(current: RuntimeCatalog, now: float) -> StoredModel | None:
            found = _require(current, name)
            if found.origin == "store":
                return None
            return StoredModel(name, None, now, by)

        return await self._change(name, change)

    async def scale(self, name: str, minimum: int, maximum: int, by: str) -> RuntimeCatalog:
        """Sets a model's scaling.min and scaling.max, keeping the rest of its definition."""

        def change(current: RuntimeCatalog, now: float) -> StoredModel | None:
            found = _require(current, name)
            scaling = found.model.scaling.model_copy(update={"min": minimum, "max": maximum})
            changed = found.model.model_copy(update={"scaling": scaling})
            return StoredModel(name, definition_text(changed), now, by)

        return await self._change(name, change)

    async def lifecycle(
        self, name: str, step: Callable[[RuntimeCatalog], Changed], by: str
    ) -> RuntimeCatalog:
        """An update, promote or rollback of `name` (llmgw.catalog.lifecycle): `step` reads
        the catalog in force and says which definitions to write and which to drop; all of
        them land in one transaction, or none."""

        def change(current: RuntimeCatalog, now: float) -> dict[str, StoredModel | None]:
            _require(current, name)
            changed = step(current)
            rows: dict[str, StoredModel | None] = {}
            for model in changed.write:
                rows[model.name] = StoredModel(model.name, definition_text(model), now, by)
            for dropped in changed.drop:
                found = current.origin(dropped)
                # A configured model is dropped with a tombstone, a stored one by deleting its row.
                rows[dropped] = (
                    None if found is None or found.origin == "store" else StoredModel(dropped, None, now, by)
                )
            return rows

        return await self._change_rows(name, change)

    async def _change(
        self,
        name: str,
        change: Callable[[RuntimeCatalog, float], StoredModel | None],
    ) -> RuntimeCatalog:
        """One row's change: `change` gives the new row for `name`, or None to delete it."""
        return await self._change_rows(name, lambda current, now: {name: change(current, now)})

    async def _change_rows(
        self,
        name: str,
        change: Callable[[RuntimeCatalog, float], dict[str, StoredModel | None]],
    ) -> RuntimeCatalog:
        """Reads the entries, applies `change` (per name, the new row, or None to delete
        it), validates the result and writes it, all in one transaction."""
        async with self._local, transaction(self._engine) as conn:
            if conn.dialect.name == "postgresql":
                await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _PG_CATALOG_LOCK})
            stored = {entry.name: entry for entry in await _entries(conn)}
            current = self.build(stored.values())
            rows = change(current, next_stamp(self._clock(), stored.values()))
            proposed = dict(stored)
            for row_name, row in rows.items():
                if row is None:
                    proposed.pop(row_name, None)
                else:
                    proposed[row_name] = row
            result = dataclasses.replace(self.build(proposed.values()), changed=name)  # refuses first
            for row_name, row in rows.items():
                if row is None:
                    await conn.execute(_ROWS.delete().where(_ROWS.c.name == row_name))
                    continue
                insert = upsert(conn, _ROWS).values(
                    name=row.name,
                    definition=row.definition,
                    updated_at=row.updated_at,
                    updated_by=row.updated_by,
                )
                await conn.execute(
                    insert.on_conflict_do_update(
                        index_elements=["name"],
                        set_={
                            "definition": insert.excluded.definition,
                            "updated_at": insert.excluded.updated_at,
                            "updated_by": insert.excluded.updated_by,
                        },
                    )
                )
        return result


def next_stamp(now: float, stored: Iterable[StoredModel]) -> float:
    """`updated_at` for a write: the clock, but always after every stamp already there.
    Strictly growing stamps make (row count, latest stamp) name the table's content, so a
    watcher cannot mistake a changed table for the one it saw, even when the servers'
    clocks disagree."""
    latest = max((entry.updated_at for entry in stored), default=None)
    return now if latest is None or now > latest else latest + _STAMP_STEP_S


def _require(current: RuntimeCatalog, name: str) -> LayeredModel:
    found = current.origin(name)
    if found is None:
        raise StoreMissing(
            f"model {q(name)} is not in the catalog; `llmgw ctl models` lists the models there are"
        )
    return found


async def _entries(conn: AsyncConnection) -> list[StoredModel]:
    rows = await conn.execute(_ROWS.select().order_by(_ROWS.c.name))
    return [_row(row) for row in rows]
