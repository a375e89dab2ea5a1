"""Reading nvidia-smi: recorded outputs of several machines, and the class each card's
driver name and memory map to."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmgw.agent.gpu_smi import card_class, gpus_from, mig_class, parse_list, parse_query
from llmgw.hardware.gpus import KNOWN_CARDS, card_of, memory_of, parse_mig, valid_class_name

FIXTURES = Path(__file__).parent / "fixtures"


def test_eight_h100s() -> None:
    gpus = gpus_from(
        (FIXTURES / "nvidia-smi-8xh100-query.txt").read_text(),
        (FIXTURES / "nvidia-smi-8xh100-list.txt").read_text(),
    )
    assert [g.index for g in gpus] == list(range(8))
    assert {g.gpu_class for g in gpus} == {"h100-80g"}
    assert all(g.memory_mib == 81559 for g in gpus)
    assert all(g.power_limit_watts == 700.0 for g in gpus)
    assert gpus[0].power_draw_watts == pytest.approx(71.82)
    assert not any(g.mig_enabled for g in gpus)
    assert gpus[3].uuid.startswith("GPU-")


def test_a100_with_mig_on_one_card() -> None:
    gpus = gpus_from(
        (FIXTURES / "nvidia-smi-2xa100-mig-query.txt").read_text(),
        (FIXTURES / "nvidia-smi-2xa100-mig-list.txt").read_text(),
    )
    mig, whole = gpus
    assert mig.gpu_class == whole.gpu_class == "a100-40g"
    assert mig.mig_enabled
    assert [(d.device, d.profile, d.gpu_class, d.memory_gb) for d in mig.mig_devices] == [
        (0, "3g.20gb", "a100-40g-mig-3g.20gb", 20),
        (1, "2g.10gb", "a100-40g-mig-2g.10gb", 10),
        (2, "1g.5gb", "a100-40g-mig-1g.5gb", 5),
        (3, "1g.5gb", "a100-40g-mig-1g.5gb", 5),
    ]
    assert all(d.uuid.startswith("MIG-") for d in mig.mig_devices)
    assert not whole.mig_enabled
    assert whole.mig_devices == ()
    # Each instance is a class the hardware table reads back: same card, its own memory.
    for device in mig.mig_devices:
        parsed = parse_mig(device.gpu_class)
        assert parsed is not None
        assert parsed.parent == "a100-40g"
        assert memory_of(device.gpu_class) == device.memory_gb


def test_mixed_l4_and_rtx_4090() -> None:
    gpus = gpus_from(
        (FIXTURES / "nvidia-smi-mixed-l4-rtx4090-query.txt").read_text(),
        (FIXTURES / "nvidia-smi-mixed-l4-rtx4090-list.txt").read_text(),
    )
    assert [g.gpu_class for g in gpus] == ["l4-24g", "l4-24g", "rtx4090-24g"]
    assert [g.power_limit_watts for g in gpus] == [72.0, 72.0, 450.0]
    assert not any(g.mig_enabled for g in gpus)


def test_figures_a_card_does_not_report_are_none() -> None:
    (card,) = parse_query("0, GPU-1, NVIDIA A10, 23028, [N/A], [Not Supported], [N/A]\n")
    assert card.power_limit_watts is None
    assert card.power_draw_watts is None
    assert not card.mig_enabled


def test_a_name_with_a_comma_keeps_its_fields_apart() -> None:
    (card,) = parse_query("3, GPU-9, Some Card, Rev B, 16384, 250.00, 30.00, Disabled\n")
    assert (card.index, card.name, card.memory_mib, card.power_limit_watts) == (
        3,
        "Some Card, Rev B",
        16384,
        250.0,
    )


@pytest.mark.parametrize("line", ["0, GPU-1, NVIDIA L4", "x, GPU-1, NVIDIA L4, 23034, 72, 1, [N/A]"])
def test_a_line_that_is_not_a_card_is_named(line: str) -> None:
    with pytest.raises(ValueError, match="nvidia-smi line"):
        parse_query(line)


def test_mig_lines_belong_to_the_card_above_them() -> None:
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n"
        "  MIG 1g.10gb+me   Device  0: (UUID: MIG-c)\n"
        "  MIG 3g.40gb      Device  1: (UUID: MIG-d)\n"
    )
    migs = parse_list(text)
    assert [(m.card_index, m.profile, m.device, m.uuid) for m in migs] == [
        (1, "1g.10gb+me", 0, "MIG-c"),
        (1, "3g.40gb", 1, "MIG-d"),
    ]
    assert mig_class("h100-80g", "1g.10gb+me") == "h100-80g-mig-1g.10gb+me"
    assert parse_mig("h100-80g-mig-1g.10gb+me") is not None


@pytest.mark.parametrize(
    ("name", "memory_mib", "gpu_class"),
    [
        ("NVIDIA H100 80GB HBM3", 81559, "h100-80g"),
        ("NVIDIA H100 PCIe", 81559, "h100-80g"),
        ("NVIDIA H100 NVL", 95830, "h100-94g"),
        ("NVIDIA H200", 143771, "h200-141g"),
        ("NVIDIA GH200 480GB", 97871, "gh200-96g"),
        ("NVIDIA B200", 183359, "b200-180g"),
        ("NVIDIA A100-SXM4-40GB", 40960, "a100-40g"),
        ("NVIDIA A100-SXM4-80GB", 81920, "a100-80g"),
        ("NVIDIA A100 80GB PCIe", 81920, "a100-80g"),
        ("NVIDIA A100-PCIE-40GB", 40960, "a100-40g"),
        ("NVIDIA L4", 23034, "l4-24g"),
        ("NVIDIA L40S", 46068, "l40s-48g"),
        ("NVIDIA L40", 46068, "l40-48g"),
        ("NVIDIA A10", 23028, "a10-24g"),
        ("NVIDIA A10G", 23028, "a10g-24g"),
        ("NVIDIA A30", 24576, "a30-24g"),
        ("NVIDIA A40", 46068, "a40-48g"),
        ("Tesla V100-SXM2-32GB", 32768, "v100-32g"),
        ("Tesla V100-PCIE-16GB", 16384, "v100-16g"),
        ("Tesla T4", 15360, "t4-16g"),
        ("NVIDIA GeForce RTX 4090", 24564, "rtx4090-24g"),
        ("NVIDIA RTX A6000", 49140, "rtx-a6000-48g"),
        ("NVIDIA RTX 6000 Ada Generation", 49140, "rtx-6000-ada-48g"),
    ],
)
def test_known_cards(name: str, memory_mib: int, gpu_class: str) -> None:
    assert card_class(name, memory_mib) == gpu_class
    assert card_of(gpu_class) is not None


@pytest.mark.parametrize(
    ("name", "memory_mib", "gpu_class"),
    [
        ("NVIDIA H800 80GB HBM3", 81559, "h800-80g"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, "rtx-pro-6000-blackwell-server-edition-96g"),
        ("NVIDIA GeForce RTX 3090", 24576, "rtx-3090-24g"),
        # A known model at a size the table lacks is a class of its own, not the nearest.
        ("NVIDIA H100 64GB", 65536, "h100-64g"),
    ],
)
def test_unknown_cards_get_a_class_from_name_and_memory(name: str, memory_mib: int, gpu_class: str) -> None:
    assert card_class(name, memory_mib) == gpu_class
    assert valid_class_name(gpu_class)
    assert card_of(gpu_class) is None


def test_every_known_nvidia_class_is_reached_from_its_own_spelling() -> None:
    # The names a driver might print for a card of the table, reduced to its model
    # words, map back to that class at its nominal memory.
    for card in KNOWN_CARDS:
        if card.vendor != "nvidia":
            continue
        model = card.gpu_class.rsplit("-", 1)[0].replace("-", " ")
        assert card_class(f"NVIDIA {model}", card.memory_gb * 1024) == card.gpu_class
