"""Refusals' usage records are bounded per caller and in all per hand-over; refusals
without a caller are counted, never recorded."""

from __future__ import annotations

from llmgw.auth.principal import Principal
from llmgw.auth.refusals import RefusalLog


def caller(key_id: str) -> Principal:
    return Principal(key_id, "project", "p", "t", "o", None, None, None, None, None, (), (), ("project:p",))


def test_refusals_are_kept_within_bounds_and_the_rest_counted() -> None:
    log = RefusalLog(per_caller=3, total=5)
    loud, quiet = caller("loud"), caller("quiet")
    for i in range(10):
        log.add(loud, 429, f"l{i}", 1.0, 1.0)
    log.add(quiet, 404, "q", 1.0, 1.0)
    log.add(None, 401, "anon", 1.0, 1.0)
    kept = log.take()
    assert [(r.request_id, r.status) for r, tokens in kept] == [
        ("l0", 429),
        ("l1", 429),
        ("l2", 429),
        ("q", 404),
    ]
    assert all(tokens is None for _, tokens in kept)
    assert all(r.account is not None and r.account[0].key_id in ("loud", "quiet") for r, _ in kept)
    assert (log.unrecorded, log.anonymous) == (7, 1)
    # A hand-over starts the bounds afresh; the total bounds every caller together.
    for name in ("a", "b", "c"):
        for i in range(3):
            log.add(caller(name), 429, f"{name}{i}", 2.0, 2.0)
    assert len(log.take()) == 5
    assert log.unrecorded == 11
    assert log.take() == []
