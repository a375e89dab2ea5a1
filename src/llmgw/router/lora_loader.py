"""Loading LoRA adapters onto replicas on demand, as vLLM takes them at run time
(`POST /v1/load_lora_adapter` with `lora_name` and `lora_path`, and
`/v1/unload_lora_adapter` with `lora_name`).

Only for models with `max_loaded_adapters`: their replicas start holding none. The
bookkeeping is `AdapterSlots`; this module does the calls. Loads and unloads on one
replica run one at a time under that replica's lock, so concurrent first requests for
an adapter load it once (the second finds it held), and two loads never both take the
last slot. A replica whose published description changed (a restart republishes it) is
forgotten: it holds nothing until the router loads again.
"""

from __future__ import annotations

import asyncio
import json
import logging

from llmgw.errors import UpstreamError, UpstreamStatus
from llmgw.router.endpoints import Endpoint
from llmgw.router.forward import request_head
from llmgw.router.lora_slots import AdapterSlots

log = logging.getLogger(__name__)

LOAD_PATH = b"/v1/load_lora_adapter"
UNLOAD_PATH = b"/v1/unload_lora_adapter"


class SlotsBusy(UpstreamError):
    """Every adapter slot of the replica has requests in flight: nothing can be unloaded."""


class AdapterLoader:
    """Makes sure a replica holds an adapter before a request for it is sent there."""

    def __init__(self, timeout_s: float) -> None:
        self.slots = AdapterSlots()
        self._timeout = timeout_s
        self._locks: dict[str, asyncio.Lock] = {}
        self._seen: dict[str, Endpoint] = {}
        self.loads = 0
        self.unloads = 0

    def _check_identity(self, endpoint: Endpoint) -> None:
        # The registry keeps the Endpoint object while the replica's description stays
        # the same; a new object under the same id is a replica described anew.
        seen = self._seen.get(endpoint.id)
        if seen is not endpoint:
            if seen is not None:
                self.slots.forget(endpoint.id)
            self._seen[endpoint.id] = endpoint

    def choose(self, adapter: str, candidates: list[Endpoint], cap: int) -> list[Endpoint]:
        """The candidates a request for `adapter` may go to (see `AdapterSlots.choose`)."""
        for e in candidates:
            self._check_identity(e)
        allowed = set(self.slots.choose(adapter, [e.id for e in candidates], cap))
        return [e for e in candidates if e.id in allowed]

    def missing(self, endpoint: Endpoint, adapter: str) -> None:
        """The replica answered that it does not know `adapter` (it restarted): forget it there."""
        log.info("replica %s no longer holds adapter %s; it will be loaded again", endpoint.id, adapter)
        self.slots.unloaded(endpoint.id, adapter)

    async def ensure(self, endpoint: Endpoint, adapter: str, source: str, cap: int) -> None:
        """Loads `adapter` on `endpoint` unless it holds it, first unloading the least
        recently used adapter with nothing in flight when every slot is taken. Raises
        UpstreamError when the replica refuses or cannot be reached."""
        self._check_identity(endpoint)
        if self.slots.holds(endpoint.id, adapter):
            return
        lock = self._locks.get(endpoint.id)
        if lock is None:
            lock = self._locks[endpoint.id] = asyncio.Lock()
        async with lock:
            if self.slots.holds(endpoint.id, adapter):
                return  # a concurrent first request loaded it while this one waited
            if not self.slots.has_room(endpoint.id, cap):
                raise SlotsBusy(f"every adapter slot of replica {endpoint.id} has requests in flight")
            victim = self.slots.victim(endpoint.id, cap)
            if victim is not None:
                await self._call(endpoint, UNLOAD_PATH, {"lora_name": victim})
                self.slots.unloaded(endpoint.id, victim)
                self.unloads += 1
            await self._call(endpoint, LOAD_PATH, {"lora_name": adapter, "lora_path": source})
            self.slots.loaded(endpoint.id, adapter)
            self.loads += 1

    async def _call(self, endpoint: Endpoint, path: bytes, payload: dict[str, str]) -> None:
        body = json.dumps(payload).encode()
        head = request_head(endpoint, path, len(body), b"llmgw-lora")
        conn = None
        try:
            async with asyncio.timeout(self._timeout):
                conn, _ = await endpoint.pool.acquire(self._timeout)
                status = await conn.exchange(head, body)
                text = await conn.read_body()
        except TimeoutError as exc:
            if conn is not None:
                conn.close()
            raise UpstreamError(f"replica {endpoint.id} did not answer {path.decode()} in time") from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        endpoint.pool.release(conn)
        # vLLM answers 400 or 404 for an unload of an adapter it no longer holds (a
        # restart emptied it): the slot is free either way.
        if status == 200 or (path == UNLOAD_PATH and status in (400, 404)):
            return
        if path == LOAD_PATH and status == 400 and b"already" in text:
            return  # held from before this gateway started: as good as loaded
        log.warning(
            "replica %s answered %d to %s: %s",
            endpoint.id,
            status,
            path.decode(),
            text[:200].decode(errors="replace"),
        )
        raise UpstreamStatus(502 if status < 500 else status, text)
