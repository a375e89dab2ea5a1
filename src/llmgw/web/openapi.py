"""The client API as an OpenAPI 3.1 document, served at /openapi.json: the routes
llmgw.router.app answers (chat, completions, embeddings, the model listing), this
gateway's base URL, the models it lists, and bearer authentication where auth is on.

Request bodies are described by the fields the gateway itself reads and checks; the
rest of OpenAI's fields pass through to the engine untouched, so the schemas allow them
(additionalProperties) rather than listing every one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmgw import __version__

_ERROR_REF = {"$ref": "#/components/responses/Error"}
_ERRORS = {
    "400": "The request is malformed or asks for more than the model allows.",
    "401": "The API key is missing, unknown, expired or revoked.",
    "403": "The key may not do this.",
    "404": "No such model, or the key may not use it.",
    "413": "The request body is larger than this gateway accepts.",
    "429": "A rate limit or budget is reached (Retry-After says when to try again).",
    "503": "No replica can take the request now (Retry-After says when to try again).",
    "504": "The model did not answer in time.",
}


def _model_field(models: Sequence[str]) -> dict[str, Any]:
    field: dict[str, Any] = {"type": "string", "description": "A model this gateway lists (GET /models)."}
    if models:
        field["examples"] = list(models)
    return field


def _errors(statuses: Sequence[str]) -> dict[str, Any]:
    return {status: {**_ERROR_REF, "description": _ERRORS[status]} for status in statuses}


def _generation(summary: str, schema: str, *, streams: bool) -> dict[str, Any]:
    ok: dict[str, Any] = {"application/json": {"schema": {"type": "object"}}}
    if streams:
        ok["text/event-stream"] = {
            "schema": {
                "type": "string",
                "description": "With stream: true, server-sent events ending with data: [DONE].",
            }
        }
    return {
        "post": {
            "summary": summary,
            "operationId": schema[0].lower() + schema[1:],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
            },
            "responses": {
                "200": {"description": "The model's answer.", "content": ok},
                **_errors(("400", "401", "404", "413", "429", "503", "504")),
            },
        }
    }


def openapi_document(base: str, models: Sequence[str], *, needs_key: bool) -> dict[str, Any]:
    """The document for a gateway reached at `base` (…/v1) listing `models`."""
    model = _model_field(models)
    text_or_list = {
        "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    }
    schemas: dict[str, Any] = {
        "ChatCompletionRequest": {
            "type": "object",
            "required": ["model", "messages"],
            "properties": {
                "model": model,
                "messages": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["role"],
                        "properties": {"role": {"type": "string"}, "content": {}},
                    },
                },
                "stream": {"type": "boolean", "default": False},
                "max_tokens": {"type": "integer", "minimum": 1},
                "max_completion_tokens": {"type": "integer", "minimum": 1},
                "stream_options": {
                    "type": "object",
                    "properties": {"include_usage": {"type": "boolean"}},
                },
            },
            "additionalProperties": True,
        },
        "CompletionRequest": {
            "type": "object",
            "required": ["model", "prompt"],
            "properties": {
                "model": model,
                "prompt": text_or_list,
                "stream": {"type": "boolean", "default": False},
                "max_tokens": {"type": "integer", "minimum": 1},
            },
            "additionalProperties": True,
        },
        "EmbeddingRequest": {
            "type": "object",
            "required": ["model", "input"],
            "properties": {"model": model, "input": text_or_list},
            "additionalProperties": True,
        },
        "Model": {
            "type": "object",
            "required": ["id", "object"],
            "properties": {
                "id": {"type": "string"},
                "object": {"const": "model"},
                "owned_by": {"type": "string"},
                "description": {"type": "string"},
                "aliases": {"type": "array", "items": {"type": "string"}},
                "context_length": {"type": ["integer", "null"]},
                "max_output": {"type": ["integer", "null"]},
                "simulated": {"type": "boolean"},
            },
        },
        "ModelList": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}},
            },
        },
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["message", "type"],
                    "properties": {
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                        "param": {"type": ["string", "null"]},
                        "code": {"type": ["string", "null"]},
                    },
                }
            },
        },
    }
    listing_errors = _errors(("401",))
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "llmgw client API",
            "version": __version__,
            "description": "OpenAI-compatible API of this gateway. Errors have OpenAI's shape.",
        },
        "servers": [{"url": base}],
        "paths": {
            "/chat/completions": _generation("Chat completions", "ChatCompletionRequest", streams=True),
            "/completions": _generation("Text completions", "CompletionRequest", streams=True),
            "/embeddings": _generation("Embeddings", "EmbeddingRequest", streams=False),
            "/models": {
                "get": {
                    "summary": "The models this key may use",
                    "operationId": "listModels",
                    "responses": {
                        "200": {
                            "description": "The models.",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/ModelList"}}
                            },
                        },
                        **listing_errors,
                    },
                }
            },
            "/models/{model}": {
                "get": {
                    "summary": "One model",
                    "operationId": "getModel",
                    "parameters": [
                        {"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {
                        "200": {
                            "description": "The model.",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Model"}}
                            },
                        },
                        **_errors(("401", "404")),
                    },
                }
            },
        },
        "components": {
            "schemas": schemas,
            "responses": {
                "Error": {
                    "description": "A refusal, in OpenAI's error shape.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
            },
        },
    }
    if needs_key:
        document["components"]["securitySchemes"] = {"apiKey": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"apiKey": []}]
    return document
