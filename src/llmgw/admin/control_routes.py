"""The control plane's admin routes, under `/api/control` behind the admin token:

    GET     /api/control/nodes                 registered nodes and their inventory
    GET     /api/control/replicas              replicas, where they run and their phase
    GET     /api/control/models                each model: where it is defined, min/max,
                                               its replicas by phase
    GET     /api/control/models/<name>/explain why the model runs where it does (or not)
    POST    /api/control/models                add a model (body: its definition, YAML or JSON)
    PUT     /api/control/models/<name>         replace a model's whole definition
    DELETE  /api/control/models/<name>         remove a model
    POST    /api/control/models/<name>/scale   {"min": N, "max": M}
    POST    /api/control/models/<name>/update  {"source": S, "revision": R, "percent": P}:
                                               a candidate at new weights as its canary
    POST    /api/control/models/<name>/promote the candidate becomes the model
    POST    /api/control/models/<name>/rollback back to origin.previous
    GET     /api/control/leader                the lease: holder, term, expiry

`AdminApi` hands every request under `/api/control/` here with its raw body, since a
model definition may be YAML. Changes are validated by the catalog exactly as the
configuration is, written to the store, and applied to this process's control plane at
once; other servers pick them up within `control.interval` (`CatalogWatcher`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from llmgw.catalog import lifecycle
from llmgw.catalog.lifecycle import LifecycleError
from llmgw.catalog.quoting import q
from llmgw.config.values import NonNegativeInt
from llmgw.control.decisions.cluster import LIVE_PHASES, NodeView, ReplicaView
from llmgw.control.runtime.view import ControlView
from llmgw.core.problems import describe_validation_error
from llmgw.core.strict import Strict
from llmgw.errors import (
    AuthUnavailable,
    BadRequest,
    ConfigError,
    Conflict,
    MethodNotAllowed,
    NotFound,
    StoreConflict,
    StoreMissing,
    StoreUnavailable,
)
from llmgw.store.catalog_store import CatalogStore, RuntimeCatalog
from llmgw.store.lease import LeaderLease

Query = Mapping[str, str]
Answer = tuple[int, Any]
_GIB = 1024**3
_MAX_DEFINITION_BYTES = 1 << 20


class ScaleBody(Strict):
    min: NonNegativeInt
    max: NonNegativeInt


class UpdateBody(Strict):
    source: str
    revision: str = ""
    percent: int = lifecycle.DEFAULT_CANARY_PERCENT


EvalPassed = Callable[[str], bool | None]
"""A model's last eval result on this server: passed, failed, or None (none yet)."""


def node_json(node: NodeView) -> dict[str, Any]:
    inv = node.inventory
    return {
        "id": node.id,
        "status": node.status,
        "hostname": inv.hostname,
        "gpus": inv.gpu_classes(),
        "cpu_cores": inv.cpu_cores,
        "memory_gb": round(inv.memory_total_bytes / _GIB, 1),
        "disk_free_gb": round(inv.disk_free_bytes / _GIB, 1),
        "labels": dict(inv.labels),
        "engines": dict(inv.engines),
        "version": inv.llmgw_version,
        "cert_not_after": node.cert_not_after,
    }


def replica_json(replica: ReplicaView) -> dict[str, Any]:
    return {
        "id": replica.id,
        "model": replica.model,
        "profile": replica.profile,
        "phase": replica.phase,
        "since": replica.since,
        "nodes": [a.node_id for a in replica.assignments],
        "assignments": [
            {"node": a.node_id, "devices": list(a.devices), "cpu_cores": list(a.cpu_cores)}
            for a in replica.assignments
        ],
    }


