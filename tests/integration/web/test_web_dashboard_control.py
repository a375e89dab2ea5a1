"""The operator dashboard over a running control plane (examples/control-plane.yaml as
written, ports moved, no node joined): the Cluster page shows each model's desired and
ready replicas and the control plane's reason for one short of its minimum, and the
Scale form changes a model's scaling as `POST /api/control/models/<name>/scale` does,
recorded on the Audit page."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import yaml
from markupsafe import escape

from llmgw.testing.server import free_port, running_gateway

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "control-plane.yaml"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def test_the_cluster_page_explains_and_the_scale_form_scales() -> None:
    config = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    config["agent_listen"] = f"127.0.0.1:{free_port()}"
    with running_gateway(config) as server:
        bearer = {"authorization": f"Bearer {server.admin_token()}"}
        explain_url = server.admin_url + "/api/control/models/chat/explain"
        # Ready is the router's word; the control plane's catalog may be a moment behind.
        deadline = time.monotonic() + 30
        while httpx.get(explain_url, headers=bearer, timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the control plane never explained chat"
            time.sleep(0.1)
        before = httpx.get(explain_url, headers=bearer, timeout=10).json()["lines"]
        page = httpx.get(server.admin_url + "/dashboard/cluster", headers=bearer, timeout=10)
        after = httpx.get(explain_url, headers=bearer, timeout=10).json()["lines"]
        assert page.status_code == 200
        text = page.text
        # chat asks for 2 and has none ready (no node has joined): the reason is listed,
        # as the control plane gave it when the page was made (a pass may run between).
        chat_row = re.search(r'<th scope="row">chat</th><td>2–\d+</td><td>0</td>(.*?)</tr>', text, re.S)
        assert chat_row is not None
        shown = re.findall(r"<li>(.*?)</li>", chat_row.group(1), re.S)
        assert shown
        assert shown in ([str(escape(line)) for line in before], [str(escape(line)) for line in after])
        assert re.search(r'<th scope="row">lazy</th><td>0–1</td>', text)

        csrf = _CSRF.search(text)
        assert csrf is not None
        form = {"model": "lazy", "min": "0", "max": "3", "confirm": "yes", "csrf": csrf.group(1)}
        done = httpx.post(server.admin_url + "/dashboard/models/scale", data=form, headers=bearer, timeout=10)
        assert done.status_code == 303
        assert "scaled" in done.headers["location"]
        models = httpx.get(server.admin_url + "/api/control/models", headers=bearer, timeout=10).json()
        lazy = next(m for m in models["data"] if m["name"] == "lazy")
        assert (lazy["min"], lazy["max"], lazy["updated_by"]) == (0, 3, "dashboard")
        audit = httpx.get(server.admin_url + "/dashboard/audit", headers=bearer, timeout=10).text
        assert re.search(r"model\.scale</th><td>model:lazy min=0 max=3</td><td>done</td>", audit)
