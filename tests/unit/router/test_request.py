"""What the gateway reads of a client's request: the routing fields lifted out of each
kind of body, every malformed input refused with the parameter it concerns, the body a
replica is sent (the client's own bytes unless something must change), and the prompt
token floor."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from llmgw.errors import BadRequest
from llmgw.router.request import CHARS_PER_TOKEN_CEILING, ClientRequest, Kind, parse_request


def _raw(body: Any) -> bytes:
    return orjson.dumps(body)


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "messages": [{"role": "user", "content": "hi"}], **extra}


# --- the routing fields ---------------------------------------------------------------


def test_a_chat_request_lifts_out_the_routing_fields() -> None:
    body = {
        "model": "chat",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
        "temperature": 0.2,
    }
    raw = _raw(body)
    request = parse_request(Kind.CHAT, raw)
    assert request.kind is Kind.CHAT
    assert request.model == "chat"
    assert request.stream is True
    assert request.wants_usage is True
    assert request.max_tokens == 64
    assert request.prompt == "system\nBe brief.\nuser\nWhat is 2+2?\n"
    assert request.body == body
    assert request.raw is raw
    assert request.session is None
    assert request.account is None


DEFAULT_CASES = [
    pytest.param(Kind.CHAT, _chat(), id="chat"),
    pytest.param(Kind.COMPLETIONS, {"model": "m", "prompt": "Once"}, id="completions"),
    pytest.param(Kind.EMBEDDINGS, {"model": "m", "input": "text"}, id="embeddings"),
]


@pytest.mark.parametrize(("kind", "body"), DEFAULT_CASES)
def test_what_a_request_leaves_out_defaults_to_no_stream_no_usage_no_bound(
    kind: Kind, body: dict[str, Any]
) -> None:
    request = parse_request(kind, _raw(body))
    assert request.stream is False
    assert request.wants_usage is False
    assert request.max_tokens is None


PROMPT_CASES = [
    pytest.param(
        Kind.CHAT,
        {"messages": [{"role": "user", "content": "hello"}]},
        "user\nhello\n",
        id="chat-one-message",
    ),
    pytest.param(
        Kind.CHAT,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look at "},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                        {"type": "text", "text": "this"},
                    ],
                }
            ]
        },
        "user\nlook at this\n",
        id="chat-content-parts-text-only",
    ),
    pytest.param(
        Kind.CHAT,
        {
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            ]
        },
        "user\nweather?\nassistant\n\ntool\nsunny\n",
        id="chat-null-content-of-a-tool-call",
    ),
    pytest.param(
        Kind.CHAT,
        {"messages": [{"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]},
        "assistant\n\n",
        id="chat-refusal-parts-give-nothing",
    ),
    pytest.param(Kind.COMPLETIONS, {"prompt": "Once upon"}, "Once upon", id="completion-string"),
    pytest.param(Kind.COMPLETIONS, {"prompt": ""}, "", id="completion-empty-string"),
    pytest.param(Kind.COMPLETIONS, {"prompt": ["a", "b", "c"]}, "a\nb\nc", id="completion-list-of-strings"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [1, 2, 3]}, "", id="completion-token-ids"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [[1, 2], [3]]}, "", id="completion-batches-of-token-ids"),
    pytest.param(Kind.EMBEDDINGS, {"input": "embed me"}, "embed me", id="embedding-string"),
    pytest.param(Kind.EMBEDDINGS, {"input": ["one", "two"]}, "one\ntwo", id="embedding-list"),
    pytest.param(Kind.EMBEDDINGS, {"input": [[5, 6], [7]]}, "", id="embedding-token-ids"),
]


@pytest.mark.parametrize(("kind", "fields", "prompt"), PROMPT_CASES)
def test_the_prompt_text_the_prefix_tree_keys_on(kind: Kind, fields: dict[str, Any], prompt: str) -> None:
    assert parse_request(kind, _raw({"model": "m", **fields})).prompt == prompt


MAX_TOKENS_CASES = [
    pytest.param({"max_tokens": 100}, 100, id="max-tokens"),
    pytest.param({"max_completion_tokens": 50}, 50, id="max-completion-tokens"),
    pytest.param({"max_completion_tokens": 50, "max_tokens": 100}, 50, id="the-newer-name-wins"),
    pytest.param({"max_completion_tokens": None, "max_tokens": 100}, 100, id="null-newer-name-is-absent"),
    pytest.param({"max_tokens": None}, None, id="null-is-no-bound"),
    pytest.param({"max_tokens": 1}, 1, id="one-is-the-least"),
]


@pytest.mark.parametrize(("fields", "expected"), MAX_TOKENS_CASES)
def test_the_output_bound(fields: dict[str, Any], expected: int | None) -> None:
    assert parse_request(Kind.CHAT, _raw(_chat(**fields))).max_tokens == expected
    completion = {"model": "m", "prompt": "p", **fields}
    assert parse_request(Kind.COMPLETIONS, _raw(completion)).max_tokens == expected


def test_an_embedding_request_never_streams_and_has_no_output_bound() -> None:
    # Embeddings answer in one piece; a stray stream flag or max_tokens must not change that.
    body = {"model": "m", "input": "x", "stream": True, "max_tokens": 0}
    request = parse_request(Kind.EMBEDDINGS, _raw(body))
    assert request.stream is False
    assert request.max_tokens is None


USAGE_CASES = [
    pytest.param({"stream_options": {"include_usage": True}}, True, id="asked"),
    pytest.param({"stream_options": {"include_usage": False}}, False, id="declined"),
    pytest.param({"stream_options": {}}, False, id="options-without-usage"),
    pytest.param({"stream_options": None}, False, id="null-options"),
]


@pytest.mark.parametrize(("fields", "expected"), USAGE_CASES)
def test_whether_the_client_asked_for_usage(fields: dict[str, Any], expected: bool) -> None:
    request = parse_request(Kind.CHAT, _raw(_chat(stream=True, **fields)))
    assert request.wants_usage is expected


# --- refusals ---------------------------------------------------------------------------

BAD_CASES = [
    pytest.param(Kind.CHAT, b'{"model": "chat", ', None, id="truncated-json"),
    pytest.param(Kind.CHAT, b"", None, id="empty-body"),
    pytest.param(Kind.CHAT, b"\xff\xfe{}", None, id="not-utf8"),
    pytest.param(Kind.CHAT, b'[{"model": "chat"}]', None, id="array-not-object"),
    pytest.param(Kind.CHAT, b'"chat"', None, id="string-not-object"),
    pytest.param(Kind.CHAT, _raw({"messages": [{"role": "user", "content": "x"}]}), "model", id="no-model"),
    pytest.param(Kind.CHAT, _raw(_chat(model="")), "model", id="empty-model"),
    pytest.param(Kind.CHAT, _raw(_chat(model=7)), "model", id="model-not-a-string"),
    pytest.param(Kind.CHAT, _raw(_chat(model=None)), "model", id="null-model"),
    pytest.param(Kind.CHAT, _raw(_chat(stream="yes")), "stream", id="stream-a-string"),
    pytest.param(Kind.CHAT, _raw(_chat(stream=1)), "stream", id="stream-a-number"),
    pytest.param(Kind.CHAT, _raw({"model": "chat"}), "messages", id="no-messages"),
    pytest.param(Kind.CHAT, _raw({"model": "chat", "messages": []}), "messages", id="empty-messages"),
    pytest.param(Kind.CHAT, _raw({"model": "chat", "messages": "hi"}), "messages", id="messages-a-string"),
    pytest.param(
        Kind.CHAT,
        _raw({"model": "chat", "messages": [{"role": "user", "content": "a"}, {"content": "b"}]}),
        "messages[1].role",
        id="message-without-role",
    ),
    pytest.param(
        Kind.CHAT, _raw({"model": "chat", "messages": ["hello"]}), "messages[0]", id="message-not-an-object"
    ),
    pytest.param(
        Kind.CHAT,
        _raw({"model": "chat", "messages": [{"role": 3, "content": "x"}]}),
        "messages[0].role",
        id="role-not-a-string",
    ),
    pytest.param(Kind.COMPLETIONS, _raw({"model": "m"}), "prompt", id="no-prompt"),
    pytest.param(Kind.COMPLETIONS, _raw({"model": "m", "prompt": []}), "prompt", id="empty-prompt-list"),
    pytest.param(Kind.COMPLETIONS, _raw({"model": "m", "prompt": 42}), "prompt", id="prompt-a-number"),
    pytest.param(Kind.COMPLETIONS, _raw({"model": "m", "prompt": None}), "prompt", id="null-prompt"),
    pytest.param(Kind.EMBEDDINGS, _raw({"model": "m"}), "input", id="no-input"),
    pytest.param(Kind.EMBEDDINGS, _raw({"model": "m", "input": []}), "input", id="empty-input-list"),
    pytest.param(Kind.EMBEDDINGS, _raw({"model": "m", "input": {"a": 1}}), "input", id="input-an-object"),
    pytest.param(Kind.CHAT, _raw(_chat(max_tokens=0)), "max_tokens", id="max-tokens-zero"),
    pytest.param(Kind.CHAT, _raw(_chat(max_tokens=-5)), "max_tokens", id="max-tokens-negative"),
    pytest.param(Kind.CHAT, _raw(_chat(max_tokens=1.5)), "max_tokens", id="max-tokens-fractional"),
    pytest.param(Kind.CHAT, _raw(_chat(max_tokens=10.0)), "max_tokens", id="max-tokens-a-float"),
    pytest.param(Kind.CHAT, _raw(_chat(max_tokens="10")), "max_tokens", id="max-tokens-a-string"),
    pytest.param(Kind.CHAT, _raw(_chat(max_tokens=True)), "max_tokens", id="max-tokens-a-boolean"),
    pytest.param(
        Kind.CHAT,
        _raw(_chat(max_completion_tokens=0, max_tokens=10)),
        "max_completion_tokens",
        id="max-completion-tokens-zero",
    ),
    pytest.param(
        Kind.COMPLETIONS,
        _raw({"model": "m", "prompt": "p", "max_tokens": -1}),
        "max_tokens",
        id="completion-max-tokens-negative",
    ),
    pytest.param(
        Kind.CHAT, _raw(_chat(stream_options="include_usage")), "stream_options", id="options-a-string"
    ),
    pytest.param(Kind.CHAT, _raw(_chat(stream_options=[True])), "stream_options", id="options-a-list"),
]


def _user(content: Any) -> bytes:
    return _raw({"model": "chat", "messages": [{"role": "user", "content": content}]})


# Content parts and tool calls: the gateway reads the text of text parts and touches the
# rest of a message's shape, so each wrong type is refused with the path that holds it.
CONTENT_CASES = [
    pytest.param(_user([{"type": "text", "text": 5}]), "messages[0].content[0].text", id="text-a-number"),
    pytest.param(_user([{"type": "text", "text": None}]), "messages[0].content[0].text", id="text-null"),
    pytest.param(_user([{"type": "text", "text": ["a"]}]), "messages[0].content[0].text", id="text-a-list"),
    pytest.param(_user([{"type": "text"}]), "messages[0].content[0].text", id="text-missing"),
    pytest.param(
        _user([{"type": "text", "text": "a"}, {"type": "text", "text": {"b": 1}}]),
        "messages[0].content[1].text",
        id="second-part-text-an-object",
    ),
    pytest.param(_user(["stray"]), "messages[0].content[0]", id="part-a-string"),
    pytest.param(_user([7]), "messages[0].content[0]", id="part-a-number"),
    pytest.param(_user([{"text": "a"}]), "messages[0].content[0].type", id="part-without-type"),
    pytest.param(_user([{"type": 1, "text": "a"}]), "messages[0].content[0].type", id="part-type-a-number"),
    pytest.param(_user(5), "messages[0].content", id="content-a-number"),
    pytest.param(_user({"type": "text", "text": "a"}), "messages[0].content", id="content-an-object"),
    pytest.param(_user(None), "messages[0].content", id="user-content-null"),
    pytest.param(
        _raw(
            {
                "model": "chat",
                "messages": [{"role": "assistant", "content": [{"type": "refusal", "refusal": 1}]}],
            }
        ),
        "messages[0].content[0].refusal",
        id="refusal-a-number",
    ),
    pytest.param(
        _raw({"model": "chat", "messages": [{"role": "assistant", "content": None, "tool_calls": {"a": 1}}]}),
        "messages[0].tool_calls",
        id="tool-calls-an-object",
    ),
    pytest.param(
        _raw({"model": "chat", "messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]}),
        "messages[0].tool_calls[0].function",
        id="tool-call-without-function",
    ),
    pytest.param(
        _raw(
            {
                "model": "chat",
                "messages": [
                    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}
                ],
            }
        ),
        "messages[0].tool_calls[0].function.arguments",
        id="tool-call-arguments-an-object",
    ),
    pytest.param(
        _raw(
            {
                "model": "chat",
                "messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}],
            }
        ),
        "messages[0].tool_calls[0].function.name",
        id="tool-call-without-name",
    ),
]


@pytest.mark.parametrize(("raw", "param"), CONTENT_CASES)
def test_a_wrong_content_part_or_tool_call_is_refused_with_its_path(raw: bytes, param: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_request(Kind.CHAT, raw)
    assert caught.value.param == param
    assert param in caught.value.message


PROMPT_SHAPE_CASES = [
    pytest.param(Kind.COMPLETIONS, {"prompt": ["a", 1]}, "prompt[1]", id="prompt-strings-then-a-number"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [1, "a"]}, "prompt", id="prompt-ids-then-a-string"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [True, False]}, "prompt", id="prompt-booleans"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [1.5]}, "prompt", id="prompt-fractional-ids"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [[1], []]}, "prompt[1]", id="prompt-an-empty-batch"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [[1], ["a"]]}, "prompt[1]", id="prompt-a-batch-of-strings"),
    pytest.param(Kind.COMPLETIONS, {"prompt": [None]}, "prompt", id="prompt-null-item"),
    pytest.param(Kind.EMBEDDINGS, {"input": ["a", None]}, "input[1]", id="input-strings-then-null"),
    pytest.param(Kind.EMBEDDINGS, {"input": [{"a": 1}]}, "input", id="input-objects"),
    pytest.param(Kind.EMBEDDINGS, {"input": [[1], 2]}, "input[1]", id="input-batches-then-an-id"),
]


@pytest.mark.parametrize(("kind", "fields", "param"), PROMPT_SHAPE_CASES)
def test_a_mixed_prompt_or_input_is_refused_with_its_path(
    kind: Kind, fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_request(kind, _raw({"model": "m", **fields}))
    assert caught.value.param == param


@pytest.mark.parametrize(("kind", "raw", "param"), BAD_CASES)
def test_a_malformed_request_is_refused_naming_the_parameter(
    kind: Kind, raw: bytes, param: str | None
) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_request(kind, raw)
    error = caught.value
    assert error.status == 400
    assert error.error_type == "invalid_request_error"
    assert error.param == param
    assert error.message
    if param is not None:
        assert param.split("[")[0] in error.message


def test_invalid_json_is_refused_from_the_decoder_error() -> None:
    with pytest.raises(BadRequest, match="not valid JSON") as caught:
        parse_request(Kind.CHAT, b"{nope")
    assert isinstance(caught.value.__cause__, orjson.JSONDecodeError)


# --- the body a replica is sent -----------------------------------------------------------


def _parsed(kind: Kind = Kind.CHAT, **fields: Any) -> ClientRequest:
    body = _chat(**fields) if kind is Kind.CHAT else {"model": "chat", "prompt": "p", **fields}
    # Spaced the way a client might write it, so re-encoding would be visible.
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    return parse_request(kind, raw)


UNCHANGED_CASES = [
    pytest.param({}, None, True, id="no-rename-no-stream"),
    pytest.param({}, "chat", True, id="same-name-is-no-rename"),
    pytest.param({"stream": False}, None, True, id="usage-not-asked-of-a-non-stream"),
    pytest.param({"stream": True}, None, False, id="stream-gateway-does-not-ask"),
    pytest.param(
        {"stream": True, "stream_options": {"include_usage": True}}, "chat", True, id="client-already-asked"
    ),
]


@pytest.mark.parametrize(("fields", "model_name", "ask_usage"), UNCHANGED_CASES)
def test_the_clients_own_bytes_go_out_when_nothing_changes(
    fields: dict[str, Any], model_name: str | None, ask_usage: bool
) -> None:
    request = _parsed(**fields)
    assert request.body_for(model_name, ask_usage=ask_usage) is request.raw


def test_a_rename_changes_the_model_and_keeps_every_other_field() -> None:
    request = _parsed(temperature=0.5, logit_bias={"50256": -100}, user="u-1")
    sent = orjson.loads(request.body_for("chat-sql", ask_usage=False))
    assert sent == {**request.body, "model": "chat-sql"}
    assert "stream_options" not in sent


def test_usage_is_asked_for_on_a_stream_the_client_did_not_ask_it_of() -> None:
    request = _parsed(stream=True)
    sent = orjson.loads(request.body_for(None, ask_usage=True))
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "chat"
    assert {k: v for k, v in sent.items() if k != "stream_options"} == request.body


OPTIONS_MERGE_CASES = [
    pytest.param(
        {"continuous_usage_stats": True}, {"continuous_usage_stats": True, "include_usage": True}, id="merged"
    ),
    pytest.param({"include_usage": False}, {"include_usage": True}, id="declined-is-overridden"),
    pytest.param(None, {"include_usage": True}, id="null-replaced"),
]


@pytest.mark.parametrize(("options", "expected"), OPTIONS_MERGE_CASES)
def test_asking_for_usage_keeps_the_clients_other_stream_options(
    options: Any, expected: dict[str, Any]
) -> None:
    request = _parsed(stream=True, stream_options=options)
    assert orjson.loads(request.body_for(None, ask_usage=True))["stream_options"] == expected


def test_rename_and_usage_together() -> None:
    request = _parsed(Kind.COMPLETIONS, stream=True, max_tokens=9)
    sent = orjson.loads(request.body_for("gpt-4o-mini", ask_usage=True))
    assert sent == {
        "model": "gpt-4o-mini",
        "prompt": "p",
        "stream": True,
        "max_tokens": 9,
        "stream_options": {"include_usage": True},
    }


def test_changing_the_body_for_one_replica_leaves_the_request_as_parsed() -> None:
    # A retry on another replica (another name, or none) must start from the client's body.
    request = _parsed(stream=True, stream_options={"continuous_usage_stats": True})
    before = orjson.loads(request.raw)
    request.body_for("renamed", ask_usage=True)
    assert request.body == before
    assert request.body["stream_options"] == {"continuous_usage_stats": True}
    assert request.body_for(None, ask_usage=False) is request.raw


# --- the engine's priority ---------------------------------------------------------------


def test_a_priority_scheduling_replica_is_sent_the_band_priority() -> None:
    request = _parsed(temperature=0.5)
    sent = orjson.loads(request.body_for(None, ask_usage=False, priority=200))
    assert sent == {**request.body, "priority": 200}


def test_the_top_band_priority_is_the_engines_default_and_the_bytes_are_kept() -> None:
    request = _parsed()
    assert request.body_for(None, ask_usage=False, priority=0) is request.raw


@pytest.mark.parametrize("priority", [None, 0, 300], ids=["no-priority-scheduling", "top-band", "bronze"])
def test_a_clients_own_priority_never_passes(priority: int | None) -> None:
    # The gateway decides; an engine without priority scheduling would refuse it (400).
    request = _parsed(priority=-1000)
    sent = orjson.loads(request.body_for(None, ask_usage=False, priority=priority))
    if priority:
        assert sent["priority"] == priority
    else:
        assert "priority" not in sent
    assert {k: v for k, v in sent.items() if k != "priority"} == {
        k: v for k, v in request.body.items() if k != "priority"
    }
    assert request.body["priority"] == -1000  # a retry elsewhere starts from the client's body


# --- the prompt token floor and the routes --------------------------------------------------

FLOOR_CASES = [
    pytest.param("", 0, id="empty"),
    pytest.param("x" * (CHARS_PER_TOKEN_CEILING - 1), 0, id="under-one-token"),
    pytest.param("x" * CHARS_PER_TOKEN_CEILING, 1, id="exactly-one-token"),
    pytest.param("x" * 6001, 1000, id="rounds-down"),
]


@pytest.mark.parametrize(("text", "floor"), FLOOR_CASES)
def test_the_prompt_token_floor(text: str, floor: int) -> None:
    request = parse_request(Kind.COMPLETIONS, _raw({"model": "m", "prompt": text}))
    assert request.prompt_token_floor == floor


def test_the_chat_floor_counts_the_roles_too() -> None:
    request = parse_request(
        Kind.CHAT, _raw({"model": "m", "messages": [{"role": "user", "content": "x" * 7}]})
    )
    # "user\n" + 7 + "\n" = 13 characters.
    assert request.prompt_token_floor == 13 // CHARS_PER_TOKEN_CEILING


PATH_CASES = [
    pytest.param(Kind.CHAT, b"/v1/chat/completions", id="chat"),
    pytest.param(Kind.COMPLETIONS, b"/v1/completions", id="completions"),
    pytest.param(Kind.EMBEDDINGS, b"/v1/embeddings", id="embeddings"),
]


@pytest.mark.parametrize(("kind", "path"), PATH_CASES)
def test_each_kind_is_forwarded_to_its_openai_route(kind: Kind, path: bytes) -> None:
    assert kind.path == path


# --- llama-server adapters ---------------------------------------------------------------


def test_an_adapter_on_llama_server_is_asked_for_by_its_number() -> None:
    request = _parsed()
    sent = orjson.loads(request.body_for("sql", ask_usage=False, lora=1))
    assert sent == {**request.body, "model": "sql", "lora": [{"id": 1, "scale": 1.0}]}


@pytest.mark.parametrize("lora", [None, 0])
def test_a_clients_own_lora_never_passes(lora: int | None) -> None:
    # It could name an adapter the caller may not see; the gateway chooses.
    request = _parsed(lora=[{"id": 3, "scale": 1.0}])
    sent = orjson.loads(request.body_for(None, ask_usage=False, lora=lora))
    assert sent.get("lora") == (None if lora is None else [{"id": 0, "scale": 1.0}])
