"""How the catalog's messages quote a name or a value: in double quotes, escaped, so
`model "x" profile "p"` reads the same whatever the name holds."""

from __future__ import annotations

import json


def q(value: object) -> str:
    """`value` as a double-quoted string: text quoted and escaped, anything else as text."""
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)
