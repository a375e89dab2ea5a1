"""Memory and size bounds of the router's stored work: the Files and Batch APIs, and the
answer cache.

Each zero here means "the built-in amount". The value written is kept as written, so
`llmgw config show` says what the file said, and code reads the `effective_…` value.
"""

from __future__ import annotations

from pydantic import model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import NonNegativeInt
from llmgw.core.strict import Strict

MIB = 1 << 20

DEFAULT_BATCH_MAX_FILE_BYTES = 100 * MIB
DEFAULT_BATCH_MAX_LINES = 50_000
DEFAULT_BATCH_CONCURRENCY = 4
DEFAULT_BATCH_RETAIN_DAYS = 30
DEFAULT_CACHE_MAX_BYTES = 128 * MIB
DEFAULT_CACHE_MAX_ENTRY_BYTES = 1 * MIB


class Batch(Strict):
    """Limits of the OpenAI-style Files and Batch endpoints, where an uploaded JSONL file
    of requests runs in the background at the lowest priority and produces a results
    file. Requires the auth store (llmgw.batch serves them with auth on).
    """

    max_file_bytes: NonNegativeInt = 0
    """Largest uploaded file; 0 is 100 MiB."""
    max_lines: NonNegativeInt = 0
    """Most requests in one batch; 0 is 50 000."""
    concurrency: NonNegativeInt = 0
    """Parallel requests per batch; 0 is 4. They queue in the bottom admission band, so
    interactive traffic always goes first."""
    retain_days: NonNegativeInt = 0
    """Days before a batch's output and error files are removed; 0 is 30. Uploaded
    input files are kept until someone deletes them."""

    @property
    def effective_max_file_bytes(self) -> int:
        return self.max_file_bytes or DEFAULT_BATCH_MAX_FILE_BYTES

    @property
    def effective_max_lines(self) -> int:
        return self.max_lines or DEFAULT_BATCH_MAX_LINES

    @property
    def effective_concurrency(self) -> int:
        return self.concurrency or DEFAULT_BATCH_CONCURRENCY

    @property
    def effective_retain_days(self) -> int:
        return self.retain_days or DEFAULT_BATCH_RETAIN_DAYS


class Cache(Strict):
    """Memory budget of the response cache, per gateway process and lost on restart.
    Projects switch caching on for themselves (`llmgw keys cache`)."""

    max_bytes: NonNegativeInt = 0
    """Total size across all projects; 0 is 128 MiB. Least recently used entries are
    evicted first."""
    max_entry_bytes: NonNegativeInt = 0
    """Largest answer kept; 0 is 1 MiB."""

    @property
    def effective_max_bytes(self) -> int:
        return self.max_bytes or DEFAULT_CACHE_MAX_BYTES

    @property
    def effective_max_entry_bytes(self) -> int:
        return self.max_entry_bytes or DEFAULT_CACHE_MAX_ENTRY_BYTES

    @model_validator(mode="after")
    def _entry_fits(self) -> Cache:
        if self.effective_max_entry_bytes > self.effective_max_bytes:
            refuse(
                "Cache",
                [
                    Problem(
                        ("max_entry_bytes",),
                        f"{self.effective_max_entry_bytes} bytes is more than the whole cache "
                        f"({self.effective_max_bytes}): lower it or raise max_bytes",
                    )
                ],
            )
        return self
