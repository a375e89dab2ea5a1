"""GPU classes, MIG instances, card needs, and the guard formats the catalog accepts."""

from __future__ import annotations

import pytest

from llmgw.guard import FORMATS, known_format
from llmgw.hardware import (
    GPUNeed,
    MigInstance,
    card_of,
    classes_meeting,
    is_mig_class,
    memory_of,
    parse_mig,
    valid_class_name,
)

CLUSTER = [
    "h100-80g",
    "h200-141g",
    "a100-40g",
    "a100-80g",
    "l4-24g",
    "v100-32g",
    "mi300x-192g",
    "h100-80g-mig-1g.10gb",
    "a100-80g-mig-3g.40gb",
    "acme-x1-96g",
]


@pytest.mark.parametrize(
    ("gpu_class", "valid", "mig"),
    [
        ("h100-80g", True, False),
        ("rtx-a6000-48g", True, False),
        ("a100-40g-mig-3g.20gb", True, True),
        ("h100-80g-mig-1g.10gb+me", True, True),
        ("acme-x1-96g", True, False),
        ("H100-80G", False, False),
        ("h100", False, False),
        ("h100-80gb", False, False),
        ("cpu", False, False),
        ("h100-mig-1g.10gb", False, False),
    ],
)
def test_class_names(gpu_class: str, valid: bool, mig: bool) -> None:
    assert valid_class_name(gpu_class) is valid
    assert is_mig_class(gpu_class) is mig


def test_mig_parts() -> None:
    assert parse_mig("a100-40g-mig-3g.20gb") == MigInstance("a100-40g", 3, 20)
    assert parse_mig("a100-40g") is None
    assert memory_of("a100-40g-mig-3g.20gb") == 20
    assert memory_of("h200-141g") == 141
    assert memory_of("cpu") == 0
    card = card_of("h100-80g-mig-1g.10gb")
    assert card is not None
    assert (card.arch, card.memory_gb, card.fp8) == ("hopper", 10, True)
    assert card_of("acme-x1-96g") is None


@pytest.mark.parametrize(
    ("need", "expected"),
    [
        (
            {},
            [
                "l4-24g",
                "v100-32g",
                "a100-40g",
                "a100-80g",
                "h100-80g",
                "acme-x1-96g",
                "h200-141g",
                "mi300x-192g",
            ],
        ),
        ({"min_memory_gb": 80}, ["a100-80g", "h100-80g", "acme-x1-96g", "h200-141g", "mi300x-192g"]),
        ({"min_memory_gb": 80, "fp8": True}, ["h100-80g", "h200-141g", "mi300x-192g"]),
        ({"fp8": True, "vendor": "nvidia"}, ["l4-24g", "h100-80g", "h200-141g"]),
        ({"arch": ["ampere", "volta"]}, ["v100-32g", "a100-40g", "a100-80g"]),
        ({"vendor": "amd"}, ["mi300x-192g"]),
        (
            {"min_memory_gb": 10, "mig": True, "arch": ["hopper"]},
            ["h100-80g-mig-1g.10gb", "h100-80g", "h200-141g"],
        ),
        (
            {"min_memory_gb": 40, "mig": True},
            [
                "a100-40g",
                "a100-80g-mig-3g.40gb",
                "a100-80g",
                "h100-80g",
                "acme-x1-96g",
                "h200-141g",
                "mi300x-192g",
            ],
        ),
        ({"min_memory_gb": 500}, []),
    ],
)
def test_classes_meeting_a_need(need: dict[str, object], expected: list[str]) -> None:
    assert classes_meeting(GPUNeed.model_validate(need), CLUSTER) == expected


def test_need_problems() -> None:
    assert GPUNeed(min_memory_gb=40, vendor="nvidia", arch=("hopper",)).problems() == []
    problems = GPUNeed(min_memory_gb=-1, vendor="nv", arch=("hoper",)).problems()
    assert len(problems) == 3
    assert any('gpu.vendor "nv"' in p for p in problems)


def test_guard_formats() -> None:
    assert FORMATS == ("qwen3guard", "llamaguard3", "shieldgemma", "json")
    assert all(known_format(f) for f in FORMATS)
    assert not known_format("QWEN3GUARD")
    assert not known_format("llamaguard2")
