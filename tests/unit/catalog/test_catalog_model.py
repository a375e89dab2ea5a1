"""A model read and normalised: defaults filled in exactly where the seed fills them,
YAML keys as written, and the readings other parts of llmgw rely on."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from llmgw.catalog import (
    HF_REPO_ENV,
    NODES_ENV,
    Canary,
    Catalog,
    Model,
    Profile,
    class_rank,
    repository_page,
    short_revision,
    suggest_cores,
)
from llmgw.core.problems import describe_validation_error
from llmgw.core.yamlio import load_yaml
from llmgw.engines import RUNTIME_LORA_ENV

Valid = Callable[[str], dict[str, Any]]
Build = Callable[..., Catalog]


def normal(definition: dict[str, Any]) -> Model:
    return Model.model_validate(definition).normalized()


def test_absent_fields_are_empty_until_normalised() -> None:
    raw = Model.model_validate(
        {"name": "m", "source": "a/b", "profiles": [{"name": "p", "gpu_class": "l4-24g"}]}
    )
    p = raw.profiles[0]
    assert (p.engine, p.tp, p.pp, p.nodes, p.gpus_per_node, p.weight) == ("", 0, 0, 0, 0, 0)
    assert p.startup_timeout == timedelta(0)
    assert (raw.scaling.min, raw.scaling.max, raw.class_, raw.external) == (0, 0, "", None)
    n = raw.normalized().profiles[0]
    assert (n.engine, n.tp, n.pp, n.nodes, n.gpus_per_node, n.weight) == ("vllm", 1, 0, 1, 1, 1.0)
    assert n.startup_timeout == timedelta(minutes=20)


@pytest.mark.parametrize(
    ("scaling", "expected"),
    [
        ({"min": 2}, (2, 2)),
        ({}, (0, 0)),
        ({"max": 3}, (0, 3)),
        ({"min": -1, "max": 2}, (0, 2)),
        ({"min": 1, "max": 4}, (1, 4)),
    ],
)
def test_scaling_defaults(scaling: dict[str, int], expected: tuple[int, int], valid: Valid) -> None:
    d = valid("gpu")
    d["scaling"] = scaling
    s = normal(d).scaling
    assert (s.min, s.max) == expected


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        # llama.cpp's tp, from before gpus_per_node meant anything to it, is the card count.
        ({"engine": "llamacpp", "gpu_class": "l4-24g", "tp": 2}, (1, 0, 2)),
        ({"engine": "llamacpp", "gpu_class": "l4-24g", "tp": 2, "pp": 2}, (1, 0, 4)),
        ({"engine": "llamacpp", "gpu_class": "l4-24g", "tp": 2, "gpus_per_node": 2}, (1, 0, 2)),
        ({"engine": "llamacpp", "gpu_class": "l4-24g", "tp": 2, "gpus_per_node": 3}, (2, 0, 3)),
        ({"engine": "llamacpp", "gpu": {"min_memory_gb": 20}, "tp": 2}, (1, 0, 2)),
        ({"engine": "llamacpp", "tp": 2}, (2, 0, 0)),  # CPU only: no cards to divide
        ({"gpu_class": "h100-80g", "tp": 8, "nodes": 2}, (8, 0, 4)),
        ({"gpu_class": "h100-80g", "tp": 1, "nodes": 2}, (1, 0, 1)),
        ({"gpu_class": "h100-80g", "tp": 4, "gpus_per_node": 2, "nodes": 2}, (4, 0, 2)),
    ],
)
def test_profile_width_defaults(profile: dict[str, Any], expected: tuple[int, int, int]) -> None:
    p = normal({"name": "m", "source": "a/b", "profiles": [{"name": "p", **profile}]}).profiles[0]
    assert (p.tp, p.pp, p.gpus_per_node) == expected


def test_repository_page_is_read_as_the_repository_for_vllm(valid: Valid) -> None:
    d = valid("gpu")
    d["source"] = "https://huggingface.co/Qwen/Qwen3-8B/tree/main"
    d["profiles"].append({"name": "cpu", "engine": "llamacpp", "source": "https://hf.co/Qwen/Qwen3-8B-GGUF"})
    d["profiles"].append({"name": "l4", "gpu_class": "l4-24g", "source": "http://huggingface.co/o/r"})
    m = normal(d)
    assert m.source == "Qwen/Qwen3-8B"
    assert [p.source for p in m.profiles] == ["", "https://hf.co/Qwen/Qwen3-8B-GGUF", "o/r"]


def test_repository_page_stays_when_llamacpp_loads_it(valid: Valid) -> None:
    d = valid("cpu")
    d["source"] = "https://huggingface.co/o/r"
    assert normal(d).source == "https://huggingface.co/o/r"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("https://huggingface.co/o/r", "o/r"),
        ("https://hf.co/o/r/", "o/r"),
        ("https://huggingface.co/o/r/blob/main/x.gguf", "o/r"),
        ("https://huggingface.co/o/r/resolve/main/x.gguf", None),
        ("https://huggingface.co/o", None),
        ("o/r", None),
    ],
)
def test_repository_page(source: str, expected: str | None) -> None:
    assert repository_page(source) == expected


def test_yaml_keys_are_the_seeds() -> None:
    text = """
