"""The archive's manifest: what it holds and the SHA-256 of each member, checked whole
before a restore touches anything.

Members are named by role, never by the paths they came from (`store/llmgw.db`,
`store/dump.sql`, `ca/ca_file`, `config/llmgw.yaml`), so reading an archive never
writes where a name inside it points. `origins` records where each came from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SQLITE_MEMBER = "store/llmgw.db"
POSTGRES_MEMBER = "store/dump.sql"
STORE_KINDS = ("sqlite", "postgresql")
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Manifest:
    """What one archive holds."""

    created: float
    """When the backup began, UNIX seconds."""
    store_kind: str
    """sqlite or postgresql."""
    schema_revision: str
    """The store's Alembic revision when it was copied."""
    members: Mapping[str, str]
    """Member name → SHA-256 (hex) of its bytes."""
    origins: Mapping[str, str] = field(default_factory=dict)
    """Member name → the path it was read from (the CA files, the configuration)."""
    modes: Mapping[str, int] = field(default_factory=dict)
    """Member name → its file mode where it was read from."""
    llmgw_version: str = ""
    version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "version": self.version,
                "llmgw_version": self.llmgw_version,
                "created": self.created,
                "store_kind": self.store_kind,
                "schema_revision": self.schema_revision,
                "members": dict(self.members),
                "origins": dict(self.origins),
                "modes": dict(self.modes),
            },
            option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS,
        )

    @property
    def store_member(self) -> str:
        return SQLITE_MEMBER if self.store_kind == "sqlite" else POSTGRES_MEMBER


def parse_manifest(data: bytes) -> Manifest:
    """The manifest in `data`; ValueError saying what is wrong with it."""
    try:
        raw: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError("its manifest is not JSON") from exc
    if not isinstance(raw, dict):
        raise ValueError("its manifest is not an object")
    if raw.get("version") != FORMAT_VERSION:
        raise ValueError(f"its manifest is format {raw.get('version')!r}; this llmgw reads {FORMAT_VERSION}")
    members = raw.get("members")
    if raw.get("store_kind") not in STORE_KINDS or not isinstance(members, dict):
        raise ValueError("its manifest names no store")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in members.items()):
        raise ValueError("its manifest's members are not name → SHA-256")
    manifest = Manifest(
        created=float(raw.get("created", 0)),
        store_kind=str(raw["store_kind"]),
        schema_revision=str(raw.get("schema_revision", "")),
        members=members,
        origins={str(k): str(v) for k, v in dict(raw.get("origins") or {}).items()},
        modes={str(k): int(v) for k, v in dict(raw.get("modes") or {}).items()},
        llmgw_version=str(raw.get("llmgw_version", "")),
    )
    if manifest.store_member not in members:
        raise ValueError(f"its manifest lists no {manifest.store_member}")
    return manifest


def check_members(manifest: Manifest, digests: Mapping[str, str]) -> None:
    """`digests` (member → SHA-256 of what the archive holds) against the manifest;
    ValueError naming the first member that differs, is missing or is extra."""
    for name, expected in sorted(manifest.members.items()):
        found = digests.get(name)
        if found is None:
            raise ValueError(f"{name} is listed in its manifest but missing")
        if found != expected:
            raise ValueError(f"{name} does not match its SHA-256 in the manifest (damaged)")
    extra = sorted(set(digests) - set(manifest.members))
    if extra:
        raise ValueError(f"{extra[0]} is in it but not in its manifest")
