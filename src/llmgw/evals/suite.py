"""A suite's file and where a suite is found.

A suite is JSONL, one object a line. An optional first line `{"suite": {...}}` gives
the suite's own passing score (`min_score`) and the judge model for its rubric cases
(`judge`). Every other line is a case:

    {"id": "add-1", "messages": [{"role": "user", "content": "What is 2 + 3?"}],
     "check": {"type": "exact", "value": "5"}, "answer": "5"}

`check.type` is `exact` (the answer, stripped, equals `value`), `regex` (`pattern`
found in the answer), `json_schema` (the answer is JSON valid against `schema`) or
`rubric` (a judge model grades the answer against `rubric`, 0 to 1; it passes at
`pass_score`, 0.5 by default). `answer` is a reference answer, which the sim engine
gives (llmgw.sim.eval_answers).

A suite named `NAME` is `NAME.jsonl` in `control.eval_dir` when there is one, else
one llmgw carries (`BUILTIN_SUITES`), so a directory's suite replaces a built-in one
of the same name.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

BUILTIN_SUITES: tuple[str, ...] = ("arithmetic", "json-format")
DEFAULT_MIN_SCORE = 1.0
"""The passing score of a suite that names none, and of a gate with min_score 0."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Exact(_Strict):
    type: Literal["exact"]
    value: str


class Regex(_Strict):
    type: Literal["regex"]
    pattern: str


class JsonSchema(_Strict):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class Rubric(_Strict):
    type: Literal["rubric"]
    rubric: str
    pass_score: float = Field(default=0.5, ge=0, le=1)


Check = Annotated[Exact | Regex | JsonSchema | Rubric, Field(discriminator="type")]


class Case(_Strict):
    id: str = Field(min_length=1)
    messages: tuple[dict[str, Any], ...] = Field(min_length=1)
    check: Check
    answer: str = ""
    """A reference answer: what a correct model says (the sim engine answers it)."""

    def prompt(self) -> str:
        """The last user message's text: what the sim's answer table is keyed by."""
        for message in reversed(self.messages):
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, str):
                return content
        return ""


class SuiteHeader(_Strict):
    min_score: float = Field(default=0, ge=0, le=1)
    judge: str = ""


class Suite(_Strict):
    name: str
    cases: tuple[Case, ...]
    min_score: float = 0
    """The suite's own passing score; 0 is DEFAULT_MIN_SCORE."""
    judge: str = ""
    origin: str = ""
    """Where it was read from: a path, or `built-in`."""


class SuiteError(ValueError):
    """A suite that cannot be found or read; the message is one sentence."""


def parse_suite(name: str, text: str, origin: str) -> Suite:
    """The suite in `text`; SuiteError naming the line of the first problem."""
    header = SuiteHeader()
    cases: list[Case] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
            if not isinstance(raw, dict):
                raise SuiteError(f"suite {name!r} ({origin}) line {number} is not a JSON object")
            if "suite" in raw and not cases and len(raw) == 1:
                header = SuiteHeader.model_validate(raw["suite"])
                continue
            case = Case.model_validate(raw)
        except orjson.JSONDecodeError as exc:
            raise SuiteError(f"suite {name!r} ({origin}) line {number} is not JSON: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SuiteError(f"suite {name!r} ({origin}) line {number}: {where}: {first['msg']}") from None
        if case.id in seen:
            raise SuiteError(f"suite {name!r} ({origin}) line {number}: case id {case.id!r} is repeated")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise SuiteError(f"suite {name!r} ({origin}) has no cases")
    return Suite(name=name, cases=tuple(cases), min_score=header.min_score, judge=header.judge, origin=origin)


def suite_path(name: str, eval_dir: str) -> Path | None:
    """`NAME.jsonl` in `eval_dir` when it exists there."""
    if not eval_dir:
        return None
    path = Path(eval_dir) / f"{name}.jsonl"
    return path if path.is_file() else None


def suite_exists(name: str, eval_dir: str) -> bool:
    return bool(_NAME.match(name)) and (suite_path(name, eval_dir) is not None or name in BUILTIN_SUITES)


def missing_sentence(name: str, eval_dir: str) -> str:
    """Why `name` names no suite, in one sentence."""
    return (
        f"eval suite {name!r} is neither {eval_dir or '(control.eval_dir)'}/{name}.jsonl nor one llmgw "
        f"carries ({', '.join(BUILTIN_SUITES)}): add the file to control.eval_dir or name a built-in suite"
    )


def load_suite(name: str, eval_dir: str) -> Suite:
    """The suite named `name`: control.eval_dir's, else the built-in one."""
    if not _NAME.match(name):
        raise SuiteError(
            f"eval suite name {name!r} is not a plain name: use letters, digits, '.', '_' and '-'"
        )
    path = suite_path(name, eval_dir)
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SuiteError(f"eval suite {name!r}: cannot read {path}: {exc}") from None
        return parse_suite(name, text, str(path))
    if name in BUILTIN_SUITES:
        text = resources.files("llmgw.evals").joinpath("data", f"{name}.jsonl").read_text(encoding="utf-8")
        return parse_suite(name, text, "built-in")
    raise SuiteError(missing_sentence(name, eval_dir))
