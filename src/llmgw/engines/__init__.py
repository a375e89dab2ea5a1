"""The inference engines llmgw runs: which there are, the engine view of a profile, and
what a profile may not tell an engine.

Each engine's command line, metric names and health check live in their own modules
(added with the agent); this package's root holds only what the catalog checks against.
"""

from llmgw.engines.launch import Launch, LaunchContext, PortNeeds, ports_needed
from llmgw.engines.profile import EngineAdapter, EngineProfile
from llmgw.engines.safety import RUNTIME_LORA_ENV, unsafe_args, unsafe_env

ENGINES: tuple[str, ...] = ("vllm", "llamacpp", "sglang", "trtllm", "comfyui", "sim")
"""Every engine a profile may name: vLLM, llama.cpp's llama-server, SGLang,
TensorRT-LLM's trtllm-serve, ComfyUI, and llmgw's own simulated engine."""

__all__ = [
    "ENGINES",
    "RUNTIME_LORA_ENV",
    "EngineAdapter",
    "EngineProfile",
    "Launch",
    "LaunchContext",
    "PortNeeds",
    "ports_needed",
    "unsafe_args",
    "unsafe_env",
]
