"""What a node has, as its agent reports it at registration and on every refresh: cards,
cores, memory, disk where weights live, labels, installed engines, weights on disk.

These models travel over the agent protocol as JSON, so every quantity carries its unit
in its name and nothing here is computed from the machine: `discovery` fills them in.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import Field

from llmgw.core.strict import Strict


class MigDevice(Strict):
    """A MIG instance: to CUDA a device of its own, opened by UUID, and to placement a
    class of its own (`a100-40g-mig-3g.20gb`)."""

    uuid: str
    profile: str
    """NVIDIA's profile name, as `nvidia-smi -L` prints it: `3g.20gb`, `1g.10gb+me`."""
    gpu_class: str
    memory_gb: int
    """The instance's memory, read from its profile name."""
    device: int
    """Its number among its card's instances ("Device N" in `nvidia-smi -L`)."""


class GPU(Strict):
    """One physical card."""

    index: int
    """nvidia-smi's number for the card, in PCI bus order."""
    uuid: str
    name: str
    """The card's name as the driver gives it: "NVIDIA H100 80GB HBM3"."""
    gpu_class: str
    memory_mib: int
    power_limit_watts: float | None = None
    """The enforced power cap; None where the card does not report one."""
    power_draw_watts: float | None = None
    """What it drew when discovery last looked."""
    mig_enabled: bool = False
    """In MIG mode the card is only its instances: a replica cannot have it whole."""
    mig_devices: tuple[MigDevice, ...] = ()


class Device(Strict):
    """One thing placement can give a replica: a whole card, or one MIG instance."""

    gpu_class: str
    visible_id: str
    """What `CUDA_VISIBLE_DEVICES` names it by: the card's index, or the instance's UUID."""
    card_index: int


class WeightsEntry(Strict):
    """A file or directory directly under the weights directory."""

    name: str
    size_bytes: int
    kind: Literal["file", "dir"]


class Inventory(Strict):
    """A node's report of itself."""

    hostname: str
    llmgw_version: str
    cpu_cores: int
    """Cores this agent may use (its CPU affinity), not every core of the machine."""
    memory_total_bytes: int
    memory_available_bytes: int
    weights_dir: str
    disk_free_bytes: int
    """Free space on the file system holding weights_dir."""
    disk_total_bytes: int
    gpus: tuple[GPU, ...] = ()
    gpu_error: str = ""
    """Why the cards could not be read (a driver that does not answer), so a node that
    should have cards and reports none says why. Empty when there are none to read."""
    labels: dict[str, str] = Field(default_factory=dict)
    engines: dict[str, str] = Field(default_factory=dict)
    """Engine to installed version, for every engine found."""
    weights: tuple[WeightsEntry, ...] = ()

    def devices(self) -> tuple[Device, ...]:
        """Every card or MIG instance a replica can be given, in nvidia-smi's order."""
        out: list[Device] = []
        for gpu in self.gpus:
            if not gpu.mig_enabled:
                out.append(Device(gpu_class=gpu.gpu_class, visible_id=str(gpu.index), card_index=gpu.index))
                continue
            out.extend(
                Device(gpu_class=mig.gpu_class, visible_id=mig.uuid, card_index=gpu.index)
                for mig in gpu.mig_devices
            )
        return tuple(out)

    def gpu_classes(self) -> dict[str, int]:
        """How many devices of each class the node has."""
        return dict(Counter(device.gpu_class for device in self.devices()))
