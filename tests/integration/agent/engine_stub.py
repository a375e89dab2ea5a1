"""A stand-in engine for the supervisor's tests: takes llama-server's --host, --port and
--model, answers /health and /metrics, and misbehaves as its environment says.

    STUB_IGNORE_TERM=1     SIGTERM is ignored: only SIGKILL ends it
    STUB_CHILD=1           starts a long `sleep` in its process group, and prints its PID
    STUB_EXIT_AFTER_S=N    exits with status 3 after N seconds
    STUB_LINES=N           prints N numbered lines first, for log rotation

Standard library only, so it starts fast and runs under any Python.
"""

from __future__ import annotations

import argparse
import http.server
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"llamacpp:requests_processing 0\n" if self.path == "/metrics" else b'{"status": "ok"}'
        self.send_response(200 if self.path in ("/health", "/metrics") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="")
    known, _ = parser.parse_known_args()
    if os.environ.get("STUB_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for n in range(int(os.environ.get("STUB_LINES", "0"))):
        print(f"line {n} " + "x" * 60)
    if known.model:
        print(f"model={known.model} bytes={Path(known.model).stat().st_size}")
    if os.environ.get("STUB_CHILD"):
        child = subprocess.Popen(["sleep", "300"])
        print(f"child={child.pid}")
    exit_after = os.environ.get("STUB_EXIT_AFTER_S")
    if exit_after:
        print(f"exiting in {exit_after}s", flush=True)
        threading.Timer(float(exit_after), lambda: os._exit(3)).start()
    server = http.server.ThreadingHTTPServer((known.host, known.port), Handler)
    print(f"listening on {known.host}:{known.port}", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
