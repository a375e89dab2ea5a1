"""Whether one answer passes its case's check, and why not.

`check_answer` decides exact, regex and json_schema checks from the answer alone; a
rubric case needs a judge model's grade, which the runner asks for with
`judge_messages` and reads with `read_grade`. Every failure comes with a reason short
enough for a report line.
"""

from __future__ import annotations

import re

import jsonschema
import orjson

from llmgw.evals.suite import Case, Exact, JsonSchema, Regex, Rubric

_REASON_CHARS = 80
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def shown(text: str) -> str:
    """An answer as a reason quotes it: one line, cut short."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _REASON_CHARS else flat[: _REASON_CHARS - 1] + "…")


def check_answer(case: Case, answer: str) -> str | None:
    """None when `answer` passes; else why not. Rubric cases are graded elsewhere."""
    check = case.check
    if isinstance(check, Exact):
        if answer.strip() == check.value:
            return None
        return f"expected {check.value!r}, got {shown(answer)}"
    if isinstance(check, Regex):
        try:
            found = re.search(check.pattern, answer)
        except re.error as exc:
            return f"the case's pattern {check.pattern!r} is not a regular expression: {exc}"
        return None if found else f"{shown(answer)} does not match /{check.pattern}/"
    if isinstance(check, JsonSchema):
        return _json_schema(check, answer)
    raise TypeError(f"case {case.id!r}: a {check.type} check is graded by a judge")


def _json_schema(check: JsonSchema, answer: str) -> str | None:
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return f"{shown(answer)} is not JSON"
    validator = jsonschema.validators.validator_for(check.schema_)(check.schema_)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the answer"
    return f"JSON does not match the schema at {where}: {error.message}"


def judge_messages(rubric: Rubric, case: Case, answer: str) -> list[dict[str, str]]:
    """What the judge model is asked: the rubric, the question and the answer; it
    answers a score from 0 to 1."""
    return [
        {
            "role": "system",
            "content": "You grade an answer against a rubric. Reply with only a number from 0 "
            "(fails the rubric) to 1 (meets it fully).",
        },
        {
            "role": "user",
            "content": f"Rubric: {rubric.rubric}\n\nQuestion: {case.prompt()}\n\nAnswer: {answer}\n\nScore:",
        },
    ]


def read_grade(text: str) -> float | None:
    """The judge's score: the first number in its answer, when 0 to 1."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    value = float(found.group(0))
    return value if 0 <= value <= 1 else None


def rubric_verdict(rubric: Rubric, judge_answer: str) -> str | None:
    """None when the judge's grade reaches the case's pass_score; else why not."""
    grade = read_grade(judge_answer)
    if grade is None:
        return f"the judge's answer {shown(judge_answer)} holds no score from 0 to 1"
    if grade >= rubric.pass_score:
        return None
    return f"the judge graded it {grade:g}, under the case's pass_score {rubric.pass_score:g}"
