"""Which engines a node installs: the defaults, the cluster's versions over them, and
the overrides that pick some nodes, applied in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmgw.config import DEFAULT_ENGINES, EngineOverride, Settings, engines_for, wanted_engines


def test_defaults_are_the_checked_versions() -> None:
    assert dict(DEFAULT_ENGINES) == {"llamacpp": "b10991", "vllm": "0.30.0"}
    assert wanted_engines({}) == dict(DEFAULT_ENGINES)


def test_cluster_versions_replace_add_and_remove() -> None:
    assert wanted_engines({"vllm": "0.31.0", "sglang": "0.5.2", "llamacpp": ""}) == {
        "vllm": "0.31.0",
        "sglang": "0.5.2",
    }


def test_wanted_engines_does_not_change_the_defaults() -> None:
    wanted_engines({"vllm": ""})["llamacpp"] = "changed"
    assert dict(DEFAULT_ENGINES) == {"llamacpp": "b10991", "vllm": "0.30.0"}


def test_every_given_selector_must_match() -> None:
    o = EngineOverride(gpu_class="v100-32g", labels={"zone": "a"}, engines={"vllm": "0.10.2"})
    assert o.picks("n1", ["v100-32g"], {"zone": "a", "rack": "r1"})
    assert not o.picks("n1", ["v100-32g"], {"zone": "b"})
    assert not o.picks("n1", ["a100-80g"], {"zone": "a"})
    by_node = EngineOverride(nodes=("n1", "n2"), engines={"vllm": ""})
    assert by_node.picks("n2", [], {})
    assert not by_node.picks("n3", [], {})


def test_overrides_apply_in_order_later_last() -> None:
    overrides = [
        EngineOverride(gpu_class="v100-32g", engines={"vllm": "0.10.2"}),
        EngineOverride(labels={"role": "cpu"}, engines={"vllm": "", "sglang": "0.5.0"}),
        EngineOverride(nodes=("n9",), engines={"llamacpp": "b9000"}),
    ]
    cluster = {"sglang": "0.5.2"}
    assert engines_for(cluster, overrides, "n1", ["v100-32g"], {}) == {
        "llamacpp": "b10991",
        "vllm": "0.10.2",
        "sglang": "0.5.2",
    }
    assert engines_for(cluster, overrides, "n9", ["v100-32g"], {"role": "cpu"}) == {
        "llamacpp": "b9000",
        "sglang": "0.5.0",
    }
    assert engines_for(cluster, overrides, "n5", ["h100-80g"], {}) == wanted_engines(cluster)


def test_settings_methods_use_their_own_engines(
    valid: dict[str, Any], build: Callable[..., Settings]
) -> None:
    settings = build(valid)
    assert settings.wanted_engines() == {"llamacpp": "b10991", "vllm": "0.30.1", "sglang": "0.5.2"}
    assert settings.engines_for("n1", ["v100-32g"], {})["vllm"] == "0.10.2"
