"""A node's inventory: the devices placement can hand out, and the JSON it travels as."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from llmgw.agent.gpu_smi import gpus_from
from llmgw.protocol.inventory import Device, Inventory

FIXTURES = Path(__file__).parent / "fixtures"


def _inventory(machine: str) -> Inventory:
    gpus = gpus_from(
        (FIXTURES / f"nvidia-smi-{machine}-query.txt").read_text(),
        (FIXTURES / f"nvidia-smi-{machine}-list.txt").read_text(),
    )
    return Inventory(
        hostname="n1",
        llmgw_version="0.1.0",
        cpu_cores=64,
        memory_total_bytes=1 << 40,
        memory_available_bytes=1 << 39,
        weights_dir="/var/lib/llmgw/weights",
        disk_free_bytes=1 << 41,
        disk_total_bytes=1 << 42,
        gpus=gpus,
        labels={"llmgw.io/rack": "r1"},
        engines={"vllm": "0.30.0", "sim": "0.1.0"},
    )


def test_a_card_in_mig_mode_is_only_its_instances() -> None:
    inventory = _inventory("2xa100-mig")
    devices = inventory.devices()
    assert [d.gpu_class for d in devices] == [
        "a100-40g-mig-3g.20gb",
        "a100-40g-mig-2g.10gb",
        "a100-40g-mig-1g.5gb",
        "a100-40g-mig-1g.5gb",
        "a100-40g",
    ]
    # CUDA opens an instance by its UUID only; a whole card by its index.
    assert all(d.visible_id.startswith("MIG-") for d in devices[:4])
    assert devices[4] == Device(gpu_class="a100-40g", visible_id="1", card_index=1)
    assert inventory.gpu_classes() == {
        "a100-40g-mig-3g.20gb": 1,
        "a100-40g-mig-2g.10gb": 1,
        "a100-40g-mig-1g.5gb": 2,
        "a100-40g": 1,
    }


def test_mixed_cards_count_by_class() -> None:
    assert _inventory("mixed-l4-rtx4090").gpu_classes() == {"l4-24g": 2, "rtx4090-24g": 1}


@pytest.mark.parametrize("machine", ["8xh100", "2xa100-mig", "mixed-l4-rtx4090"])
def test_json_round_trip(machine: str) -> None:
    inventory = _inventory(machine)
    assert Inventory.model_validate_json(inventory.model_dump_json()) == inventory


def test_unknown_fields_are_refused() -> None:
    data = _inventory("8xh100").model_dump(mode="json")
    data["gpu_count"] = 8
    with pytest.raises(ValidationError, match="gpu_count"):
        Inventory.model_validate(data)


def test_inventory_is_frozen() -> None:
    inventory = _inventory("8xh100")
    with pytest.raises(ValidationError):
        inventory.cpu_cores = 1  # type: ignore[misc]
