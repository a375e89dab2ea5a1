"""YAML read the way YAML 1.2 reads it, and written back readably.

PyYAML implements YAML 1.1, where `10:30` is the integer 630 and `no` is false: a
schedule window `from: 10:30` or a day named `no` would be silently wrong. The loader
here keeps only the 1.2 core schema's implicit types (true/false, null, decimal ints
and floats), so everything else arrives as the text that was written.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from llmgw.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's core schema for plain scalars."""


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def load_yaml(text: str, source: str) -> Any:
    """Parses one YAML document; a syntax error names `source` and the line."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        what = exc.problem or exc.context or "invalid YAML"
        raise ConfigError([f"{where}: YAML syntax error: {what}"]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: YAML syntax error: {exc}"]) from exc


class _Dumper(yaml.SafeDumper):
    """Writes multi-line text as blocks and never sorts keys, so output reads like input."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(data: Any) -> str:
    """Writes `data` as block-style YAML in the order its keys were given."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