name: chat
class: critical
source: a/b
profiles:
  - {name: h100, gpu_class: h100-80g, startup_timeout: 45m}
scaling:
  min: 1
  prewarm: 30m
  schedule:
    - {days: [weekdays], from: 08:00, to: 18:30, min: 2}
slo: {ttft_p99: 800ms}
"""
    m = Model.model_validate(load_yaml(text, "models.yaml"))
    assert m.class_ == "critical"
    assert m.scaling.schedule[0].from_ == "08:00"
    dumped = m.model_dump(mode="json", exclude_defaults=True)
    assert dumped["class"] == "critical"
    assert dumped["scaling"]["schedule"][0]["from"] == "08:00"
    assert dumped["scaling"]["prewarm"] == "30m"
    assert dumped["profiles"][0]["startup_timeout"] == "45m"
    assert dumped["slo"] == {"ttft_p99": "800ms"}
    assert Model.model_validate(dumped) == m


def test_unknown_key_names_the_nearest() -> None:
    with pytest.raises(ValidationError) as caught:
        Model.model_validate({"name": "m", "profiles": [{"name": "p", "gpu_clas": "l4-24g"}]})
    assert describe_validation_error(caught.value, Model, ("models", 0)) == [
        "models[0].profiles[0].gpu_clas: unknown key; did you mean models[0].profiles[0].gpu_class?"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, "standard"),
        ({"class": "critical"}, "critical"),
        ({"scaling": {"max": 2}}, "opportunistic"),
        ({"scaling": {"max": 2}, "class": "standard"}, "standard"),
        ({"role": "guard", "scaling": {"min": 1}}, "critical"),
    ],
)
def test_effective_class(change: dict[str, Any], expected: str, valid: Valid) -> None:
    assert normal({**valid("gpu"), **change}).effective_class == expected


def test_class_rank() -> None:
    assert class_rank("critical") > class_rank("standard") == class_rank("") > class_rank("opportunistic")
    assert class_rank("unheard-of") == class_rank("opportunistic")


@pytest.mark.parametrize(("counts", "cores"), [([], 0), ([0], 0), ([8, 16], 4), ([1], 1), ([0, 6, 12], 3)])
def test_suggest_cores(counts: list[int], cores: int) -> None:
    assert suggest_cores(counts) == cores


def test_fingerprint() -> None:
    p = Profile(name="p", gpu_class="l4-24g", env={"A": "1", "B": "2"}, args=("--x",))
    fp = p.fingerprint()
    assert len(fp) == 16
    assert int(fp, 16) >= 0
    assert Profile(name="p", gpu_class="l4-24g", env={"B": "2", "A": "1"}, args=("--x",)).fingerprint() == fp
    assert Profile(name="p", gpu_class="l4-24g", env={"A": "1", "B": "2"}, args=("--y",)).fingerprint() != fp
    assert (
        Profile(name="p", gpu_class="l4-24g", min_memory_gb=64).fingerprint()
        != Profile(name="p", gpu_class="l4-24g").fingerprint()
    )


def test_profile_by_name_and_class(valid: Valid) -> None:
    d = valid("gpu")
    d["profiles"].append({"name": "any", "gpu": {"min_memory_gb": 40}, "tp": 2})
    m = normal(d)
    assert m.profile_by_name("h100") == m.profiles[0]
    placed = m.profile_by_name("any@a100-80g")
    assert placed is not None
    assert (placed.name, placed.gpu_class, placed.gpu, placed.tp, placed.gpus_per_node) == (
        "any@a100-80g",
        "a100-80g",
        None,
        2,
        2,
    )
    assert m.profile_by_name("h100@a100-80g") is None  # only a profile naming its need stands for classes
    assert m.profile_by_name("any@") is None
    assert m.profile_by_name("ghost") is None
    engine = m.engine_profile("any@l40s-48g")
    assert engine is not None
    assert engine.gpu_class == "l40s-48g"


def test_classes_for(valid: Valid) -> None:
    cluster = ["h100-80g", "a100-40g", "a100-80g-mig-3g.40gb", "l4-24g"]
    one = Profile(name="p", gpu={"min_memory_gb": 40, "mig": True})
    assert one.classes_for(cluster) == ["a100-40g", "a100-80g-mig-3g.40gb", "h100-80g"]
    wide = normal(
        {
            "name": "m",
            "source": "a/b",
            "profiles": [{"name": "p", "gpu": {"min_memory_gb": 40, "mig": True}, "tp": 2}],
        }
    )
    assert wide.profiles[0].classes_for(cluster) == ["a100-40g", "h100-80g"]
    assert Profile(name="p", gpu_class="l4-24g").classes_for(cluster) == ["l4-24g"]
    assert Profile(name="p", gpu_class="b200-180g").classes_for(cluster) == []


def test_weight_sources_and_source_of(valid: Valid) -> None:
    d = valid("gpu")
    d["profiles"] += [
        {"name": "cpu", "engine": "llamacpp", "source": "mirror/q.gguf"},
        {"name": "cpu2", "engine": "llamacpp", "source": "mirror/q.gguf"},
    ]
    m = normal(d)
    assert m.weight_sources() == ["Qwen/Qwen3-8B", "mirror/q.gguf"]
    assert m.source_of(m.profiles[0]) == "Qwen/Qwen3-8B"
    assert m.source_of(m.profiles[1]) == "mirror/q.gguf"


@pytest.mark.parametrize(
    ("engines", "simulated"), [(["sim"], True), (["sim", "sim"], True), (["sim", "vllm"], False), ([], False)]
)
def test_simulated(engines: list[str], simulated: bool) -> None:
    profiles = [{"name": f"p{i}", "engine": e, "gpu_class": "l4-24g"} for i, e in enumerate(engines)]
    assert normal({"name": "m", "source": "a/b", "profiles": profiles}).simulated is simulated


def test_engine_profile(valid: Valid) -> None:
    d = valid("gpu")
    d["adapters"] = [{"name": "sql", "source": "mirror/sql/"}]
    d["max_loaded_adapters"] = 4
    d["profiles"][0]["kv_events"] = True
    m = normal(d)
    assert m.kv_index
    assert m.engine_profile("ghost") is None
    p = m.engine_profile("h100")
    assert p is not None
    assert (p.engine, p.tp, p.gpus_per_node, p.model_path, p.served_model_name) == (
        "vllm",
        2,
        2,
        "Qwen/Qwen3-8B",
        "chat",
    )
    assert [(a.name, a.path) for a in p.adapters] == [("sql", "mirror/sql/")]
    assert p.runtime_lora
    assert p.max_loaded_adapters == 4
    assert p.env[RUNTIME_LORA_ENV] == "True"
    assert p.kv_events
    plain = normal(valid("gpu")).engine_profile("h100")
    assert plain is not None
    assert not plain.runtime_lora
    assert RUNTIME_LORA_ENV not in plain.env


def test_comfy_readings(valid: Valid, commit: str) -> None:
    d = valid("comfy")
    d["comfyui"]["huggingface_repo"] = "stabilityai/stable-fast-3d"
    d["profiles"][0]["comfyui"] = {
        "checkpoint": "fp16.safetensors",
        "nodes": [{"repo": "https://github.com/o/m", "commit": commit}],
    }
    m = normal(d)
    assert m.serves_comfyui
    assert m.makes_images
    assert not m.makes_meshes
    assert m.comfy_workflow() == ("flux-schnell", "flux1-schnell-fp8.safetensors")
    assert m.comfy_workflow(m.profiles[0]) == ("flux-schnell", "fp16.safetensors")
    assert [i.name for i in m.comfy_inputs()][:2] == ["prompt", "seed"]
    p = m.engine_profile("l40s")
    assert p is not None
    assert [n["repo"] for n in json.loads(p.env[NODES_ENV])] == [
        "https://github.com/o/n",
        "https://github.com/o/m",
    ]
    assert p.env[HF_REPO_ENV] == "stabilityai/stable-fast-3d"
    meshes = normal({**valid("comfy"), "comfyui": {"workflow": "sf3d.json", "output": "meshes"}})
    assert meshes.makes_meshes
    assert not meshes.makes_images
    assert meshes.comfy_inputs() == ()
    hf = normal({**valid("comfy"), "source": "hf:org/repo/model.safetensors"})
    assert hf.comfy_workflow()[1] == "model.safetensors"


def test_external_comfy_readings(valid: Valid) -> None:
    d = valid("external")
    d["external"] = {"url": "http://comfy:8188", "model": "flux.safetensors", "api": "comfyui", "peer": ""}
    m = normal(d)
    assert m.is_external
    assert not m.is_peer
    assert m.serves_comfyui
    assert m.makes_images
    assert m.comfy_workflow() == ("", "flux.safetensors")
    peer = normal({**valid("external"), "external": {"url": "https://east", "model": "m", "peer": "east"}})
    assert peer.is_peer


def test_small_parts() -> None:
    assert Canary(model="x").limits() == (50, 0.05, 1.5)
    assert Canary(model="x", min_requests=10, max_error_increase=0.1, max_ttft_ratio=2).limits() == (
        10,
        0.1,
        2,
    )
    assert short_revision("0123456789abcdef") == "01234567"
    assert short_revision("abc") == "abc"


@pytest.mark.parametrize("kind", ["gpu", "cpu", "comfy", "external", "guard"])
def test_normalising_twice_changes_nothing_and_survives_a_round_trip(kind: str, valid: Valid) -> None:
    once = normal(valid(kind))
    assert once.normalized() == once
    written = once.model_dump(mode="json", exclude_defaults=True, exclude_none=True, by_alias=True)
    assert Model.model_validate(json.loads(json.dumps(written))) == once