def models_json(runtime: RuntimeCatalog, replicas: list[ReplicaView]) -> list[dict[str, Any]]:
    """Per model: its definition's origin and scaling (desired) beside its replicas by
    phase (actual); `live` counts those ordered, loading or serving."""
    phases: dict[str, Counter[str]] = {}
    for replica in replicas:
        phases.setdefault(replica.model, Counter())[replica.phase] += 1
    out = []
    for entry in runtime.layers:
        model = entry.model.normalized()
        running = phases.get(model.name, Counter())
        out.append(
            {
                "name": model.name,
                "origin": entry.origin,
                "class": model.effective_class,
                "min": model.scaling.min,
                "max": model.scaling.max,
                "live": sum(n for phase, n in running.items() if phase in LIVE_PHASES),
                "ready": running["ready"],
                "phases": dict(sorted(running.items())),
                "source": model.source,
                "canary": model.canary.model if model.canary is not None else None,
                "previous": model.origin.previous.source
                if model.origin is not None and model.origin.previous is not None
                else None,
                "updated_at": entry.updated_at,
                "updated_by": entry.updated_by or None,
            }
        )
    return out


class ControlRoutes:
    """The `/api/control` routes over one control plane, its catalog store and lease."""

    def __init__(self, view: ControlView, catalogs: CatalogStore, lease: LeaderLease) -> None:
        self._view = view
        self._catalogs = catalogs
        self._lease = lease
        self.eval_passed: EvalPassed = lambda name: None
        """Set by the server where a gateway keeps eval results beside this control plane."""

    async def handle(self, method: str, parts: list[str], query: Query, body: bytes) -> Answer:
        """One request below /api/control (`parts` are the path's segments after it)."""
        try:
            return await self._dispatch(method, parts, query, body)
        except ConfigError as exc:
            raise BadRequest("; ".join(exc.problems), code="invalid_model") from None
        except StoreMissing as exc:
            raise NotFound(str(exc), code="model_not_found") from None
        except StoreConflict as exc:
            raise Conflict(str(exc), code="model_exists") from None
        except LifecycleError as exc:
            raise Conflict(str(exc), code="model_lifecycle") from None
        except StoreUnavailable:
            raise AuthUnavailable("the store cannot be reached; try again shortly", retry_after=5) from None

    async def _dispatch(self, method: str, parts: list[str], query: Query, body: bytes) -> Answer:
        head, rest = (parts[0], parts[1:]) if parts else ("", [])
        if head == "nodes" and not rest:
            _only(method, "GET", "/api/control/nodes")
            return 200, {"data": [node_json(n) for n in self._view.nodes()]}
        if head == "replicas" and not rest:
            _only(method, "GET", "/api/control/replicas")
            return 200, {"data": [replica_json(r) for r in self._view.replicas()]}
        if head == "leader" and not rest:
            _only(method, "GET", "/api/control/leader")
            return 200, await self._leader()
        if head == "models":
            return await self._models(method, rest, query, body)
        raise NotFound(
            f"/api/control/{'/'.join(parts)} is not a control route: use nodes, replicas, models or leader",
            code="unknown_route",
        )

    async def _models(self, method: str, rest: list[str], query: Query, body: bytes) -> Answer:
        by = query.get("by") or "admin API"
        if not rest:
            if method == "GET":
                runtime = await self._catalogs.load()
                return 200, {"data": models_json(runtime, list(self._view.replicas()))}
            _only(method, "POST", "/api/control/models", also="GET")
            runtime = await self._catalogs.add(_text(body), by)
            return 201, self._applied(runtime, runtime.changed, "added")
        # Model names may hold slashes (org/model, as OpenAI-style names do), so the name
        # is every segment but an action's last; the method tells which route it is.
        if method == "GET" and len(rest) >= 2 and rest[-1] == "explain":
            return 200, self._explain("/".join(rest[:-1]))
        if method == "POST" and len(rest) >= 2 and rest[-1] == "scale":
            scale = _scale_body(body)
            name = "/".join(rest[:-1])
            runtime = await self._catalogs.scale(name, scale.min, scale.max, by)
            return 200, self._applied(runtime, name, "scaled")
        if method == "POST" and len(rest) >= 2 and rest[-1] in _LIFECYCLE:
            name = "/".join(rest[:-1])
            runtime = await self._catalogs.lifecycle(name, self._step(rest[-1], name, body), by)
            return 200, self._applied(runtime, name, _LIFECYCLE[rest[-1]])
        name = "/".join(rest)
        if method == "PUT":
            runtime = await self._catalogs.replace(name, _text(body), by)
            return 200, self._applied(runtime, name, "replaced")
        if method == "DELETE":
            runtime = await self._catalogs.remove(name, by)
            return 200, self._applied(runtime, name, "removed")
        raise MethodNotAllowed(
            f"/api/control/models/{name} takes PUT or DELETE (GET …/explain, POST …/scale, …/update, "
            "…/promote, …/rollback)"
        )

    def _step(self, action: str, name: str, body: bytes) -> Callable[[RuntimeCatalog], lifecycle.Changed]:
        """The lifecycle step `action` on `name`, over the catalog in force when it runs."""
        update = _update_body(body) if action == "update" else None

        def step(current: RuntimeCatalog) -> lifecycle.Changed:
            found = current.origin(name)
            assert found is not None  # the store checked it is there
            model = found.model
            if update is not None:
                return lifecycle.update(model, update.source, update.revision, update.percent)
            if action == "rollback":
                return lifecycle.rollback(model)
            candidate_name = model.canary.model if model.canary is not None else ""
            candidate = current.origin(candidate_name) if candidate_name else None
            return lifecycle.promote(
                model,
                candidate.model if candidate is not None else None,
                self.eval_passed(candidate_name) if candidate_name else None,
            )

        return step

    def _explain(self, name: str) -> dict[str, Any]:
        model = self._view.catalog.resolve(name)  # an alias explains its model
        if model is None:
            raise StoreMissing(
                f"model {q(name)} is not in the catalog the control plane runs; `llmgw ctl models` "
                "lists the models there are"
            )
        return {"model": model.name, "lines": list(self._view.explain(model.name))}

    def _applied(self, runtime: RuntimeCatalog, name: str, what: str) -> dict[str, Any]:
        self._view.replace_catalog(runtime.catalog)
        entry = runtime.origin(name)
        answer: dict[str, Any] = {"name": name, "result": what}
        if entry is not None:
            answer["model"] = models_json(
                RuntimeCatalog(runtime.catalog, (entry,)), list(self._view.replicas())
            )[0]
        return answer

    async def _leader(self) -> dict[str, Any]:
        status = await self._lease.table.read(self._lease.name)
        record = status.record
        return {
            "holder": record.holder if record is not None else None,
            "term": record.term if record is not None else None,
            "acquired_at": record.acquired_at if record is not None else None,
            "expires_at": record.expires_at if record is not None else None,
            "expires_in_s": round(record.expires_at - status.now, 3) if record is not None else None,
            "held": status.held,
            "this_server": self._lease.holder,
            "this_server_leads": self._lease.is_leader(),
            "ttl_s": self._lease.ttl.total_seconds(),
        }


