"""A Responses API request, read and checked: what `POST /v1/responses` (and a
conversation's new items) may hold, each item given an id as OpenAI's are.

Pure: the ids come from the `ids` function passed in (`prefix -> id`), so tests choose
them. Every refusal names the field (`input[2].type`) and what would be taken instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmgw.errors import BadRequest

Item = dict[str, Any]
Ids = Callable[[str], str]

_MESSAGE_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")
_ITEM_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}


@dataclass
class ResponseRequest:
    model: str
    input_items: list[Item]
    instructions: str | None = None
    tools: list[Item] = field(default_factory=list)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    conversation_id: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    text_format: Item = field(default_factory=lambda: {"type": "text"})
    user: str | None = None


def _bad(message: str, param: str) -> BadRequest:
    return BadRequest(message, param=param, code="invalid_request")


def _optional(body: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
        raise _bad(f"{name} must be {what}", name)
    return value


def parse_request(raw: bytes, ids: Ids) -> ResponseRequest:
    """The request in `raw`, or BadRequest naming the field that is wrong."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", code="invalid_request")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required: the name of a chat model", "model")
    if "input" not in body:
        raise _bad("input is required: a string or a list of items", "input")
    request = ResponseRequest(model=model, input_items=normalize_items(body["input"], ids, "input"))
    request.instructions = _optional(body, "instructions", str, "a string")
    request.tools = check_tools(body.get("tools"))
    request.tool_choice = check_tool_choice(body.get("tool_choice", "auto"))
    request.parallel_tool_calls = _flag(body, "parallel_tool_calls", True)
    request.stream = _flag(body, "stream", False)
    request.store = _flag(body, "store", True)
    request.previous_response_id = _optional(body, "previous_response_id", str, "a response id")
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if conversation is not None and not isinstance(conversation, str):
        raise _bad('conversation must be a conversation id or {"id": ...}', "conversation")
    request.conversation_id = conversation
    if request.conversation_id and request.previous_response_id:
        raise _bad("give previous_response_id or conversation, not both", "previous_response_id")
    request.max_output_tokens = _optional(body, "max_output_tokens", int, "a positive integer")
    if request.max_output_tokens is not None and request.max_output_tokens < 1:
        raise _bad("max_output_tokens must be a positive integer", "max_output_tokens")
    request.temperature = _optional(body, "temperature", (int, float), "a number")
    request.top_p = _optional(body, "top_p", (int, float), "a number")
    request.metadata = _optional(body, "metadata", dict, "an object of strings") or {}
    request.user = _optional(body, "user", str, "a string")
    text = _optional(body, "text", dict, "an object") or {}
    fmt = text.get("format") or {"type": "text"}
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise _bad("text.format.type must be text, json_object or json_schema", "text.format")
    request.text_format = fmt
    return request


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(f"{name} must be true or false", name)
    return value


def check_tools(tools: Any) -> list[Item]:
    """Function tools only: the engines behind the gateway run no hosted tools."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _bad("tools must be a list of function tools", "tools")
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise _bad(
                f"tools[{index}] is a {kind!r} tool: this gateway passes only function tools to its models",
                f"tools[{index}].type",
            )
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise _bad(f"tools[{index}].name is required", f"tools[{index}].name")
    return tools


def check_tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return choice
    raise _bad('tool_choice must be auto, none, required or {"type": "function", "name": ...}', "tool_choice")


def normalize_items(value: Any, ids: Ids, param: str) -> list[Item]:
    """Input items as OpenAI stores them: a string is one user message; each item gets an
    id and a status; content given as a string becomes one input_text part."""
    if isinstance(value, str):
        value = [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise _bad(f"{param} must be a string or a list of items", param)
    return [_item(item, ids, f"{param}[{index}]") for index, item in enumerate(value)]


def _item(item: Any, ids: Ids, where: str) -> Item:
    if not isinstance(item, dict):
        raise _bad(f"{where} must be an object", where)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return _message(item, ids, where)
    if kind == "function_call":
        for name in ("call_id", "name", "arguments"):
            if not isinstance(item.get(name), str):
                raise _bad(f"{where}.{name} is required (a string)", f"{where}.{name}")
        return {
            "id": item.get("id") or ids("fc"),
            "type": "function_call",
            "call_id": item["call_id"],
            "name": item["name"],
            "arguments": item["arguments"],
            "status": "completed",
        }
    if kind == "function_call_output":
        output = item.get("output")
        if not isinstance(item.get("call_id"), str) or not isinstance(output, str | list):
            raise _bad(f"{where} needs call_id and output", where)
        return {
            "id": item.get("id") or ids("fco"),
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": output,
            "status": "completed",
        }
    raise _bad(
        f"{where}.type {kind!r} is not taken here: use message, function_call or function_call_output items",
        f"{where}.type",
    )


def _message(item: Item, ids: Ids, where: str) -> Item:
    role = item.get("role")
    if role not in _MESSAGE_ROLES:
        raise _bad(f"{where}.role must be one of {', '.join(_MESSAGE_ROLES)}", f"{where}.role")
    content = item.get("content")
    text_type = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        parts: list[Item] = [{"type": text_type, "text": content}]
    elif isinstance(content, list):
        parts = [_part(part, text_type, f"{where}.content[{i}]") for i, part in enumerate(content)]
    else:
        raise _bad(f"{where}.content must be a string or a list of parts", f"{where}.content")
    if role == "assistant":
        for part in parts:
            part.setdefault("annotations", [])
    return {
        "id": item.get("id") or ids("msg"),
        "type": "message",
        "role": role,
        "content": parts,
        "status": "completed",
    }


def _part(part: Any, text_type: str, where: str) -> Item:
    if not isinstance(part, dict):
        raise _bad(f"{where} must be an object", where)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        text = part.get("text", part.get("refusal"))
        if not isinstance(text, str):
            raise _bad(f"{where}.text is required (a string)", f"{where}.text")
        return {"type": text_type if kind == "text" else kind, "text": text}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str):
            raise _bad(
                f"{where}.image_url is required: images are passed by URL or data URL", f"{where}.image_url"
            )
        return {"type": "input_image", "image_url": url, "detail": part.get("detail", "auto")}
    raise _bad(f"{where}.type {kind!r} is not taken here: use input_text or input_image", f"{where}.type")
