"""Models served by someone else: an OpenAI-compatible provider, a ComfyUI server, or
a federated llmgw cluster.

Nothing is placed for such a model; the router forwards its requests. Its prompts leave
the cluster, which is why its key lives in a file on the control plane rather than in
the catalog, the store or the audit log.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from llmgw.catalog.comfy import OUTPUT_PICTURES, OUTPUTS, workflow_problem
from llmgw.catalog.quoting import q
from llmgw.core.strict import Strict

API_OPENAI = "openai"
API_COMFYUI = "comfyui"


class ExternalKey(Strict):
    """One of several keys for a provider: each is an endpoint of its own, so a key that
    is rate-limited or refused is passed over while another serves."""

    file: str = ""
    """The file on the control plane holding the key."""
    weight: float = 0
    """Its share of requests against the others'; 0 is 1."""


class External(Strict):
    """A provider outside the cluster that serves a model."""

    url: str = ""
    """The provider's base address, without /v1."""
    model: str = ""
    """What the provider calls the model; requests are rewritten to it. For api comfyui,
    the checkpoint file the workflow loads."""
    api_key_file: str = ""
    api_key_files: tuple[ExternalKey, ...] = ()
    peer: str = ""
    """The federated cluster offering this model, for a model federation added."""
    api: str = ""
    """openai (the default) or comfyui."""
    workflow: str = ""
    """For api comfyui: a built-in's name or a JSON file."""
    output: str = ""
    """For api comfyui: what the workflow makes."""

    def problems(self, profiles: int) -> list[str]:
        """What is wrong with the block, as sentence tails naming the field and the fix."""
        if profiles > 0:
            return [
                "an external model is served by its provider, so it has no profiles;"
                " remove profiles or external"
            ]
        try:
            url = urlsplit(self.url)
            reachable = url.scheme in ("http", "https") and bool(url.hostname)
        except ValueError:
            reachable = False
        if not reachable:
            return [
                f"external.url {q(self.url)} is not an http(s) address; give the provider's base, like https://api.openai.com"
            ]
        out: list[str] = []
        if not self.model.strip():
            out.append("external.model is required: the name the provider knows the model by")
        if self.api_key_file and self.api_key_files:
            out.append("external gives both api_key_file and api_key_files; keep one")
        for i, key in enumerate(self.api_key_files):
            if not key.file.strip():
                out.append(f"external.api_key_files[{i}] names no file; give the file holding the key")
            if key.weight < 0:
                out.append(f"external.api_key_files[{i}].weight {key.weight:g} is negative; give 0 or more")
        if self.api_key_files and self.peer:
            out.append("a federated model is reached with its peer's key; remove external.api_key_files")
        out.extend(self._api_problems())
        return out

    def _api_problems(self) -> list[str]:
        if self.api in ("", API_OPENAI):
            if self.workflow or self.output:
                return [
                    "external.workflow and external.output are for api: comfyui; remove them or set the api"
                ]
            return []
        if self.api != API_COMFYUI:
            return [f"external.api {q(self.api)} is not openai or comfyui"]
        if self.peer:
            return ["a federated model speaks OpenAI's API; remove external.api: comfyui or external.peer"]
        out: list[str] = []
        problem = workflow_problem(self.workflow)
        if problem is not None:
            out.append(f"external.workflow: {problem}")
        if self.output and self.output not in OUTPUTS:
            out.append(f"external.output {q(self.output)} is not one of {', '.join(OUTPUTS)}")
        elif self.output and self.output != OUTPUT_PICTURES and not self.workflow:
            out.append(
                f"external.output is {self.output}, which no built-in workflow makes; name its workflow"
            )
        return out
