#!/usr/bin/env bash
# Installs what the gateway overhead benchmark compares llmgw against, apart from the
# project's own .venv so no anchor's dependencies leak into llmgw's:
#   - nginx (upstream and plain reverse proxy) and wrk (load generator), from Debian;
#   - LiteLLM's proxy and the vLLM router (Rust, shipped as a wheel), from PyPI, into
#     .cache/bench-venv (git-ignored).
# Idempotent: what is already there is left alone. Run as root (apt-get) or with nginx
# and wrk already installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/.cache/bench-venv}"
PYTHON="${PYTHON:-python3}"

missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v taskset >/dev/null 2>&1 || missing+=(util-linux)
# The upstream reads request bodies with the echo module (a dependency of nginx-light).
[[ -e /usr/lib/nginx/modules/ngx_http_echo_module.so ]] || missing+=(libnginx-mod-http-echo)
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]} with apt-get"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
fi

# Each anchor installs on its own, so one that fails (a yanked release, no wheel for
# this platform) does not keep the other from being measured.
status=0
# Looked up, not imported: importing LiteLLM's proxy takes half a minute.
have_litellm_proxy='import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("litellm", "fastapi", "uvicorn", "backoff")))'
if ! "$VENV/bin/python" -c "$have_litellm_proxy" >/dev/null 2>&1 || [[ ! -x "$VENV/bin/litellm" ]]; then
    echo "setup: installing litellm[proxy]"
    "$VENV/bin/pip" install --quiet 'litellm[proxy]' || {
        echo "setup: litellm[proxy] did not install" >&2
        status=1
    }
fi
if [[ ! -x "$VENV/bin/vllm-router" ]]; then
    echo "setup: installing vllm-router"
    "$VENV/bin/pip" install --quiet vllm-router || {
        echo "setup: vllm-router did not install" >&2
        status=1
    }
fi

echo "setup: nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
"$VENV/bin/pip" list 2>/dev/null | grep -iE '^(litellm|vllm-router) ' || true
exit "$status"
