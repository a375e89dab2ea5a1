"""Which engine module launches a profile: `launch_for`, the agent's one entry point."""

from __future__ import annotations

from collections.abc import Callable

from llmgw.engines import llamacpp, sglang, sim, trtllm, vllm
from llmgw.engines.launch import Launch, LaunchContext, refusal
from llmgw.engines.profile import EngineProfile

Launcher = Callable[[EngineProfile, LaunchContext, str | None], Launch]

LAUNCHERS: dict[str, Launcher] = {
    vllm.ENGINE: vllm.launch,
    llamacpp.ENGINE: llamacpp.launch,
    sglang.ENGINE: sglang.launch,
    trtllm.ENGINE: trtllm.launch,
    sim.ENGINE: sim.launch,
}
"""Every engine this agent can start. ComfyUI is a catalog engine the agent does not
launch yet."""


def launch_for(profile: EngineProfile, ctx: LaunchContext, binary: str | None = None) -> Launch:
    """How to start this profile's replica on this node. `binary` overrides the engine's
    program (its install's path; for SGLang and the sim, the Python interpreter).
    Raises ConfigError, naming the model, the profile and the fix, for a profile this
    agent cannot start with this context."""
    launcher = LAUNCHERS.get(profile.engine)
    if launcher is None:
        raise refusal(
            profile,
            f"this agent cannot start engine {profile.engine} yet; it starts"
            f" {', '.join(LAUNCHERS)}: place the profile where an agent that does runs",
        )
    return launcher(profile, ctx, binary)
