"""A Responses API request as a chat completion, and the chat completion's answer as a
response object: the Responses API runs on the models' chat endpoints, so every engine
serves it. Pure functions, data in and data out; ids come from the `ids` function.

Items become chat messages: a developer message is a system one (not every chat
template knows the developer role), function_call items join the assistant message
they follow as its tool_calls, function_call_output items are tool messages.
"""

from __future__ import annotations

from typing import Any

from llmgw.batch.responses_request import Ids, Item, ResponseRequest

# The chat finish reasons that leave a response incomplete, and why.
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def items_to_messages(items: list[Item]) -> list[Item]:
    """Chat messages for the items, in order."""
    messages: list[Item] = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            messages.append({"role": role, "content": _content(item["content"])})
        elif kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item["output"]
            if isinstance(output, list):
                output = "".join(p.get("text", "") for p in output if isinstance(p, dict))
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
    return messages


def _content(parts: list[Item]) -> str | list[Item]:
    """Text alone is a string (what every engine takes); with an image, chat parts."""
    if all(p["type"] != "input_image" for p in parts):
        return "".join(p["text"] for p in parts)
    out: list[Item] = []
    for part in parts:
        if part["type"] == "input_image":
            out.append(
                {"type": "image_url", "image_url": {"url": part["image_url"], "detail": part["detail"]}}
            )
        else:
            out.append({"type": "text", "text": part["text"]})
    return out


def chat_body(request: ResponseRequest, context: list[Item]) -> dict[str, Any]:
    """The chat completion request: the instructions as the system message, then the
    context (earlier responses' or the conversation's items), then the new input."""
    messages: list[Item] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    messages += items_to_messages([*context, *request.input_items])
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.user is not None:
        body["user"] = request.user
    if request.tools:
        body["tools"] = [_chat_tool(tool) for tool in request.tools]
        body["parallel_tool_calls"] = request.parallel_tool_calls
        choice = request.tool_choice
        body["tool_choice"] = (
            {"type": "function", "function": {"name": choice["name"]}} if isinstance(choice, dict) else choice
        )
    fmt = request.text_format
    if fmt["type"] == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif fmt["type"] == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    if request.metadata:
        body["metadata"] = request.metadata
    return body


def _chat_tool(tool: Item) -> Item:
    function = {
        k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
    }
    return {"type": "function", "function": function}


def message_item(item_id: str, text: str, status: str = "completed") -> Item:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> Item:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def usage_of(chat_usage: Any) -> Item | None:
    """The chat usage as a response's."""
    if not isinstance(chat_usage, dict):
        return None
    prompt = int(chat_usage.get("prompt_tokens") or 0)
    completion = int(chat_usage.get("completion_tokens") or 0)
    cached = (chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(cached), "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(chat_usage.get("total_tokens") or prompt + completion),
    }


def outcome(finish_reason: Any) -> tuple[str, Item | None]:
    """The response's status and incomplete_details for a chat finish reason."""
    reason = _INCOMPLETE.get(finish_reason) if isinstance(finish_reason, str) else None
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def output_of(answer: dict[str, Any], ids: Ids) -> tuple[list[Item], str, Item | None, Item | None]:
    """A chat completion's first choice as output items, with the status, the
    incomplete details and the usage."""
    choices = answer.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    output: list[Item] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        output.append(message_item(ids("msg"), text))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        output.append(
            call_item(
                ids("fc"),
                call.get("id") or ids("call"),
                function.get("name", ""),
                function.get("arguments", ""),
            )
        )
    if not output:
        output.append(message_item(ids("msg"), ""))
    status, incomplete = outcome(choice.get("finish_reason"))
    return output, status, incomplete, usage_of(answer.get("usage"))


def response_object(
    request: ResponseRequest,
    response_id: str,
    created_at: int,
    *,
    status: str,
    output: list[Item],
    usage: Item | None = None,
    incomplete: Item | None = None,
    error: Item | None = None,
) -> dict[str, Any]:
    """The response object as OpenAI writes it."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "output": output,
        "parallel_tool_calls": request.parallel_tool_calls,
        "previous_response_id": request.previous_response_id,
        "conversation": {"id": request.conversation_id} if request.conversation_id else None,
        "reasoning": {"effort": None, "summary": None},
        "store": request.store,
        "temperature": request.temperature,
        "text": {"format": request.text_format},
        "tool_choice": request.tool_choice,
        "tools": request.tools,
        "top_p": request.top_p,
        "truncation": "disabled",
        "usage": usage,
        "user": request.user,
        "metadata": request.metadata,
    }
