#!/usr/bin/env bash
# Prints the DSN of a PostgreSQL server the tests may use, on stdout, and nothing else.
#
#   1. LLMGW_TEST_POSTGRES_DSN, when set, is printed as it is.
#   2. A server already answering on 127.0.0.1:5432 (pg_isready): its DSN, as the
#      superuser `postgres` with trust authentication (this project's CI and dev
#      machines run one; override the user with PGUSER).
#   3. Otherwise a throwaway cluster made with the server binaries
#      (/usr/lib/postgresql/*/bin/initdb and pg_ctl, or on PATH) in a temporary
#      directory, listening on a free loopback port with trust authentication. Root
#      cannot run postgres, so as root the cluster is made and run as the `postgres`
#      user (runuser), which the Debian and RPM packages create. The cluster is stopped
#      and removed by `scripts/test-postgres.sh stop <dir>`; its directory is printed on
#      stderr, and written to $LLMGW_TEST_POSTGRES_STATE when that is set.
#      LLMGW_TEST_POSTGRES_FRESH=1 skips step 2, to get a cluster of one's own.
#
# Exit status 3, with the reason on stderr, when none of these works: install the
# server (Debian: apt-get install postgresql) or point LLMGW_TEST_POSTGRES_DSN at one.
set -euo pipefail

say() { echo "test-postgres: $*" >&2; }

if [[ "${1:-}" == "stop" ]]; then
    dir="${2:?usage: test-postgres.sh stop <cluster dir>}"
    [[ -f "$dir/owner" ]] || { say "$dir is not a cluster this script made"; exit 2; }
    owner="$(cat "$dir/owner")"
    ctl="$(cat "$dir/pg_ctl")"
    run_as() { if [[ "$owner" == "$(id -un)" ]]; then "$@"; else runuser -u "$owner" -- "$@"; fi; }
    run_as "$ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    exit 0
fi

if [[ -n "${LLMGW_TEST_POSTGRES_DSN:-}" ]]; then
    echo "$LLMGW_TEST_POSTGRES_DSN"
    exit 0
fi

user="${PGUSER:-postgres}"
if [[ -z "${LLMGW_TEST_POSTGRES_FRESH:-}" ]] && command -v pg_isready >/dev/null 2>&1 \
    && pg_isready -q -h 127.0.0.1 -p 5432 -t 3; then
    echo "postgresql://${user}@127.0.0.1:5432/postgres"
    exit 0
fi

find_bin() {
    local name="$1" found
    found="$(ls -1 /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)"
    [[ -z "$found" ]] && found="$(command -v "$name" 2>/dev/null || true)"
    echo "$found"
}
initdb="$(find_bin initdb)"
pg_ctl="$(find_bin pg_ctl)"
if [[ -z "$initdb" || -z "$pg_ctl" ]]; then
    say "no PostgreSQL answers on 127.0.0.1:5432 and no server binaries (initdb, pg_ctl) are installed:"
    say "install the server (Debian: apt-get install postgresql) or set LLMGW_TEST_POSTGRES_DSN"
    exit 3
fi

owner="$(id -un)"
if [[ "$(id -u)" == "0" ]]; then
    if ! id postgres >/dev/null 2>&1 || ! command -v runuser >/dev/null 2>&1; then
        say "running as root, which postgres refuses, and there is no 'postgres' user to run it as:"
        say "create one (useradd --system postgres) or run the tests as another user"
        exit 3
    fi
    owner="postgres"
fi
run_as() { if [[ "$owner" == "$(id -un)" ]]; then "$@"; else runuser -u "$owner" -- "$@"; fi; }

dir="$(mktemp -d "${TMPDIR:-/tmp}/llmgw-pg.XXXXXX")"
chmod 755 "$dir"
chown "$owner" "$dir"
echo "$owner" >"$dir/owner"
echo "$pg_ctl" >"$dir/pg_ctl"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

if ! run_as "$initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1; then
    say "initdb failed; its log:"; cat "$dir/initdb.log" >&2; rm -rf "$dir"; exit 3
fi
opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off"
opts+=" -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
if ! run_as "$pg_ctl" -D "$dir/data" -o "$opts" -l "$dir/server.log" -w -t 60 start >/dev/null 2>&1; then
    say "the throwaway server did not start; its log:"; cat "$dir/server.log" >&2; rm -rf "$dir"; exit 3
fi
say "started a throwaway PostgreSQL in $dir on port $port (stop it: $0 stop $dir)"
if [[ -n "${LLMGW_TEST_POSTGRES_STATE:-}" ]]; then
    echo "$dir" >"$LLMGW_TEST_POSTGRES_STATE"
fi
echo "postgresql://postgres@127.0.0.1:${port}/postgres"
