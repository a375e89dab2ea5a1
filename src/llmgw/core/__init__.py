"""Building blocks shared by every part of llmgw: strict models, durations, byte sizes,
and the rendering of validation problems as sentences."""

from llmgw.core.durations import Duration, format_duration, parse_duration
from llmgw.core.problems import describe_validation_error
from llmgw.core.strict import Strict

__all__ = ["Duration", "Strict", "describe_validation_error", "format_duration", "parse_duration"]
