"""A process serving the admin API alone, as the gateway will mount it on
admin_listen: for the command-line tests.

    python admin_server.py STORE TOKEN_FILE PORT

Prints "ready" once it listens; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

from llmgw.auth import AdminApi, AuthGate, admin_token
from llmgw.config import Settings
from llmgw.store import Store


async def main(location: str, token_file: str, port: int) -> None:
    settings = Settings(auth={"enabled": True, "store": location, "max_key_ttl": "24h"})
    store = await Store.open(location)
    gate = AuthGate(settings, store)
    await gate.start()
    token = admin_token.load_or_create(Path(token_file))
    app = AdminApi(settings, store, token, gate)
    server = Server(
        app,
        address="127.0.0.1",
        port=port,
        interface=Interfaces.RSGI,
        http=HTTPModes.http1,
        log_enabled=False,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    serving = asyncio.create_task(server.serve())
    print("ready", flush=True)
    await stop.wait()
    server.stop()  # type: ignore[no-untyped-call]
    await asyncio.gather(serving, return_exceptions=True)
    await gate.close()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
