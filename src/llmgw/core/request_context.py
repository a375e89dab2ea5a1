"""The request the running code works for, as a context variable.

A request is served in a task of its own (llmgw.http.http1 starts one per request), and
a context variable set in that task is seen by everything the task calls and by no
other request: the log formatter (llmgw.obs.logs) reads it to put the request id on
every line written while serving, and the HTTP server reads it to put the same id on
a 500 it answers in the application's stead. It is the one module-level variable of
its kind, since a context variable is the way asyncio carries per-task state; it holds
nothing outside a request's task.
"""

from __future__ import annotations

import os
from contextvars import ContextVar

REQUEST_ID: ContextVar[str] = ContextVar("llmgw_request_id", default="")
"""The id of the request being served in this task; empty outside one."""


def minted_request_id() -> str:
    """A fresh request id, for an answer made where no application minted one (the HTTP
    server refusing a request it could not parse): 16 random hex digits."""
    return os.urandom(8).hex()
