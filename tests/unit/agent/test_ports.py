"""Ports and cores for replicas: lowest free first, never one another replica holds or
something else listens on, and a refusal that names the range and the fix."""

from __future__ import annotations

import socket

import pytest

from llmgw.agent.ports import allocate_ports, port_is_free, reserve_cores
from llmgw.errors import NoFreePort, ReplicaError


def _all_free(port: int) -> bool:
    return True


def test_ports_come_lowest_first() -> None:
    assert allocate_ports((20000, 20010), 3, set(), _all_free) == (20000, 20001, 20002)


def test_ports_held_by_replicas_are_skipped() -> None:
    assert allocate_ports((20000, 20010), 2, {20000, 20002}, _all_free) == (20001, 20003)


def test_ports_in_use_by_others_are_skipped() -> None:
    busy = {20001}
    assert allocate_ports((20000, 20010), 2, set(), lambda p: p not in busy) == (20000, 20002)


def test_a_full_range_is_refused_naming_the_range_and_the_fix() -> None:
    with pytest.raises(NoFreePort, match=r"\[20000, 20001\] has 1 free port\(s\).*needs 2: widen the range"):
        allocate_ports((20000, 20001), 2, {20000}, _all_free)


def test_no_ports_needed_is_no_ports() -> None:
    assert allocate_ports((20000, 20000), 0, {20000}, _all_free) == ()


def test_a_listening_port_is_not_free_and_a_closed_one_is() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not port_is_free(port)
    assert port_is_free(port)


def test_cores_are_the_lowest_not_reserved() -> None:
    assert reserve_cores(range(8), 2, {0, 2}) == (1, 3)
    assert reserve_cores([5, 3, 9], 1, set()) == (3,)
    assert reserve_cores(range(4), 0, set()) == ()


def test_too_few_cores_is_refused_with_the_fix() -> None:
    with pytest.raises(ReplicaError, match=r"reserves 3 cores and this node has 2 not reserved.*lower"):
        reserve_cores(range(4), 3, {0, 1})
