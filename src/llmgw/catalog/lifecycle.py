"""A model's weights update as three catalog edits (`llmgw ctl model update / promote /
rollback`), each a pure function from the models in force to the models to keep:

    update M --source NEW    adds the candidate `M@candidate` (M's definition at NEW) and
                             points M's canary at it, so the router sends it a share
    promote M                M takes the candidate's source; the old one is kept in
                             `origin.previous`; the canary and the candidate go
    rollback M               M goes back to `origin.previous`, which is then spent

Each refuses with a LifecycleError, one sentence, when it cannot apply; applied twice,
the second is refused (promote, rollback) or changes nothing (update), so a retried
command never moves a model twice. The whole state lives in the definitions, so the
store keeps it across restarts and leader changes with nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgw.catalog.model import Model
from llmgw.catalog.parts import Canary, Origin, PreviousOrigin
from llmgw.catalog.quoting import q

CANDIDATE_SUFFIX = "@candidate"
DEFAULT_CANARY_PERCENT = 10


class LifecycleError(Exception):
    """An update, promote or rollback that cannot apply; the message says why and what to do."""


@dataclass(frozen=True)
class Changed:
    """The definitions to write (by name) and the names to drop."""

    write: tuple[Model, ...]
    drop: tuple[str, ...] = ()


def candidate_name(name: str) -> str:
    return name + CANDIDATE_SUFFIX


def update(model: Model, source: str, revision: str, percent: int) -> Changed:
    """M with a canary at `percent` % on the candidate, and the candidate itself."""
    if not source:
        raise LifecycleError("--source is empty: give the new weights (a mirror path or a Hugging Face id)")
    if not 0 <= percent <= 100:
        raise LifecycleError(f"--percent {percent} is not between 0 and 100")
    if model.external is not None or not model.profiles:
        raise LifecycleError(
            f"model {q(model.name)} is not placed by the control plane (external or static); it has no "
            "weights to update"
        )
    if any(p.source for p in model.profiles):
        raise LifecycleError(
            f"model {q(model.name)} has profiles naming their own source; change them with "
            f"`llmgw ctl model edit {model.name} FILE`"
        )
    if source == model.source and (not revision or revision == _revision(model)):
        raise LifecycleError(f"model {q(model.name)} serves {source} already; there is nothing to update")
    candidate = candidate_name(model.name)
    if model.canary is not None and model.canary.model not in ("", candidate):
        raise LifecycleError(
            f"model {q(model.name)} has canary {q(model.canary.model)} already; promote it or edit the "
            "model without it first"
        )
    origin = model.origin or Origin()
    new = model.model_copy(
        update={
            "name": candidate,
            "aliases": (),
            "canary": None,
            "fallbacks": (),
            "source": source,
            "origin": origin.model_copy(update={"revision": revision, "files": (), "previous": None})
            if revision or model.origin is not None
            else None,
        }
    )
    canary = (model.canary or Canary()).model_copy(update={"model": candidate, "percent": percent})
    return Changed((model.model_copy(update={"canary": canary}), new))


def promote(model: Model, candidate: Model | None, passed: bool | None) -> Changed:
    """M at the candidate's source, the old one in origin.previous; `passed` is the
    candidate's last eval result under its gate (None: no gate, or no result)."""
    if model.canary is None or not model.canary.model or candidate is None:
        raise LifecycleError(
            f"model {q(model.name)} has no candidate to promote (already promoted, or none started): "
            f"start one with `llmgw ctl model update {model.name} --source NEW`"
        )
    gate = candidate.eval or model.eval
    if gate is not None and passed is not True:
        why = "failed its eval" if passed is False else "has no eval result"
        raise LifecycleError(
            f"candidate {q(candidate.name)} {why} ({gate.suite or 'the gate'}); run "
            f"`llmgw ctl eval {candidate.name}` and promote once it passes"
        )
    old = model.origin or Origin()
    previous = PreviousOrigin(source=model.source, revision=old.revision, files=old.files)
    new_origin = (candidate.origin or old).model_copy(update={"previous": previous})
    promoted = model.model_copy(update={"source": candidate.source, "origin": new_origin, "canary": None})
    return Changed((promoted,), (candidate.name,))


def rollback(model: Model) -> Changed:
    """M back at origin.previous, which is then spent: a second rollback is refused."""
    previous = model.origin.previous if model.origin is not None else None
    if previous is None or not previous.source:
        raise LifecycleError(
            f"model {q(model.name)} has no previous source to roll back to (already rolled back, or "
            "never promoted)"
        )
    assert model.origin is not None
    origin = model.origin.model_copy(
        update={"revision": previous.revision, "files": previous.files, "previous": None}
    )
    return Changed((model.model_copy(update={"source": previous.source, "origin": origin}),))


def _revision(model: Model) -> str:
    return model.origin.revision if model.origin is not None else ""
