"""The guard's text scan in a loop, for counting instructions under valgrind (the shared
machine's load moves wall-clock figures by several times; instruction counts do not).

Usage: valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
    .venv/bin/python bench/guard/scan_loop.py {gate|each} {1k|1kf|32k|32kf} N
Instructions per scan: (the count for N - the count for 0) / N, same mode and text.
`gate` is `inspect` (the one-pass gate); `each` every detector on its own (the before).
"""

from __future__ import annotations

import sys

from micro_scan import bench_rules, inspect_each, prose, with_findings  # type: ignore[import-not-found]

from llmgw.guard import inspect


def main() -> None:
    mode, case, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    texts = {"1k": prose(1024), "1kf": with_findings(1024), "32k": prose(32768), "32kf": with_findings(32768)}
    text = texts[case]
    rules = bench_rules()
    scan = inspect if mode == "gate" else inspect_each
    scan(text, rules)  # compiles the gate, in the count for 0 as well
    for _ in range(n):
        scan(text, rules)


if __name__ == "__main__":
    main()
