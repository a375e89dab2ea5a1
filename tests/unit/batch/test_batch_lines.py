"""A batch's input lines checked one by one: each fault named with the line's custom_id."""

from __future__ import annotations

import orjson

from llmgw.batch.batch_lines import BadLine, Line, check_line

CHAT = "/v1/chat/completions"


def _raw(**fields: object) -> bytes:
    line: dict[str, object] = {"custom_id": "a", "method": "POST", "url": CHAT, "body": {"model": "m"}}
    line.update(fields)
    return orjson.dumps({k: v for k, v in line.items() if v is not None})


def test_a_good_line_is_kept_with_its_body() -> None:
    seen: set[str] = set()
    verdict = check_line(_raw(), CHAT, seen)
    assert verdict == Line("a", {"model": "m"})
    assert seen == {"a"}


def test_a_blank_line_is_skipped() -> None:
    assert check_line(b"  \n", CHAT, set()) is None


def test_each_fault_is_named_with_the_custom_id_when_there_is_one() -> None:
    cases = {
        b"not json": (None, "invalid_json"),
        b"[1, 2]": (None, "invalid_request"),
        _raw(custom_id=""): (None, "missing_custom_id"),
        _raw(method="GET"): ("a", "invalid_method"),
        _raw(url="/v1/embeddings"): ("a", "invalid_url"),
        _raw(body=[1]): ("a", "invalid_body"),
        _raw(body={"messages": []}): ("a", "missing_model"),
        _raw(body={"model": "m", "stream": True}): ("a", "stream_not_supported"),
    }
    for raw, (custom_id, code) in cases.items():
        verdict = check_line(raw, CHAT, set())
        assert isinstance(verdict, BadLine), raw
        assert (verdict.custom_id, verdict.code) == (custom_id, code), raw


def test_a_custom_id_used_twice_refuses_the_second_line() -> None:
    seen: set[str] = set()
    assert isinstance(check_line(_raw(), CHAT, seen), Line)
    again = check_line(_raw(), CHAT, seen)
    assert isinstance(again, BadLine)
    assert again.code == "duplicate_custom_id"
