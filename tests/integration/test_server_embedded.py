"""`llmgw server` with no configuration: the README's first command answers at once,
through the control plane and the local agent the server starts, with SmolLM2-135M on
llama.cpp where that is installed and the simulated model otherwise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import openai

from llmgw.agent.binaries import find_llama_server
from llmgw.server.embedded import example_model, smollm2_gguf
from llmgw.testing.server import free_port
from llmgw.testing.sim import http_status


def test_embedded_defaults_serve_the_example_model_and_stop_cleanly() -> None:
    expected = example_model(find_llama_server(), smollm2_gguf(), os.cpu_count() or 1)
    port, admin = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    env |= {"LLMGW_LISTEN": f"127.0.0.1:{port}", "LLMGW_ADMIN_LISTEN": f"127.0.0.1:{admin}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "llmgw", "server"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while http_status(f"http://127.0.0.1:{admin}/readyz") != 200:
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the embedded server never became ready"
            time.sleep(0.05)
        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
            models = client.models.list().data
            assert [m.id for m in models] == [expected.name]
            assert models[0].model_dump()["simulated"] is expected.simulated
            answer = client.chat.completions.create(
                model=expected.name, messages=[{"role": "user", "content": "hello"}], max_tokens=4
            )
            assert answer.choices[0].message.content
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert expected.name in stderr
