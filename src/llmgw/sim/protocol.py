"""The OpenAI request bodies the sim reads, parsed into typed values or refused.

Only what the behaviour model uses is read (model, prompt or messages, max_tokens,
stop, n, seed, stream, stream_options and vLLM's priority); other fields are accepted and ignored, as
engines do. A bad field is refused with a 400 naming the field and the fix; an unknown
model with a 404, both in OpenAI's error shape (see `ApiError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


class ApiError(Exception):
    """A refusal the HTTP layer answers with `status` and OpenAI's error envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "BadRequestError",
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})

    def body(self) -> bytes:
        """`{"error": {"message", "type", "param", "code"}}`."""
        return orjson.dumps(
            {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}}
        )


def bad_request(message: str, param: str | None = None) -> ApiError:
    """A 400 naming the field."""
    return ApiError(400, message, param=param)


@dataclass(frozen=True, slots=True)
class Sampling:
    """The generation parameters shared by chat and completions."""

    model: str
    stream: bool
    include_usage: bool
    max_tokens: int | None
    stop: tuple[str, ...]
    seed: int | None
    priority: int = 0
    """vLLM's request priority, lower served sooner; only a priority-scheduled engine takes
    a nonzero one."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A `/v1/chat/completions` body."""

    sampling: Sampling
    messages: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """A `/v1/completions` body: one prompt, as text or token ids."""

    sampling: Sampling
    prompt: str | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    """A `/v1/embeddings` body: each input as text or token ids."""

    model: str
    inputs: tuple[str | tuple[int, ...], ...]
    base64: bool
    dimensions: int | None


def parse_json(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


def resolve_model(body: Mapping[str, Any], served: tuple[str, ...]) -> str:
    """The requested model, which must be served; the first served name if none is given."""
    model = body.get("model")
    if model is None:
        return served[0]
    if not isinstance(model, str):
        raise bad_request("model: must be a string naming a served model", "model")
    if model not in served:
        raise ApiError(404, f"The model `{model}` does not exist.", kind="NotFoundError", param="model")
    return model


def _optional_int(body: Mapping[str, Any], key: str, minimum: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{key}: must be a whole number", key)
    if minimum is not None and value < minimum:
        raise bad_request(f"{key}: must be at least {minimum}, got {value}", key)
    return value


def _bool(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"{key}: must be true or false", key)
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return tuple(stop)
    raise bad_request("stop: must be a string or a list of strings", "stop")


def parse_sampling(body: Mapping[str, Any], served: tuple[str, ...], *, chat: bool) -> Sampling:
    """The parameters every generation request shares."""
    model = resolve_model(body, served)
    n = _optional_int(body, "n", 1)
    if n not in (None, 1):
        raise bad_request("n: the sim engine generates one choice per request; send n=1 or leave it out", "n")
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise bad_request("stream_options: only allowed when stream is true", "stream_options")
        if not isinstance(options, dict):
            raise bad_request(
                'stream_options: must be an object such as {"include_usage": true}', "stream_options"
            )
        include_usage = _bool(options, "include_usage")
    max_tokens = _optional_int(body, "max_tokens", 1)
    if chat and max_tokens is None:
        max_tokens = _optional_int(body, "max_completion_tokens", 1)
    return Sampling(
        model=model,
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        stop=_stop(body),
        seed=_optional_int(body, "seed"),
        priority=_optional_int(body, "priority") or 0,
    )


def parse_chat(raw: bytes, served: tuple[str, ...]) -> ChatRequest:
    """A chat completion request, or an ApiError."""
    body = parse_json(raw)
    sampling = parse_sampling(body, served, chat=True)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: must be a non-empty list of {role, content} objects", "messages")
    return ChatRequest(sampling=sampling, messages=tuple(messages))


def _token_ids(value: list[Any]) -> tuple[int, ...] | None:
    if value and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return tuple(value)
    return None


def parse_completion(raw: bytes, served: tuple[str, ...]) -> CompletionRequest:
    """A text completion request (one prompt), or an ApiError."""
    body = parse_json(raw)
    sampling = parse_sampling(body, served, chat=False)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return CompletionRequest(sampling=sampling, prompt=prompt)
    if isinstance(prompt, list):
        ids = _token_ids(prompt)
        if ids is not None:
            return CompletionRequest(sampling=sampling, prompt=ids)
    raise bad_request(
        "prompt: must be a string or a list of token ids; the sim serves one prompt per request", "prompt"
    )


def parse_embedding(raw: bytes, served: tuple[str, ...], max_dimensions: int) -> EmbeddingRequest:
    """An embeddings request, or an ApiError."""
    body = parse_json(raw)
    model = resolve_model(body, served)
    raw_input = body.get("input")
    inputs: list[str | tuple[int, ...]] = []
    if isinstance(raw_input, str):
        inputs.append(raw_input)
    elif isinstance(raw_input, list) and raw_input:
        ids = _token_ids(raw_input)
        if ids is not None:
            inputs.append(ids)
        else:
            for i, item in enumerate(raw_input):
                item_ids = _token_ids(item) if isinstance(item, list) else None
                if isinstance(item, str):
                    inputs.append(item)
                elif item_ids is not None:
                    inputs.append(item_ids)
                else:
                    raise bad_request(f"input[{i}]: must be a string or a list of token ids", "input")
    else:
        raise bad_request("input: must be a string, a list of strings, or token ids", "input")
    encoding = body.get("encoding_format", "float") or "float"
    if encoding not in ("float", "base64"):
        raise bad_request("encoding_format: must be float or base64", "encoding_format")
    dimensions = _optional_int(body, "dimensions", 1)
    if dimensions is not None and dimensions > max_dimensions:
        raise bad_request(f"dimensions: this model's embeddings have at most {max_dimensions}", "dimensions")
    return EmbeddingRequest(
        model=model, inputs=tuple(inputs), base64=encoding == "base64", dimensions=dimensions
    )
