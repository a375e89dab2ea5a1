"""The LLMGW_ overlay: the environment wins over the file, key by key; a variable whose
path names nothing is refused with the nearest key; variables without "__" that are no
setting belong to someone else and are left alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from llmgw.config import Settings


def test_nested_variable_sets_one_key(build: Callable[..., Settings]) -> None:
    s = build({"router": {"retries": 1, "cooldown": "5s"}}, {"LLMGW_ROUTER__RETRIES": "3"})
    assert s.router.retries == 3
    assert s.router.cooldown == timedelta(seconds=5)  # the file's value beside it survives


def test_names_are_case_insensitive(build: Callable[..., Settings]) -> None:
    s = build({}, {"llmgw_router__timeouts__total": "1h", "LLMGW_Listen": ":9000"})
    assert s.router.timeouts.total == timedelta(hours=1)
    assert s.listen == ":9000"


def test_environment_wins_over_the_file_and_defaults(build: Callable[..., Settings]) -> None:
    s = build({"auth": {"enabled": True, "store": "/a.db"}}, {"LLMGW_AUTH__STORE": "/b.db"})
    assert (s.auth.enabled, s.auth.store) == (True, "/b.db")


def test_lists_and_mappings_are_json(build: Callable[..., Settings]) -> None:
    s = build(
        {},
        {
            "LLMGW_ROUTER__TAG_LABELS": '["team", "app"]',
            "LLMGW_ENGINES": '{"sglang": "0.5.2"}',
            "LLMGW_CONTROL__PORT_RANGE": "[30000, 30099]",
        },
    )
    assert s.router.tag_labels == ("team", "app")
    assert s.engines == {"sglang": "0.5.2"}
    assert s.control.port_range == (30000, 30099)


def test_a_mapping_key_below_a_dict(build: Callable[..., Settings]) -> None:
    s = build({"engines": {"vllm": "0.30.1"}}, {"LLMGW_ENGINES__SGLANG": "0.5.2"})
    assert s.engines == {"vllm": "0.30.1", "sglang": "0.5.2"}


def test_variables_that_are_no_setting_are_left_alone(build: Callable[..., Settings]) -> None:
    s = build({}, {"LLMGW_COMFYUI_NODES": "a,b", "PATH": "/bin", "LLMGW": "x"})
    assert s == Settings()


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("LLMGW_ROUTER__RETRIEZ", ("router has no key 'retriez'", "did you mean LLMGW_ROUTER__RETRIES?")),
        ("LLMGW_ROUTR__RETRIES", ("top level has no key 'routr'", "LLMGW_ROUTER__RETRIES")),
        (
            "LLMGW_ROUTER__TIMEOUTS__DIAL__X",
            ("router.timeouts.dial takes no keys", "LLMGW_ROUTER__TIMEOUTS__DIAL"),
        ),
        (
            "LLMGW_ROUTER__ADMISSION__BANDS__0__NAME",
            ("bands is a list", "LLMGW_ROUTER__ADMISSION__BANDS as JSON"),
        ),
        ("LLMGW_ROUTER____RETRIES", ("empty step",)),
    ],
)
def test_unknown_paths_are_refused_naming_the_variable(
    check: Callable[..., list[str]], name: str, fragments: tuple[str, ...]
) -> None:
    problems = check({}, {name: "3"})
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{name}: ")
    for fragment in fragments:
        assert fragment in problems[0]


def test_a_list_that_is_not_json_is_refused(check: Callable[..., list[str]]) -> None:
    problems = check({}, {"LLMGW_ROUTER__TAG_LABELS": "team,app"})
    assert len(problems) == 1
    assert problems[0].startswith("LLMGW_ROUTER__TAG_LABELS: router.tag_labels")
    assert "JSON" in problems[0]


def test_a_bad_value_names_the_variable_not_the_file(check: Callable[..., list[str]]) -> None:
    problems = check({"router": {"retries": 1}}, {"LLMGW_ROUTER__RETRIES": "many"})
    assert problems == ["LLMGW_ROUTER__RETRIES: router.retries: 'many' is not a whole number"]


def test_refused_variables_and_file_problems_come_together(check: Callable[..., list[str]]) -> None:
    problems = check({"listen": "8080"}, {"LLMGW_ROUTER__RETRIEZ": "3", "LLMGW_ROUTER__COOLDOWN": "10"})
    assert len(problems) == 3, problems
    assert problems[0].startswith("LLMGW_ROUTER__RETRIEZ: ")
    assert any(
        p.startswith("LLMGW_ROUTER__COOLDOWN: router.cooldown: '10' is not a duration") for p in problems
    )
    assert any(p.startswith("test.yaml: listen: ") for p in problems)


def test_an_empty_value_is_a_value(check: Callable[..., list[str]]) -> None:
    problems = check({}, {"LLMGW_LISTEN": ""})
    assert len(problems) == 1
    assert problems[0].startswith("LLMGW_LISTEN: listen: is empty")
