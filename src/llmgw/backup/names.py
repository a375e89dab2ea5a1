"""Archive names, and which archives a directory keeps: pure functions of names and times.

An archive is `llmgw-backup-YYYYMMDDTHHMMSSZ.tar.gz`, with `.age` after it when it is
encrypted. The time in the name is when the backup began, in UTC, so names sort as
times do: pruning and the "last success" metric read names only, never file times,
which a copy or a restore from tape would change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

PREFIX = "llmgw-backup-"
TAR_SUFFIX = ".tar.gz"
AGE_SUFFIX = ".age"
PARTIAL_SUFFIX = ".partial"
"""A file still being written or copied: never counted, pruned or read."""
_NAME = re.compile(r"^llmgw-backup-(\d{8}T\d{6}Z)\.tar\.gz(\.age)?$")
_STAMP = "%Y%m%dT%H%M%SZ"


def archive_name(started: float, encrypted: bool) -> str:
    """The file name of an archive begun at `started` (UNIX seconds)."""
    stamp = datetime.fromtimestamp(started, UTC).strftime(_STAMP)
    return PREFIX + stamp + TAR_SUFFIX + (AGE_SUFFIX if encrypted else "")


def archive_time(name: str) -> float | None:
    """When the archive named `name` was begun; None for a name that is not an archive's."""
    found = _NAME.match(name)
    if found is None:
        return None
    return datetime.strptime(found.group(1), _STAMP).replace(tzinfo=UTC).timestamp()


def archives(names: Iterable[str]) -> list[str]:
    """The archives among `names`, newest first."""
    return sorted((name for name in names if archive_time(name) is not None), reverse=True)


def to_prune(names: Iterable[str], keep: int) -> list[str]:
    """The archives among `names` beyond the newest `keep`."""
    return archives(names)[keep:]


def newest_time(names: Iterable[str]) -> float | None:
    """When the newest archive among `names` was begun; None when there is none."""
    found = archives(names)
    return archive_time(found[0]) if found else None
