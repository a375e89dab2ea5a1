"""Applications mounted on the client port: the longest prefix that matches answers, so
an application under another's prefix (/v1/responses under /v1) is reached whatever
order the server listed them in."""

from __future__ import annotations

import asyncio
from typing import Any

from llmgw.config import settings_from_mapping
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.server.gateway import Gateway


class _Scope:
    proto = "http"
    method = "GET"
    query_string = ""

    def __init__(self, path: str) -> None:
        self.path = path
        self.headers: dict[str, str] = {}


class _Proto:
    def __init__(self) -> None:
        self.status = 0

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status


def _answering(status: int) -> Any:
    async def app(scope: Scope, proto: HTTPProtocol) -> None:
        proto.response_bytes(status, [], b"")

    return app


def test_the_longest_matching_prefix_answers() -> None:
    document = {"endpoints": [{"id": "r1", "url": "http://127.0.0.1:9", "models": ["m"]}]}
    mounts = [("/v1", _answering(201)), ("/v1/responses", _answering(202))]
    gateway = Gateway(settings_from_mapping(document, source="test", environ={}), mounts=mounts)

    def status(path: str) -> int:
        proto = _Proto()
        asyncio.run(gateway.app(_Scope(path), proto))  # type: ignore[arg-type]
        return proto.status

    try:
        assert status("/v1/responses/resp_1") == 202
        assert status("/v1/responses") == 202
        assert status("/v1/responsesx") == 201
        assert status("/v1/files") == 201
    finally:
        gateway.close()
