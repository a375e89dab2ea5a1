"""A stand-in Prometheus on loopback for the dashboard history's tests: it answers
`/api/v1/query_range` in the shape Prometheus documents, or fails in the one way it is
told to (hang past the caller's timeout, answer 500, answer something not JSON).
It records every query it is asked, so a test can check what was sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import orjson

# A hanging answer is released when the stand-in stops, and never held longer than this.
_HANG_BOUND_S = 30.0


class Mode(Enum):
    MATRIX = "matrix"
    HANG = "hang"
    ERROR_500 = "500"
    NOT_JSON = "not_json"
    REFUSE_QUANTILES = "refuse_quantiles"
    """Answers every query but those with histogram_quantile, which it refuses with 400
    as Prometheus refuses a query it cannot run."""


@dataclass
class StandIn:
    url: str
    mode: Mode
    queries: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def matrix_answer(query: str, start: float, step_s: float) -> dict[str, object]:
    """Two series with three points each; the value names the query's length, so a
    test can tell answers apart; the third point is NaN, as a rate over nothing is."""
    values = [[start + i * step_s, str(float(len(query) + i))] for i in range(2)]
    values.append([start + 2 * step_s, "NaN"])
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"model": "m"}, "values": values},
                {"metric": {"model": "other"}, "values": values[:1]},
            ],
        },
    }


def _handler(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            del format, args

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            if parts.path != "/api/v1/query_range":
                self._send(404, b'{"status":"error","errorType":"not_found","error":"no such path"}')
                return
            stand_in.queries.append(query)
            if stand_in.mode is Mode.HANG:
                stand_in.release.wait(_HANG_BOUND_S)
                return
            if stand_in.mode is Mode.ERROR_500:
                self._send(500, b'{"status":"error","errorType":"internal","error":"storage is sick"}')
                return
            if stand_in.mode is Mode.REFUSE_QUANTILES and "histogram_quantile" in query["query"]:
                self._send(400, b'{"status":"error","errorType":"bad_data","error":"no quantiles today"}')
                return
            if stand_in.mode is Mode.NOT_JSON:
                self._send(200, b"<html>a login page</html>")
                return
            answer = matrix_answer(query["query"], float(query["start"]), float(query["step"].rstrip("s")))
            self._send(200, orjson.dumps(answer))

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def stand_in_prometheus(mode: Mode = Mode.MATRIX) -> Iterator[StandIn]:
    """A stand-in Prometheus answering in `mode`, on a free loopback port."""
    stand_in = StandIn("", mode)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stand_in))
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="stand-in-prometheus", daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
