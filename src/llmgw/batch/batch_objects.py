"""The Files and Batch APIs' objects as OpenAI writes them (pure: rows in, JSON-ready
dictionaries out), so what the `openai` SDK parses is what it gets from OpenAI."""

from __future__ import annotations

import os
from typing import Any

from llmgw.store.batch_files import FileRow

# Batch statuses; the last four are final.
VALIDATING = "validating"
IN_PROGRESS = "in_progress"
FINALIZING = "finalizing"
CANCELLING = "cancelling"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
EXPIRED = "expired"
UNFINISHED: tuple[str, ...] = (VALIDATING, IN_PROGRESS, FINALIZING, CANCELLING)
COMPLETION_WINDOW_S = 24 * 3600.0

# Fields of a stored batch that are the gateway's own, never shown.
_PRIVATE = "_llmgw"


def new_id(prefix: str) -> str:
    return prefix + os.urandom(12).hex()


def owner_of(kind: str, project_id: str | None, user_id: str | None) -> str:
    """What owns a caller's files and batches: its project, or the person for a personal key."""
    if kind == "project" and project_id:
        return f"project:{project_id}"
    return f"user:{user_id}"


def file_object(row: FileRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "object": "file",
        "bytes": row.bytes,
        "created_at": int(row.created_at),
        "expires_at": None if row.expires_at is None else int(row.expires_at),
        "filename": row.filename,
        "purpose": row.purpose,
        "status": "processed",
        "status_details": None,
    }


def page(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """One page of a cursor-paginated list (`after` = the last id of the page before)."""
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


def new_batch(
    batch_id: str,
    *,
    endpoint: str,
    input_file_id: str,
    total: int,
    metadata: dict[str, str] | None,
    now: float,
) -> dict[str, Any]:
    """A batch as created, with the ids its output and error files will have."""
    return {
        "id": batch_id,
        "object": "batch",
        "endpoint": endpoint,
        "errors": None,
        "input_file_id": input_file_id,
        "completion_window": "24h",
        "status": VALIDATING,
        "output_file_id": None,
        "error_file_id": None,
        "created_at": int(now),
        "in_progress_at": None,
        "expires_at": int(now + COMPLETION_WINDOW_S),
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": total, "completed": 0, "failed": 0},
        "metadata": metadata,
        _PRIVATE: {"output": new_id("file-"), "error": new_id("file-")},
    }


def public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if k != _PRIVATE}


def reserved_file_ids(batch: dict[str, Any]) -> tuple[str, str]:
    """The ids the batch's output and error files get when it ends."""
    private = batch[_PRIVATE]
    return str(private["output"]), str(private["error"])


def moved(batch: dict[str, Any], status: str, now: float) -> dict[str, Any]:
    """The batch in `status` from `now`, with the matching timestamp set."""
    changed = dict(batch)
    changed["status"] = status
    stamp = {
        IN_PROGRESS: "in_progress_at",
        FINALIZING: "finalizing_at",
        CANCELLING: "cancelling_at",
        COMPLETED: "completed_at",
        FAILED: "failed_at",
        CANCELLED: "cancelled_at",
        EXPIRED: "expired_at",
    }.get(status)
    if stamp is not None and changed.get(stamp) is None:
        changed[stamp] = int(now)
    return changed


def output_line(request_id: str, custom_id: str, status: int, body: object, error: object) -> dict[str, Any]:
    """One line of an output or error file."""
    return {
        "id": request_id,
        "custom_id": custom_id,
        "response": None if status == 0 else {"status_code": status, "request_id": request_id, "body": body},
        "error": error,
    }