def _only(method: str, allowed: str, route: str, also: str = "") -> None:
    if method != allowed:
        takes = f"{also} or {allowed}" if also else allowed
        raise MethodNotAllowed(f"{route} takes {takes}", allow=f"{also}, {allowed}" if also else allowed)


def _text(body: bytes) -> str:
    if not body.strip():
        raise BadRequest("the body is empty: send the model's definition, YAML or JSON")
    if len(body) > _MAX_DEFINITION_BYTES:
        raise BadRequest(f"the definition is {len(body)} bytes; a model definition fits in 1 MiB")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the definition is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


_LIFECYCLE = {"update": "updated", "promote": "promoted", "rollback": "rolled back"}


def _update_body(body: bytes) -> UpdateBody:
    try:
        data = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f'the body is not JSON: {exc}; send {{"source": S, "revision": R}}') from None
    try:
        return UpdateBody.model_validate(data)
    except ValidationError as exc:
        raise BadRequest("; ".join(describe_validation_error(exc, UpdateBody))) from None


def _scale_body(body: bytes) -> ScaleBody:
    try:
        data = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f'the body is not JSON: {exc}; send {{"min": N, "max": M}}') from None
    try:
        return ScaleBody.model_validate(data)
    except ValidationError as exc:
        raise BadRequest("; ".join(describe_validation_error(exc, ScaleBody))) from None
