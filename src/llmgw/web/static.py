"""The pages' own stylesheet and script, read from the package once at start and served
under /static/ with a validator (ETag) and a cache lifetime, so a browser fetches each
once per release. Nothing else is served from here: the names are the files shipped."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

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


def load_assets() -> dict[str, Asset]:
    """Every file under the package's static/ folder, by its URL path."""
    assets: dict[str, Asset] = {}
    folder = resources.files("llmgw.web") / "static"
    for item in folder.iterdir():
        suffix = "." + item.name.rpartition(".")[2]
        if not item.is_file() or suffix not in _TYPES:
            continue
        body = item.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        assets[f"{STATIC_PREFIX}/{item.name}"] = Asset(body, _TYPES[suffix], etag)
    return assets
