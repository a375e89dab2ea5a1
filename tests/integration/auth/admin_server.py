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

from llmgw.admin import token as admin_token
from llmgw.admin.api import AdminApi
from llmgw.auth import AuthGate
from llmgw.config import Settings
from llmgw.http.http1_server import Http1Server
from llmgw.store import Store


async def main(location: str, token_file: str, port: int) -> None:
    settings = Settings(auth={"enabled": True, "store": location, "max_key_ttl": "24h"})
    store = await Store.open(location)
    gate = AuthGate(settings, store)
    await gate.start()
    token = admin_token.load_or_create(Path(token_file))
    app = AdminApi(settings, store, token, gate)
    server = Http1Server(app, "127.0.0.1", port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await server.start()
    print("ready", flush=True)
    await stop.wait()
    await server.stop()
    await gate.close()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
