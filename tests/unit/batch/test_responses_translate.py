"""A Responses request as a chat completion and the chat answer as a response: pure
translation, data in and data out."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import orjson
import pytest

from llmgw.batch.responses_request import parse_request
from llmgw.batch.responses_translate import chat_body, output_of, response_object
from llmgw.errors import BadRequest


def _ids() -> Callable[[str], str]:
    counter = itertools.count(1)
    return lambda prefix: f"{prefix}_{next(counter)}"


def _parse(**body: object) -> object:
    return parse_request(orjson.dumps({"model": "m", **body}), _ids())


def test_text_input_and_instructions_become_a_system_and_a_user_message() -> None:
    request = parse_request(orjson.dumps({"model": "m", "input": "hi", "instructions": "Be brief."}), _ids())
    assert request.input_items == [
        {
            "id": "msg_1",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
            "status": "completed",
        }
    ]
    assert chat_body(request, []) == {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    }


def test_tools_and_call_items_become_chat_tools_tool_calls_and_tool_messages() -> None:
    body = {
        "model": "m",
        "max_output_tokens": 50,
        "stream": True,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "f"},
        "input": [
            {"role": "developer", "content": "rules"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "let me see"}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
    }
    chat = chat_body(parse_request(orjson.dumps(body), _ids()), [])
    assert chat["messages"] == [
        {"role": "system", "content": "rules"},
        {
            "role": "assistant",
            "content": "let me see",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    ]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert chat["max_tokens"] == 50
    assert chat["stream_options"] == {"include_usage": True}


def test_the_context_goes_between_the_instructions_and_the_new_input() -> None:
    earlier = parse_request(orjson.dumps({"model": "m", "input": "first"}), _ids()).input_items
    request = parse_request(orjson.dumps({"model": "m", "input": "second", "instructions": "I"}), _ids())
    messages = chat_body(request, earlier)["messages"]
    assert [m["content"] for m in messages] == ["I", "first", "second"]


def test_an_image_part_is_a_chat_image_url() -> None:
    part = {"type": "input_image", "image_url": "data:image/png;base64,AA"}
    request = parse_request(
        orjson.dumps(
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "see"}, part]}],
            }
        ),
        _ids(),
    )
    assert chat_body(request, [])["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "auto"}},
    ]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": 3}, "input"),
        ({"model": "m", "input": [{"type": "reasoning"}]}, "input[0].type"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"model": "m", "input": "x", "tools": [{"type": "file_search"}]}, "tools[0].type"),
        ({"model": "m", "input": "x", "stream": "yes"}, "stream"),
        ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        (
            {"model": "m", "input": "x", "previous_response_id": "r", "conversation": "c"},
            "previous_response_id",
        ),
    ],
)
def test_bad_requests_name_the_field(body: dict[str, object], param: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request(orjson.dumps(body), _ids())
    assert refused.value.param == param


def test_a_chat_answer_is_a_response_with_message_and_function_call_items() -> None:
    answer = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "calling",
                    "tool_calls": [
                        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }
    output, status, incomplete, usage = output_of(answer, _ids())
    assert status == "completed"
    assert incomplete is None
    assert [item["type"] for item in output] == ["message", "function_call"]
    assert output[0]["content"][0]["text"] == "calling"
    assert output[1]["call_id"] == "c9"
    assert usage is not None
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (7, 3, 10)


def test_a_cut_answer_is_incomplete_for_max_output_tokens() -> None:
    answer = {"choices": [{"message": {"content": "abc"}, "finish_reason": "length"}]}
    _, status, incomplete, _ = output_of(answer, _ids())
    assert (status, incomplete) == ("incomplete", {"reason": "max_output_tokens"})


def test_the_response_object_parses_in_the_openai_sdk() -> None:
    responses = pytest.importorskip("openai.types.responses")
    request = parse_request(
        orjson.dumps({"model": "m", "input": "hi", "conversation": {"id": "conv_1"}}), _ids()
    )
    chat = {
        "choices": [{"message": {"content": "yo"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    output, status, _incomplete, usage = output_of(chat, _ids())
    body = response_object(request, "resp_1", 1700000000, status=status, output=output, usage=usage)
    parsed = responses.Response.model_validate(body)  # strict: every required field there
    assert parsed.output_text == "yo"
    assert parsed.usage is not None
    assert parsed.usage.total_tokens == 4
    assert parsed.conversation is not None
    assert parsed.conversation.id == "conv_1"
