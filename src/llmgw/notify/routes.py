"""The admin API's `/api/notify` routes, behind the admin token like the rest of it:

GET   /api/notify/deliveries?webhook=NAME&limit=N   the delivery log, newest first
POST  /api/notify/test/NAME                         a `notify.test` event sent to NAME
                                                    now; what the receiver answered
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmgw.errors import BadRequest, MethodNotAllowed, NotFound
from llmgw.notify.outbox import Outbox
from llmgw.store.notify import NotifyRepo

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


class NotifyRoutes:
    def __init__(self, outbox: Outbox, repo: NotifyRepo) -> None:
        self._outbox = outbox
        self._repo = repo

    async def handle(
        self, method: str, parts: list[str], query: Mapping[str, str], body: bytes
    ) -> tuple[int, Any]:
        if parts == ["deliveries"]:
            if method != "GET":
                raise MethodNotAllowed(f"{method} /api/notify/deliveries is not served; use GET", allow="GET")
            rows = await self._repo.log(query.get("webhook") or None, _limit(query.get("limit")))
            return 200, {"data": [row.as_json() for row in rows]}
        if len(parts) == 2 and parts[0] == "test":
            if method != "POST":
                raise MethodNotAllowed(f"{method} /api/notify/test is not served; use POST", allow="POST")
            name = parts[1]
            if name not in self._outbox.hooks:
                known = ", ".join(sorted(self._outbox.hooks)) or "none are configured"
                raise NotFound(
                    f"no webhook is named {name!r} in notify.webhooks (the webhooks: {known})",
                    code="unknown_webhook",
                )
            attempt = await self._outbox.send_test(name)
            return 200, {"webhook": name, **attempt.as_json()}
        raise NotFound("no such route under /api/notify; see `llmgw ctl notify --help`", code="unknown_route")


def _limit(text: str | None) -> int:
    if not text:
        return DEFAULT_LIMIT
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {text!r}", param="limit")
    return int(text)
