"""The receiver's check that docs/operations.md shows is run as written: it accepts what
llmgw signs and refuses another secret, a changed body and an old timestamp."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from llmgw.notify.signing import sign

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
BODY = b'{"id":"evt_1","type":"node.lost","time":1.0,"data":{}}'


def _documented_check() -> Callable[[bytes, bytes, str], bool]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    [source] = [block for block in blocks if "def verified" in block]
    namespace: dict[str, object] = {}
    exec(source, namespace)  # the documentation's own example, run as a reader would
    check = namespace["verified"]
    assert callable(check)
    return check


def test_the_documented_check_accepts_what_llmgw_signs_and_refuses_the_rest() -> None:
    verified = _documented_check()
    now = int(time.time())
    assert verified(b"s", BODY, sign(b"s", BODY, now))
    assert not verified(b"other", BODY, sign(b"s", BODY, now))
    assert not verified(b"s", BODY + b" ", sign(b"s", BODY, now))
    assert not verified(b"s", BODY, sign(b"s", BODY, now - 3600))
