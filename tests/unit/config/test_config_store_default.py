"""Where a server's store is when `auth.store` is empty: the control plane needs one with
auth off too, so the default is a SQLite file beside the admin token (it holds the
cluster's secret)."""

from __future__ import annotations

from pathlib import Path

from llmgw.config import Settings


def test_auth_store_as_set_wins() -> None:
    settings = Settings.model_validate({"auth": {"store": "postgresql://db/llmgw"}})
    assert settings.effective_store(Path("/etc/llmgw"), "/var/lib/llmgw") == "postgresql://db/llmgw"


def test_beside_the_admin_token() -> None:
    given = Settings.model_validate({"admin_token_file": "/etc/llmgw/keys/admin-token"})
    assert given.effective_store(Path("/srv/gw"), "/var/lib/llmgw") == "/etc/llmgw/keys/llmgw.db"
    assert Settings().effective_store(Path("/etc/llmgw"), "/var/lib/llmgw") == "/var/lib/llmgw/llmgw.db"
    assert Settings().effective_store(Path("/srv/gw"), None) == "/srv/gw/secrets/llmgw.db"


def test_control_plane_mode_is_the_seeds_rule() -> None:
    static = {"endpoints": [{"id": "a", "url": "http://127.0.0.1:1", "models": ["m"]}]}
    placed = {"name": "p", "source": "org/p", "profiles": [{"name": "g", "gpu_class": "l4-24g"}]}
    assert Settings().control_plane_mode  # no static endpoints
    assert not Settings.model_validate(static).control_plane_mode
    assert Settings.model_validate({**static, "control": {"enabled": True}}).control_plane_mode
    assert Settings.model_validate({**static, "models": [placed]}).control_plane_mode
