"""The model catalog: which models exist, how each may run, and how many copies of it
to keep.

A catalog is built from the `models:` of the configuration (or the store) with
`Catalog.build`, which fills in every default and refuses, all at once, every
definition that would otherwise fail late and confusingly. Everything here is pure:
data in, data out, no clock and no I/O.
"""

from llmgw.catalog.adapters import Adapter, adapter_owner_problem
from llmgw.catalog.catalog import Catalog
from llmgw.catalog.classes import (
    CLASS_CRITICAL,
    CLASS_OPPORTUNISTIC,
    CLASS_STANDARD,
    CLASSES,
    class_rank,
    effective_class,
    valid_class,
)
from llmgw.catalog.comfy import OUTPUTS, Input, builtin_names
from llmgw.catalog.comfyui import (
    HF_REPO_ENV,
    NODES_ENV,
    SHARED_MODELS_ENV,
    ComfyUI,
    CustomNode,
    ProfileComfyUI,
    SharedComfy,
    SharedMember,
)
from llmgw.catalog.environments import EnvironmentModel
from llmgw.catalog.external import API_COMFYUI, API_OPENAI, External, ExternalKey
from llmgw.catalog.license import License
from llmgw.catalog.model import ENGINE_COMFYUI, ENGINE_SIM, Model
from llmgw.catalog.normalize import repository_page
from llmgw.catalog.parts import (
    ROLE_GUARD,
    SLO,
    Canary,
    Capabilities,
    EvalGate,
    GuardModel,
    Origin,
    OriginFile,
    PreviousOrigin,
    short_revision,
)
from llmgw.catalog.profile import Profile, cpu_capable, suggest_cores
from llmgw.catalog.scaling import ScaleWindow, Scaling, parse_clock
from llmgw.catalog.validate import validate
from llmgw.hardware.gpus import GPUNeed

__all__ = [
    "API_COMFYUI",
    "API_OPENAI",
    "CLASSES",
    "CLASS_CRITICAL",
    "CLASS_OPPORTUNISTIC",
    "CLASS_STANDARD",
    "ENGINE_COMFYUI",
    "ENGINE_SIM",
    "HF_REPO_ENV",
    "NODES_ENV",
    "OUTPUTS",
    "ROLE_GUARD",
    "SHARED_MODELS_ENV",
    "SLO",
    "Adapter",
    "Canary",
    "Capabilities",
    "Catalog",
    "ComfyUI",
    "CustomNode",
    "EnvironmentModel",
    "EvalGate",
    "External",
    "ExternalKey",
    "GPUNeed",
    "GuardModel",
    "Input",
    "License",
    "Model",
    "Origin",
    "OriginFile",
    "PreviousOrigin",
    "Profile",
    "ProfileComfyUI",
    "ScaleWindow",
    "Scaling",
    "SharedComfy",
    "SharedMember",
    "adapter_owner_problem",
    "builtin_names",
    "class_rank",
    "cpu_capable",
    "effective_class",
    "parse_clock",
    "repository_page",
    "short_revision",
    "suggest_cores",
    "valid_class",
    "validate",
]
