"""Every rule of a model definition: each case starts from one valid definition, changes
one thing, and asserts the refusal names the model, the field and the fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llmgw.catalog import Catalog
from llmgw.errors import CatalogError

DROP = object()
Path = tuple[str | int, ...]
Change = tuple[Path, Any]


def apply(definition: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
    """Sets (or, with DROP, removes) each path in a definition."""
    for path, value in changes:
        holder: Any = definition
        for part in path[:-1]:
            holder = holder[part]
        if value is DROP:
            del holder[path[-1]]
        else:
            holder[path[-1]] = value
    return definition


P = ("profiles", 0)
NODE = ("comfyui", "nodes", 0)
SQL = {"name": "sql", "source": "mirror/sql-lora/"}
PINNED = {"repo": "https://github.com/o/n", "commit": "0123456789abcdef0123456789abcdef01234567"}
MODEL = {"gpu": 'model "chat"', "cpu": 'model "small"', "comfy": 'model "pictures"'}

# (id, kind of valid definition, changes, fragments one problem must contain)
CASES: list[tuple[str, str, list[Change], list[str]]] = [
    # The model itself.
    ("name-missing", "gpu", [(("name",), DROP)], ["models[0]", "no name", "name:"]),
    (
        "source-missing",
        "gpu",
        [(("source",), DROP)],
        ['model "chat"', "source is required", "Hugging Face id"],
    ),
    ("no-profiles", "gpu", [(("profiles",), [])], ['model "chat"', "at least one profile", "external:"]),
    ("owner", "gpu", [(("owner",), "acme")], ['model "chat"', 'owner "acme"', "team:ID"]),
    ("class", "gpu", [(("class",), "gold")], ['model "chat"', 'class "gold"', "critical"]),
    ("eval-suite", "gpu", [(("eval",), {"min_score": 0.5})], ['model "chat"', "eval.suite is required"]),
    ("eval-score", "gpu", [(("eval",), {"suite": "arith", "min_score": 2})], ["eval.min_score 2", "0 and 1"]),
    ("context", "gpu", [(("context_length",), 4096), (("max_output",), 8192)], ["max_output 8192", "lower"]),
    ("context-negative", "gpu", [(("context_length",), -1)], ['model "chat"', "context_length", "0 or more"]),
    # Licence.
    ("license-name", "gpu", [(("license",), {"id": "MIT"})], ['model "chat"', "license.name is required"]),
    (
        "license-id",
        "gpu",
        [(("license",), {"name": "x", "id": "no spaces"})],
        ['license.id "no spaces"', "SPDX"],
    ),
    (
        "license-region",
        "gpu",
        [(("license",), {"name": "x", "excluded_regions": ["eu"]})],
        ['"eu"', "ISO 3166"],
    ),
    (
        "license-cap",
        "gpu",
        [(("license",), {"name": "x", "revenue_cap_usd": -1})],
        ["revenue_cap_usd -1", "or 0"],
    ),
    # Sources.
    (
        "source-page-llamacpp",
        "cpu",
        [(("source",), "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF")],
        ['model "small"', "repository page", ".gguf", "Qwen/Qwen3-0.6B-GGUF"],
    ),
    (
        "profile-source-page",
        "cpu",
        [((*P, "source"), "https://huggingface.co/a/b/tree/main")],
        ['model "small" profile "cpu"', "repository page", "mirror one from a/b"],
    ),
    (
        "source-page-external",
        "external",
        [(("source",), "https://hf.co/a/b")],
        ['model "gpt"', "give the id a/b"],
    ),
    # Guard models.
    (
        "guard-without-role",
        "gpu",
        [(("guard",), {"format": "json"})],
        ['model "chat"', "guard:", "role: guard"],
    ),
    ("role", "gpu", [(("role",), "judge")], ['model "chat"', 'role "judge"', "guard"]),
    ("guard-block", "guard", [(("guard",), DROP)], ['model "judge"', "guard.format", "qwen3guard"]),
    ("guard-format", "guard", [(("guard", "format"), "llama")], ['guard.format "llama"', "llamaguard3"]),
    (
        "guard-on-demand",
        "guard",
        [(("scaling",), {"max": 1})],
        ['model "judge"', "always run", "scaling.min"],
    ),
    (
        "guard-external",
        "guard",
        [(("profiles",), DROP), (("external",), {"url": "https://x.example", "model": "g"})],
        ['model "judge"', "cannot be external"],
    ),
    # Scaling.
    (
        "window-clock",
        "gpu",
        [(("scaling", "schedule"), [{"from": "8am", "to": "18:00", "min": 1}])],
        ['model "chat"', "scaling.schedule[0]", '"8am"', "HH:MM"],
    ),
    (
        "window-empty",
        "gpu",
        [(("scaling", "schedule"), [{"from": "08:00", "to": "08:00", "min": 1}])],
        ["scaling.schedule[0]", "both 08:00", "00:00 to 23:59"],
    ),
    (
        "window-day",
        "gpu",
        [(("scaling", "schedule"), [{"days": ["monday"], "from": "08:00", "to": "18:00"}])],
        ['day "monday"', "weekdays"],
    ),
    (
        "window-max",
        "gpu",
        [(("scaling", "schedule"), [{"from": "08:00", "to": "18:00", "min": 3, "max": 2}])],
        ["scaling.schedule[0]", "min 3 and max 2", "at least min"],
    ),
    ("prewarm", "gpu", [(("scaling", "prewarm"), "13h")], ['model "chat"', "scaling.prewarm", "12h"]),
    ("prewarm-negative", "gpu", [(("scaling", "prewarm"), "-1m")], ["scaling.prewarm", "between 0 and 12h"]),
    ("idle-timeout", "gpu", [(("scaling", "idle_timeout"), "-5m")], ["scaling.idle_timeout", "30m"]),
    (
        "max-below-min",
        "gpu",
        [(("scaling",), {"min": 3, "max": 2})],
        ["scaling.max 2", "scaling.min 3", "raise max"],
    ),
    # Profiles.
    ("profile-name", "gpu", [((*P, "name"), "")], ['model "chat"', "profiles[0] has no name"]),
    (
        "profile-twice",
        "gpu",
        [(("profiles",), [{"name": "a", "gpu_class": "l4-24g"}, {"name": "a", "gpu_class": "l4-24g"}])],
        ['profile "a" is declared twice', "its own name"],
    ),
    ("engine", "gpu", [((*P, "engine"), "vlm")], ['profile "h100"', 'engine "vlm"', "vllm"]),
    (
        "env",
        "gpu",
        [((*P, "env"), {"CUDA_VISIBLE_DEVICES": "0"})],
        ['model "chat" profile "h100"', "env CUDA_VISIBLE_DEVICES", "remove it"],
    ),
    ("env-preload", "gpu", [((*P, "env"), {"LD_PRELOAD": "/x.so"})], ["env LD_PRELOAD", "shared libraries"]),
    (
        "args",
        "gpu",
        [((*P, "args"), ["--served-model-name", "other"])],
        ['profile "h100"', "args --served-model-name", "remove it"],
    ),
    (
        "kv-events",
        "cpu",
        [((*P, "kv_events"), True)],
        ['model "small" profile "cpu"', "kv_events", "llamacpp"],
    ),
    ("power", "gpu", [((*P, "power_watts"), -5)], ['profile "h100"', "power_watts -5", "watts"]),
    ("keep-within", "gpu", [((*P, "keep_within"), "building")], ['profile "h100"', "keep_within", "rack"]),
    (
        "gpu-required",
        "gpu",
        [((*P, "engine"), "sglang"), ((*P, "gpu_class"), "")],
        ["sglang", "gpu_class", "gpu:"],
    ),
    ("cpu-nodes", "cpu", [((*P, "nodes"), 2)], ['profile "cpu"', "CPU profile", "nodes to 1"]),
    (
        "mig-width",
        "gpu",
        [((*P, "gpu_class"), "h100-80g-mig-1g.10gb")],
        ["MIG instance", "tp 1", "whole-card"],
    ),
    (
        "llamacpp-nodes",
        "gpu",
        [((*P, "engine"), "llamacpp"), ((*P, "tp"), 1), ((*P, "nodes"), 2)],
        ['profile "h100"', "llama.cpp does not span nodes", "vllm or sglang", "2-node"],
    ),
    (
        "llamacpp-tp",
        "gpu",
        [((*P, "engine"), "llamacpp"), ((*P, "gpus_per_node"), 4)],
        ["tp 2 disagrees with gpus_per_node 4", "gpus_per_node alone"],
    ),
    (
        "trtllm-nodes",
        "gpu",
        [((*P, "engine"), "trtllm"), ((*P, "nodes"), 2), ((*P, "gpus_per_node"), 1)],
        ["trtllm runs a replica on one node", "2-node"],
    ),
    ("trtllm-gguf", "gpu", [((*P, "engine"), "trtllm"), (("source",), "m/q.GGUF")], [".gguf", "llamacpp"]),
    ("width", "gpu", [((*P, "gpus_per_node"), 1)], ['profile "h100"', "tp 2", "equal tp x pp"]),
    ("width-pp", "gpu", [((*P, "pp"), 2)], ["tp 2 x pp 2 needs 4", "gpus_per_node x nodes"]),
    # Hardware.
    (
        "class-and-need",
        "gpu",
        [((*P, "gpu"), {"min_memory_gb": 40})],
        ['profile "h100"', "gpu_class and gpu are both given", "keep"],
    ),
    ("class-name", "gpu", [((*P, "gpu_class"), "H100")], ['gpu_class "H100"', "like h100-80g"]),
    ("class-cpu", "cpu", [((*P, "gpu_class"), "cpu")], ['gpu_class "cpu"', "leave it out"]),
    (
        "need-vendor",
        "gpu",
        [((*P, "gpu_class"), ""), ((*P, "gpu"), {"vendor": "nvida"})],
        ['profile "h100"', 'gpu.vendor "nvida"', "nvidia"],
    ),
    (
        "need-arch",
        "gpu",
        [((*P, "gpu_class"), ""), ((*P, "gpu"), {"arch": ["hoper"]})],
        ['gpu.arch "hoper"', "hopper"],
    ),
    (
        "need-memory",
        "gpu",
        [((*P, "gpu_class"), ""), ((*P, "gpu"), {"min_memory_gb": -1})],
        ["gpu.min_memory_gb -1"],
    ),
    (
        "need-width",
        "gpu",
        [((*P, "gpu_class"), ""), ((*P, "gpu"), {}), ((*P, "gpus_per_node"), 1)],
        ["tp 2", "equal tp x pp"],
    ),
    ("memory", "gpu", [((*P, "min_memory_gb"), -1)], ['profile "h100"', "min_memory_gb -1", "0 for no"]),
    ("cores", "cpu", [((*P, "cpu_cores"), -2)], ['profile "cpu"', "cpu_cores -2"]),
    ("disk", "gpu", [((*P, "min_disk_gb"), -1)], ["min_disk_gb -1"]),
    ("selector", "gpu", [((*P, "node_selector"), {" ": "x"})], ["node_selector", "empty label"]),
    (
        "profile-comfyui",
        "gpu",
        [((*P, "comfyui"), {"workflow": "flux-dev"})],
        ['profile "h100"', "comfyui:", "engine comfyui"],
    ),
    # External models.
    (
        "external-profiles",
        "external",
        [(("profiles",), [{"name": "p", "gpu_class": "l4-24g", "source": "x/y"}])],
        ['model "gpt"', "no profiles", "remove profiles"],
    ),
    (
        "external-profile-source",
        "external",
        [(("profiles",), [{"name": "p", "gpu_class": "l4-24g", "source": "x/y"}])],
        ['model "gpt" profile "p"', "loads no weights"],
    ),
    ("external-url", "external", [(("external", "url"), "ftp://x")], ['external.url "ftp://x"', "https://"]),
    (
        "external-model",
        "external",
        [(("external", "model"), " ")],
        ['model "gpt"', "external.model is required"],
    ),
    (
        "external-keys-both",
        "external",
        [(("external", "api_key_files"), [{"file": "/k"}])],
        ["api_key_file and api_key_files", "keep one"],
    ),
    (
        "external-key-file",
        "external",
        [(("external", "api_key_file"), DROP), (("external", "api_key_files"), [{"file": ""}])],
        ["api_key_files[0] names no file"],
    ),
    (
        "external-key-weight",
        "external",
        [
            (("external", "api_key_file"), DROP),
            (("external", "api_key_files"), [{"file": "/k", "weight": -1}]),
        ],
        ["api_key_files[0].weight -1", "0 or more"],
    ),
    (
        "external-peer-keys",
        "external",
        [
            (("external", "api_key_file"), DROP),
            (("external", "peer"), "east"),
            (("external", "api_key_files"), [{"file": "/k"}]),
        ],
        ["peer's key", "api_key_files"],
    ),
    (
        "external-workflow",
        "external",
        [(("external", "workflow"), "flux-dev")],
        ["api: comfyui", "remove them"],
    ),
    (
        "external-comfy-peer",
        "external",
        [(("external", "api"), "comfyui"), (("external", "peer"), "east")],
        ["federated model speaks OpenAI"],
    ),
    (
        "external-comfy-workflow",
        "external",
        [(("external", "api"), "comfyui"), (("external", "workflow"), "flux-pro")],
        ["external.workflow", 'built-in workflow "flux-pro"', "flux-schnell"],
    ),
    (
        "external-output",
        "external",
        [(("external", "api"), "comfyui"), (("external", "output"), "gifs")],
        ['external.output "gifs"', "meshes"],
    ),
    (
        "external-output-workflow",
        "external",
        [(("external", "api"), "comfyui"), (("external", "output"), "meshes")],
        ["meshes", "name its workflow"],
    ),
    (
        "external-api",
        "external",
        [(("external", "api"), "anthropic")],
        ['external.api "anthropic"', "openai"],
    ),
    # Adapters.
    ("max-loaded", "gpu", [(("max_loaded_adapters",), -1)], ['model "chat"', "max_loaded_adapters -1"]),
    (
        "max-loaded-engine",
        "cpu",
        [(("max_loaded_adapters",), 2)],
        ['model "small" profile "cpu"', "max_loaded_adapters needs vllm"],
    ),
    (
        "adapters-external",
        "external",
        [(("adapters",), [SQL])],
        ['model "gpt"', "external model cannot carry"],
    ),
    (
        "adapters-engine",
        "gpu",
        [((*P, "engine"), "sglang"), (("adapters",), [SQL])],
        ["sglang serves no adapters"],
    ),
    (
        "adapters-runtime-env",
        "gpu",
        [(("adapters",), [SQL]), ((*P, "env"), {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"})],
        ['profile "h100"', "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "max_loaded_adapters instead"],
    ),
    ("adapter-owner", "gpu", [(("adapters",), [{**SQL, "owner": "acme"}])], ['adapter "sql"', "scope:ID"]),
    ("adapter-scope", "gpu", [(("adapters",), [{**SQL, "owner": "dept:x"}])], ['owner scope "dept"', "user"]),
    ("adapter-source", "gpu", [(("adapters",), [{"name": "sql"}])], ['adapter "sql"', "name and a source"]),
    (
        "adapter-name",
        "gpu",
        [(("adapters",), [{**SQL, "name": "chat"}])],
        ['adapter "chat"', "model's own name"],
    ),
    ("adapter-twice", "gpu", [(("adapters",), [SQL, SQL])], ['adapter "sql" is declared twice']),
    ("adapter-scale", "gpu", [(("adapters",), [{**SQL, "scale": -1}])], ['adapter "sql" scale -1']),
    (
        "adapter-scale-vllm",
        "gpu",
        [(("adapters",), [{**SQL, "scale": 0.5}])],
        ['adapter "sql" scale 0.5', "vLLM", "remove scale"],
    ),
    (
        "adapter-slash",
        "gpu",
        [(("adapters",), [{**SQL, "name": "team/sql"}]), (("max_loaded_adapters",), 2)],
        ['adapter "team/sql"', "slash", "rename"],
    ),
    # ComfyUI models.
    (
        "comfyui-block",
        "gpu",
        [(("comfyui",), {"workflow": "flux-dev"})],
        ['model "chat"', "comfyui:", "remove it"],
    ),
    (
        "comfyui-mixed",
        "comfy",
        [
            (
                ("profiles",),
                [
                    {"name": "a", "engine": "comfyui", "gpu_class": "l4-24g"},
                    {"name": "b", "gpu_class": "l4-24g"},
                ],
            )
        ],
        ['model "pictures"', "every profile runs engine comfyui or none"],
    ),
    ("comfyui-adapters", "comfy", [(("adapters",), [SQL])], ['model "pictures"', "no LoRA adapters"]),
    ("comfyui-workflow", "comfy", [(("comfyui", "workflow"), "flux-pro")], ["comfyui.workflow", "flux-dev"]),
    (
        "node-repo",
        "comfy",
        [((*NODE, "repo"), "http://github.com/o/n")],
        ['model "pictures"', "https repository"],
    ),
    ("node-user", "comfy", [((*NODE, "repo"), "https://me:pw@github.com/o/n")], ["without credentials"]),
    ("node-commit", "comfy", [((*NODE, "commit"), "main")], ['commit "main"', "40-hex", "branch"]),
    ("node-build", "comfy", [((*NODE, "build"), ["../x"])], ['build "../x"', "inside the repository"]),
    ("node-build-abs", "comfy", [((*NODE, "build"), ["/opt/x"])], ['build "/opt/x"']),
    (
        "node-requirement",
        "comfy",
        [((*NODE, "requirements"), ["--index-url http://evil"])],
        ["requirement", "version range", "numpy"],
    ),
    ("comfyui-output", "comfy", [(("comfyui", "output"), "gif")], ['comfyui.output "gif"', "meshes"]),
    (
        "comfyui-output-workflow",
        "comfy",
        [(("comfyui", "output"), "meshes"), (("comfyui", "workflow"), DROP)],
        ['model "pictures"', "meshes", "name its workflow"],
    ),
    (
        "comfyui-hf-repo",
        "comfy",
        [(("comfyui", "huggingface_repo"), "stabilityai")],
        ["huggingface_repo", "owner/name"],
    ),
    ("comfyui-environment", "comfy", [(("comfyui", "environment"), "a b")], ['comfyui.environment "a b"']),
    (
        "input-name",
        "comfy",
        [(("comfyui", "inputs"), [{"name": "Prompt"}])],
        ['comfyui input "Prompt"', "lowercase"],
    ),
    (
        "input-reserved",
        "comfy",
        [(("comfyui", "inputs"), [{"name": "checkpoint"}])],
        ["{{checkpoint}}", "another"],
    ),
    (
        "input-type",
        "comfy",
        [(("comfyui", "inputs"), [{"name": "a", "type": "video"}])],
        ['type "video"', "integer"],
    ),
    (
        "input-default",
        "comfy",
        [(("comfyui", "inputs"), [{"name": "steps", "type": "integer", "default": "four"}])],
        ["default", "type integer"],
    ),
    (
        "input-required-default",
        "comfy",
        [(("comfyui", "inputs"), [{"name": "a", "required": True, "default": "x"}])],
        ["never missing", "drop required"],
    ),
    (
        "input-twice",
        "comfy",
        [(("comfyui", "inputs"), [{"name": "a"}, {"name": "a"}])],
        ['input "a" is declared twice'],
    ),
    (
        "checkpoint",
        "comfy",
        [(("source",), "mirror/flux/")],
        ['model "pictures"', "comfyui.checkpoint must name"],
    ),
    (
        "profile-workflow",
        "comfy",
        [((*P, "comfyui"), {"workflow": "sdxl"})],
        ['model "pictures" profile "l40s"', "comfyui.workflow", "JSON file"],
    ),
    ("node-twice", "comfy", [(("comfyui", "nodes"), [PINNED, PINNED])], ["listed twice", "keep one"]),
]


def _problems(build: Callable[..., Catalog], definition: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(CatalogError) as caught:
        build(definition)
    return caught.value.problems


@pytest.mark.parametrize("kind", ["gpu", "cpu", "comfy", "external", "guard"])
def test_valid_definitions_build(
    kind: str, valid: Callable[[str], dict[str, Any]], build: Callable[..., Catalog]
) -> None:
    assert len(build(valid(kind))) == 1


@pytest.mark.parametrize(("kind", "changes", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_refuses_with_a_sentence_naming_the_fix(
    kind: str,
    changes: list[Change],
    fragments: list[str],
    valid: Callable[[str], dict[str, Any]],
    build: Callable[..., Catalog],
) -> None:
    definition = valid(kind)
    apply(definition, changes)
    problems = _problems(build, definition)
    assert any(all(f in p for f in fragments) for p in problems), problems
    assert all("\n" not in p for p in problems)


def test_every_invalid_model_is_reported(
    valid: Callable[[str], dict[str, Any]], build: Callable[..., Catalog]
) -> None:
    a, b = valid("gpu"), valid("cpu")
    a["class"] = "gold"
    b["profiles"][0]["nodes"] = 3
    problems = _problems(build, a) + _problems(build, b)
    with pytest.raises(CatalogError) as caught:
        build(a, b)
    assert set(problems) <= set(caught.value.problems)
    assert any('model "chat"' in p for p in caught.value.problems)
    assert any('model "small"' in p for p in caught.value.problems)


def test_independent_problems_of_one_profile_are_all_reported(
    valid: Callable[[str], dict[str, Any]], build: Callable[..., Catalog]
) -> None:
    d = valid("gpu")
    d["profiles"][0].update({"env": {"PYTHONPATH": "/x"}, "args": ["--port=9"], "gpus_per_node": 1})
    problems = _problems(build, d)
    assert any("env PYTHONPATH" in p for p in problems)
    assert any("args --port" in p for p in problems)
    assert any("equal tp x pp" in p for p in problems)
