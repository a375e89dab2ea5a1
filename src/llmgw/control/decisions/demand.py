"""Demand seen by every server, merged into the one the leader plans with.

Each server's router knows only its own requests: when each model was last asked for,
and whether a request waits for a model that has no replica. The leader alone places
work, so each server reports what its router saw (`Asked`) through the store
(`llmgw.control.tables.demand_table`), and the leader folds every other server's report into
its own (`merge_demand`).

A report from a server silent for longer than `silent_after` is ignored: that server is
gone (or cut off), so its requests no longer wait and it can ask for nothing more. A
reported wait counts only for `wait_limit` (`router.activation_wait`) from when it began,
as the request gives up then.

Everything here is a pure function of its arguments; times are seconds on one clock, the
caller's (the store's times are shifted onto it by `on_local_clock` first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from llmgw.control.decisions.cluster import ModelDemand


@dataclass(frozen=True, slots=True)
class Asked:
    """What one server's router saw of one model: when it was last asked for, and since
    when a request has waited for it to start (None: none waits now)."""

    last_asked: float | None = None
    waiting_since: float | None = None


@dataclass(frozen=True, slots=True)
class ServerDemand:
    """One row of the store: one server's report on one model, `updated_at` being when
    that server last said it was alive."""

    model: str
    holder: str
    asked: Asked
    updated_at: float


def on_local_clock(rows: Iterable[ServerDemand], store_now: float, local_now: float) -> list[ServerDemand]:
    """The rows with their times moved from the store's clock onto the local one, given
    one reading of both clocks taken together. Every server writes in the store's
    clock, so servers whose own clocks disagree still compare correctly."""
    shift = local_now - store_now

    def moved(at: float | None) -> float | None:
        return None if at is None else at + shift

    return [
        replace(
            row,
            asked=Asked(moved(row.asked.last_asked), moved(row.asked.waiting_since)),
            updated_at=row.updated_at + shift,
        )
        for row in rows
    ]


def merge_demand(
    local: Mapping[str, ModelDemand],
    others: Iterable[ServerDemand],
    *,
    now: float,
    silent_after: float,
    wait_limit: float,
) -> dict[str, ModelDemand]:
    """This server's demand with the other servers' reports folded in: a model waits
    when it waits here or a living server's request has waited for it less than
    `wait_limit`; it was last asked for at the latest time any living server saw (a
    wait counts as an ask)."""
    merged = dict(local)
    for row in others:
        if now - row.updated_at > silent_after:
            continue
        asked = row.asked
        waits = asked.waiting_since is not None and now - asked.waiting_since < wait_limit
        mine = merged.get(row.model, ModelDemand())
        times = [t for t in (mine.last_request_at, asked.last_asked, asked.waiting_since) if t is not None]
        merged[row.model] = ModelDemand(
            waiting=mine.waiting or waits, last_request_at=max(times) if times else None
        )
    return merged


def changed_reports(
    now: Mapping[str, Asked], written: Mapping[str, Asked], resolution: float
) -> tuple[dict[str, Asked], list[str]]:
    """What a server must write to make its rows say `now`, given what it last wrote:
    the models whose report is new or differs, and the models it no longer reports.

    A time that moved by less than `resolution` is not a change: a model asked for all
    the time is then written once per `resolution`, not at every request, and the small
    drift of converting between clocks is never written at all."""
    changed = {
        model: asked
        for model, asked in now.items()
        if model not in written or _differs(asked, written[model], resolution)
    }
    gone = sorted(set(written) - set(now))
    return changed, gone


def _differs(a: Asked, b: Asked, resolution: float) -> bool:
    return _moved(a.last_asked, b.last_asked, resolution) or _moved(
        a.waiting_since, b.waiting_since, resolution
    )


def _moved(a: float | None, b: float | None, resolution: float) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) >= resolution
