"""Reading a file the way the server does, and writing back the settings in force."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmgw.config import Settings, load_settings, render_effective, settings_from_yaml
from llmgw.core.yamlio import dump_yaml, load_yaml
from llmgw.errors import ConfigError


def _problems(path: Path | None, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ or {})
    return list(caught.value.problems)


def test_no_file_is_the_defaults() -> None:
    assert load_settings(None, {}) == Settings()


def test_a_file_over_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text("router:\n  retries: 5\n", encoding="utf-8")
    s = load_settings(path, {})
    assert s.router.retries == 5
    assert s.router.cooldown == Settings().router.cooldown


def test_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    assert load_settings(path, {}) == Settings()


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert _problems(missing) == [f"{missing}: no such configuration file"]


def test_a_directory_is_named(tmp_path: Path) -> None:
    assert _problems(tmp_path) == [f"{tmp_path}: is a directory; give the configuration file inside it"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text("listen: :8080\n", encoding="utf-8")
    path.chmod(0)
    problems = _problems(path)
    assert problems[0].startswith(f"{path}: cannot be read")


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"landing:\n  notice: caf\xe9\n")
    assert "save the file as UTF-8" in _problems(path)[0]


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("listen: :8080\nrouter:\n  retries: [1\n", encoding="utf-8")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:4: YAML syntax error")


def test_the_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_yaml("- listen\n", source="list.yaml", environ={})
    assert caught.value.problems == (
        "list.yaml: the top level must be settings by name (listen:, router:…), not a list",
    )


def test_times_of_day_stay_text() -> None:
    s = settings_from_yaml("landing:\n  notice: 10:30\n", source="t.yaml", environ={})
    assert s.landing.notice == "10:30"


def test_the_environment_applies_without_a_file() -> None:
    assert load_settings(None, {"LLMGW_ROUTER__RETRIES": "7"}).router.retries == 7


def test_render_round_trips(valid: dict[str, Any], build: Callable[..., Settings]) -> None:
    settings = build(valid, {"LLMGW_ROUTER__RETRIES": "4"})
    shown = render_effective(settings)
    again = settings_from_yaml(shown, source="shown.yaml", environ={})
    assert render_effective(again) == shown
    assert again.router.retries == 4


def test_render_writes_durations_as_written_and_keeps_zero_means_default(
    build: Callable[..., Settings],
) -> None:
    shown = load_yaml(render_effective(build({"router": {"activation_wait": "90s"}})), "shown")
    assert shown["router"]["activation_wait"] == "1m30s"
    assert shown["router"]["timeouts"]["total"] == "30m"
    assert shown["router"]["batch"]["max_lines"] == 0  # as written; code reads effective_max_lines
    assert shown["control"]["port_range"] == [20000, 20999]


def test_render_shows_models_normalised_and_brief(
    valid: dict[str, Any], build: Callable[..., Settings]
) -> None:
    shown = load_yaml(render_effective(build(valid)), "shown")
    (model,) = shown["models"]
    profile = model["profiles"][0]
    assert (profile["name"], profile["engine"], profile["gpu_class"]) == ("l40s", "vllm", "l40s-48g")
    assert profile["tp"] == 1  # filled in by the catalog
    assert "description" not in model  # empty fields are left out


def test_render_keeps_the_keys_of_the_input(valid: dict[str, Any], build: Callable[..., Settings]) -> None:
    shown = load_yaml(render_effective(build(valid)), "shown")
    assert set(valid) <= set(shown)
    assert set(shown) == set(Settings.model_fields)


def test_dump_of_defaults_loads_back_equal() -> None:
    shown = render_effective(Settings())
    assert settings_from_yaml(shown, source="d.yaml", environ={}) == Settings()
    assert dump_yaml({}) == "{}\n"
