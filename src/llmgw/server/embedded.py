"""`llmgw server` with no configuration: a gateway that answers at once, on one machine.

Until a node agent runs beside the server, the embedded defaults start one simulated
engine as a child process and route the model `sim-chat` to it, so the first command
of the README gives a working OpenAI endpoint on :8080 with nothing else installed.
The engine is stopped, by its PID, when the server stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib import resources

from llmgw.config import Settings, settings_from_yaml
from llmgw.core.yamlio import dump_yaml, load_yaml
from llmgw.sim.testing import start_sim_engine

EMBEDDED_MODEL = "sim-chat"


@contextlib.contextmanager
def embedded_settings(environ: dict[str, str]) -> Iterator[Settings]:
    """The embedded configuration with its simulated engine running."""
    text = resources.files("llmgw.server").joinpath("embedded.yaml").read_text(encoding="utf-8")
    document = load_yaml(text, "embedded.yaml")
    engine = start_sim_engine("--model", EMBEDDED_MODEL)
    try:
        document["endpoints"][0]["url"] = engine.url
        yield settings_from_yaml(dump_yaml(document), source="embedded defaults", environ=environ)
    finally:
        engine.stop()
