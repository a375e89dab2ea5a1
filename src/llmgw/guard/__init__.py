"""Guardrails: judge models that check the gateway's traffic, and how their answers
are read."""

from llmgw.guard.formats import FORMATS, known_format

__all__ = ["FORMATS", "known_format"]
