"""Each engine's real flags, read from recorded help text or flag lists, for the launch
tests to check that a command line uses only those."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

# In llama-server's help a line that starts with '-' names its flags (and metavars) up to
# the first run of spaces not followed by another flag: the description column.
_HELP_FLAGS = re.compile(r"^(.*?)(?:\s{2,}(?![\s-])|$)")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)")


def llama_server_flags() -> frozenset[str]:
    """Every flag the recorded `llama-server --help` lists."""
    flags: set[str] = set()
    for line in (FIXTURES / "llama-server-help.txt").read_text().splitlines():
        if not line.startswith("-"):
            continue
        match = _HELP_FLAGS.match(line)
        assert match is not None
        flags.update(_FLAG.findall(match.group(1)))
    return frozenset(flags)


def listed_flags(name: str) -> frozenset[str]:
    """The flags of a recorded flag list, one a line, '#' starting a comment."""
    lines = (FIXTURES / name).read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def emitted_flags(argv: Sequence[str], profile_args: Sequence[str] = ()) -> list[str]:
    """The flags llmgw put in a command line: every '-' word before the profile's args."""
    own = argv[: len(argv) - len(profile_args)] if profile_args else argv
    return [word.split("=", 1)[0] for word in own if word.startswith("-") and not word[1:2].isdigit()]


_LISTS = {
    "vllm": "vllm-serve-flags.txt",
    "sglang": "sglang-server-flags.txt",
    "trtllm": "trtllm-serve-flags.txt",
}


@functools.cache
def flags_of(engine: str) -> frozenset[str]:
    """The real flags of an engine, by engine name."""
    if engine == "llamacpp":
        return llama_server_flags()
    return listed_flags(_LISTS[engine])


def unknown_flags(engine: str, argv: Sequence[str], profile_args: Sequence[str] = ()) -> list[str]:
    """The flags llmgw emitted that the engine does not take."""
    return sorted(set(emitted_flags(argv, profile_args)) - flags_of(engine))
