"""What an adopted replica holds on its node.

A control plane that restarted learns of running replicas from their agents'
registrations, which say which model and profile each serves but not which cards or
cores it was given (the protocol does not repeat them). Placement must still count them
as taken, or it would hand the same card to a new replica. The agent gives a CPU
profile the lowest cores no other replica of its holds, and placement hands out cards
in the node's order, so the same first-fit rule over what the node's other replicas
hold reconstructs the assignment, or one of the same size where the history differs.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmgw.catalog import Profile
from llmgw.control.decisions.cluster import Assignment
from llmgw.protocol.inventory import Inventory


def adopted_assignment(
    node_id: str,
    inventory: Inventory,
    profile: Profile | None,
    others: Iterable[Assignment],
) -> Assignment:
    """The devices and cores `profile` would hold on the node given what `others`
    (the node's other replicas) hold; nothing at all for an unknown profile."""
    if profile is None:
        return Assignment(node_id)
    taken_devices: set[str] = set()
    taken_cores: set[int] = set()
    for other in others:
        taken_devices.update(other.devices)
        taken_cores.update(other.cpu_cores)
    devices: tuple[str, ...] = ()
    if profile.gpus_per_node > 0 and profile.gpu_class:
        free = [
            d.visible_id
            for d in inventory.devices()
            if d.gpu_class == profile.gpu_class and d.visible_id not in taken_devices
        ]
        devices = tuple(free[: profile.gpus_per_node])
    cores: tuple[int, ...] = ()
    if profile.cpu_only and profile.cpu_cores > 0:
        free_cores = [c for c in range(inventory.cpu_cores) if c not in taken_cores]
        cores = tuple(free_cores[: profile.cpu_cores])
    return Assignment(node_id, devices, cores)
