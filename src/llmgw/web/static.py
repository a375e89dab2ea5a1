"""The pages' own stylesheet and script, read from the package once at start and served
under /static/ with a validator (ETag) and a cache lifetime, so a browser fetches each
once per release. Nothing else is served from here: the names are the files shipped."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from llmgw.http.rsgi import HTTPProtocol, Scope

STATIC_PREFIX = "/static"
# A day: long enough that pages load from the cache, short enough that a release's new
# stylesheet is seen the same week without versioned names.
CACHE_CONTROL = "public, max-age=86400"
_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


def load_assets(prefix: str = STATIC_PREFIX) -> dict[str, Asset]:
    """Every file under the package's static/ folder, by its URL path under `prefix`."""
    assets: dict[str, Asset] = {}
    folder = resources.files("llmgw.web") / "static"
    for item in folder.iterdir():
        suffix = "." + item.name.rpartition(".")[2]
        if not item.is_file() or suffix not in _TYPES:
            continue
        body = item.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        assets[f"{prefix}/{item.name}"] = Asset(body, _TYPES[suffix], etag)
    return assets


def serve_asset(assets: Mapping[str, Asset], scope: Scope, proto: HTTPProtocol) -> None:
    """Answers a request for a static file: the file, 304 when the browser's copy is
    current, 404 for a name that is not shipped."""
    asset = assets.get(scope.path)
    if asset is None:
        proto.response_bytes(404, [("content-type", "text/plain; charset=utf-8")], b"no such file\n")
        return
    headers = [
        ("etag", asset.etag),
        ("cache-control", CACHE_CONTROL),
        ("x-content-type-options", "nosniff"),
    ]
    if scope.headers.get("if-none-match") == asset.etag:
        proto.response_bytes(304, headers, b"")
        return
    proto.response_bytes(200, [("content-type", asset.content_type), *headers], asset.body)
