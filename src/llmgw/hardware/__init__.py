"""The hardware llmgw places onto: GPU classes, MIG instances, and what a profile's
card need stands for."""

from llmgw.hardware.gpus import (
    ARCHES,
    KNOWN_CARDS,
    VENDORS,
    Card,
    GPUNeed,
    MigInstance,
    card_of,
    classes_meeting,
    is_mig_class,
    memory_of,
    parse_mig,
    valid_class_name,
)

__all__ = [
    "ARCHES",
    "KNOWN_CARDS",
    "VENDORS",
    "Card",
    "GPUNeed",
    "MigInstance",
    "card_of",
    "classes_meeting",
    "is_mig_class",
    "memory_of",
    "parse_mig",
    "valid_class_name",
]
