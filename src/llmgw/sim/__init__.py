"""The simulated inference engine: the catalog's `sim` engine, and the ground on which
routing, admission and failover are tested and benchmarked where no GPU engine runs.

It serves vLLM's, llama-server's or SGLang's HTTP API and metrics, driven by a
deterministic behaviour model: FCFS admission bounded by `max_seqs` and KV blocks (or
vLLM's priority scheduling, with preemption and recompute), an LRU prefix cache over
token blocks, prefill and decode costs, and faults chosen explicitly. The model is pure
and clock-injected (`scheduler`, `prefix_cache`, `cost`, `tokenizer`, `textgen`); the
HTTP layer (`app`, `routes_*`) only drives it.

Start one with `llmgw sim-engine` or `python -m llmgw.cli.sim`; from tests, with
`llmgw.testing.sim.start_sim_engine`, or in-process with `create_app(SimState.build(...))`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgw.core.lazy import lazy_attributes
from llmgw.sim.options import FaultMode, Flavor, SchedulingPolicy, SimOptions

if TYPE_CHECKING:
    from llmgw.sim.app import create_admin_app, create_app
    from llmgw.sim.engine import SimEngine
    from llmgw.sim.state import SIM_STATE, SimState

__all__ = [
    "SIM_STATE",
    "FaultMode",
    "Flavor",
    "SchedulingPolicy",
    "SimEngine",
    "SimOptions",
    "SimState",
    "create_admin_app",
    "create_app",
]

# The HTTP side (aiohttp) is imported when first asked for: `llmgw sim-engine`'s options
# are all the command line needs to start.
_LAZY = {
    "SIM_STATE": "llmgw.sim.state",
    "SimEngine": "llmgw.sim.engine",
    "SimState": "llmgw.sim.state",
    "create_admin_app": "llmgw.sim.app",
    "create_app": "llmgw.sim.app",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
