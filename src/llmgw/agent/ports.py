"""Ports and cores for replicas on this node: what a replica gets when the control plane
leaves the choice to the agent.

Ports come from the node's `control.port_range`, lowest first, skipping those another
replica of this agent holds and those something else listens on right now. Cores for a
CPU profile are the lowest-numbered ones this agent may use that no other replica has
reserved. The choices are pure functions; `port_is_free` is the one probe of the
machine, passed in so tests decide what is taken.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Collection, Iterable

from llmgw.errors import NoFreePort, ReplicaError

PortProbe = Callable[[int], bool]
"""Whether nothing listens on a port right now."""


def allocate_ports(
    port_range: tuple[int, int], count: int, taken: Collection[int], is_free: PortProbe
) -> tuple[int, ...]:
    """`count` ports of the inclusive `port_range`, lowest first, none of them in `taken`
    and each passing `is_free`. Raises NoFreePort naming the range and the fix."""
    if count <= 0:
        return ()
    first, last = port_range
    chosen: list[int] = []
    for port in range(first, last + 1):
        if port in taken or not is_free(port):
            continue
        chosen.append(port)
        if len(chosen) == count:
            return tuple(chosen)
    raise NoFreePort(
        f"control.port_range [{first}, {last}] has {len(chosen)} free port(s) on this node and the replica"
        f" needs {count}: widen the range or stop a replica"
    )


def port_is_free(port: int, host: str = "0.0.0.0") -> bool:
    """Whether `port` can be bound on `host` now. Binding the wildcard address also fails
    where something listens on one address only, which is the conflict that matters."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def reserve_cores(available: Iterable[int], count: int, taken: Collection[int]) -> tuple[int, ...]:
    """`count` of the `available` cores, lowest first, none of them in `taken`. Raises
    ReplicaError when too few are left."""
    if count <= 0:
        return ()
    free = sorted(core for core in set(available) if core not in taken)
    if len(free) < count:
        raise ReplicaError(
            f"the profile reserves {count} cores and this node has {len(free)} not reserved by other"
            " replicas: lower the profile's cpu_cores or stop a CPU replica"
        )
    return tuple(free[:count])
