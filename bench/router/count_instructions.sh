#!/usr/bin/env bash
# Instructions per request of the gateway's own code, counted by valgrind's callgrind
# over micro_request_path.py: the same run with N and N + 5000 requests, the difference
# divided by 5000, so start-up and warm-up cancel out. Instruction counts do not depend on
# what else the machine is doing, so two versions of the code compare within a percent
# on a machine whose timings vary by a third. Every thread is counted (the SQLite
# writer's too). Under callgrind the program runs ~50 times slower while the auth gate's
# background loops keep wall-clock intervals, so with --auth those count ~50 times over
# (a few thousand instructions a request): compare like with like.
#
#   bash bench/router/count_instructions.sh [micro_request_path.py flags, e.g. --prefix --auth]
#
# Needs valgrind (Debian's package). Two runs of about a minute each, side by side.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
N=1000
cd "$ROOT/bench/router"
command -v valgrind >/dev/null || { echo "count_instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
count() {  # requests, output file
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$PY" micro_request_path.py \
        -n "$1" "${@:3}" >"$work/$1.out" 2>"$work/$1.err"
    grep -o 'Collected : [0-9]*' "$work/$1.err" | awk '{print $3}' >"$2"
}
count "$N" "$work/small" "$@" &
count $((N + 5000)) "$work/large" "$@"
wait
small=$(cat "$work/small") large=$(cat "$work/large")
echo "$(( (large - small) / 5000 )) instructions per request (micro_request_path.py $*)"
