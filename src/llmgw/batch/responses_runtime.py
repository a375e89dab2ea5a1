"""The Responses API as the server runs it: where its objects are kept, for how long,
and the sweep that deletes them after that.

With auth on they are kept in the auth store, per project or person, for
`threads.retain_hours` when set, else 30 days (how long OpenAI keeps a stored
response). With auth off they are kept in the `threads` pool, the SQLite file
`threads.store`, for `threads.retain_hours`; without `threads.store` nothing is kept
(responses are answered, not stored; conversations are refused, saying what to set).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from llmgw.batch.responses_app import ResponsesApp
from llmgw.batch.responses_context import Context
from llmgw.config import Settings
from llmgw.errors import StoreError
from llmgw.store import Store
from llmgw.store.responses import ResponsesRepo

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate

log = logging.getLogger(__name__)

DEFAULT_RETAIN_S = 30 * 24 * 3600.0
# How often expired objects are looked for: retention is counted in hours.
SWEEP_INTERVAL_S = 300.0


def retention_s(settings: Settings) -> float:
    hours = settings.threads.retain_hours
    return hours * 3600.0 if hours > 0 else DEFAULT_RETAIN_S


def threads_location(settings: Settings, config_dir: Path | None) -> str:
    """`threads.store`, a relative path read beside the configuration."""
    path = Path(settings.threads.store)
    if not path.is_absolute() and config_dir is not None:
        path = config_dir / path
    return str(path)


@contextlib.asynccontextmanager
async def responses_app(
    settings: Settings, store: Store | None, auth: AuthGate | None, config_dir: Path | None
) -> AsyncIterator[ResponsesApp]:
    """The application, with its own `threads` store opened (and closed on the way out)
    when auth is off and `threads.store` names one."""
    own: Store | None = None
    repo: ResponsesRepo | None = None
    if auth is not None and store is not None:
        repo = store.responses
    elif auth is None and settings.threads.store:
        own = await Store.open(threads_location(settings, config_dir))
        repo = own.responses
        log.info("responses and conversations kept in the threads pool %s", own)
    try:
        yield ResponsesApp(Context(repo, retention_s(settings)), settings.router.max_body_bytes, auth)
    finally:
        if own is not None:
            await own.close()


async def sweep(
    repo: ResponsesRepo, clock: Callable[[], float] = time.time, interval_s: float = SWEEP_INTERVAL_S
) -> None:
    """Deletes expired responses and conversations every `interval_s`, until cancelled; a
    store that does not answer is logged and tried again next time."""
    while True:
        try:
            gone = await repo.sweep(clock())
            if gone:
                log.info("deleted %d expired responses and conversations", gone)
        except StoreError as exc:
            log.warning("the sweep of expired responses failed: %s", exc)
        await asyncio.sleep(interval_s)
