"""Evaluation suites: cases of prompts with checks, their loading and their scoring.

A suite is a JSONL file (llmgw.evals.suite); each case's answer is checked by
llmgw.evals.checks (exact, regex, json_schema, or a judge model's rubric grade) and
the suite scored by llmgw.evals.scorer. All of it is pure: running a suite against
a model is the gateway's (llmgw.batch.eval_run).
"""
