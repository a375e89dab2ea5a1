"""`/api/eval` on the admin API, behind its token:

    POST /api/eval/<model>   runs a suite against the model now and answers its result:
                             body {"suite": NAME, "concurrency": N}, both optional; the
                             suite is the model's eval gate's when not given
    GET  /api/eval/<model>   the model's last result, with `lines` for `llmgw ctl explain`
    GET  /api/eval           every model's last result

The run happens inside the gateway (llmgw.batch.eval_run), so the admin token is all it
takes, with auth on or off. Results are kept in memory: a restarted gateway has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from llmgw.batch.eval_run import DEFAULT_CONCURRENCY, EvalResults, EvalServe, result_lines, run_suite
from llmgw.catalog import Catalog
from llmgw.errors import BadRequest, MethodNotAllowed, NotFound
from llmgw.evals.suite import SuiteError, load_suite

Answer = tuple[int, Any]
MAX_CONCURRENCY = 64


class EvalRoutes:
    """Runs suites for the admin API and keeps their last results."""

    def __init__(
        self, serve_as: EvalServe, catalog: Callable[[], Catalog], eval_dir: str, results: EvalResults
    ) -> None:
        self._serve_as = serve_as
        self._catalog = catalog
        self._eval_dir = eval_dir
        self.results = results

    async def handle(self, method: str, parts: list[str], query: Mapping[str, str], body: bytes) -> Answer:
        del query
        if not parts:
            if method != "GET":
                raise MethodNotAllowed("/api/eval takes GET; POST /api/eval/<model> runs one", allow="GET")
            return 200, {"data": [r.as_json() for r in self.results.all()]}
        name = "/".join(parts)
        if method == "GET":
            last = self.results.last(name)
            if last is None:
                raise NotFound(
                    f"model {name!r} has no eval result on this gateway: run `llmgw ctl eval {name}`",
                    code="eval_not_found",
                )
            shown = last.as_json()
            return 200, {**shown, "lines": result_lines(shown)}
        if method != "POST":
            raise MethodNotAllowed(f"/api/eval/{name} takes GET or POST", allow="GET, POST")
        return 200, await self._run(name, _options(body))

    async def _run(self, name: str, options: dict[str, Any]) -> dict[str, Any]:
        model = self._catalog().resolve(name)
        if model is None:
            raise NotFound(f"model {name!r} is not in the catalog in force", code="model_not_found")
        gate = model.eval
        suite_name = options.get("suite") or (gate.suite if gate is not None else "")
        if not isinstance(suite_name, str) or not suite_name:
            raise BadRequest(
                f"model {model.name!r} has no eval gate naming a suite: give one (--suite arithmetic)",
                param="suite",
            )
        concurrency = options.get("concurrency", DEFAULT_CONCURRENCY)
        if not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise BadRequest(f"concurrency must be 1 to {MAX_CONCURRENCY}", param="concurrency")
        try:
            suite = load_suite(suite_name, self._eval_dir)
        except SuiteError as exc:
            raise NotFound(str(exc), code="eval_suite_not_found", param="suite") from None
        result = await run_suite(
            self._serve_as,
            model.name,
            suite,
            gate_min_score=gate.min_score if gate is not None else 0,
            judge=gate.judge if gate is not None else "",
            concurrency=concurrency,
        )
        self.results.record(result)
        shown = result.as_json()
        return {**shown, "lines": result_lines(shown)}


def _options(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest('the body is not JSON: send {"suite": NAME, "concurrency": N}') from None
    if not isinstance(data, dict):
        raise BadRequest('the body must be a JSON object: {"suite": NAME, "concurrency": N}')
    return data
