"""The identity settings: secret references resolved by `resolve_secret` (env: and files,
with one sentence naming the setting and the fix when they cannot be), the session
bounds, and the OIDC redirect URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from llmgw.config.auth import Auth
from llmgw.config.secrets import resolve_secret
from llmgw.errors import ConfigError

SETTING = "auth.oidc.client_secret_file"


def test_an_env_reference_reads_the_variable() -> None:
    assert resolve_secret("env:OIDC_SECRET", SETTING, environ={"OIDC_SECRET": " s3cret\n"}) == "s3cret"


def test_a_file_reference_reads_the_file_relative_to_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "oidc-secret").write_text("from-file\n")
    assert resolve_secret("oidc-secret", SETTING, base_dir=tmp_path) == "from-file"
    assert resolve_secret(str(tmp_path / "oidc-secret"), SETTING) == "from-file"


@pytest.mark.parametrize(
    ("reference", "words"),
    [
        ("env:MISSING_SECRET", "MISSING_SECRET is unset or empty: export it"),
        ("/nonexistent/oidc-secret", "cannot read /nonexistent/oidc-secret"),
        ("vault:secret/llmgw/oidc#secret", "give a file or env:VARIABLE"),
    ],
)
def test_an_unreadable_secret_names_the_setting_and_the_fix(reference: str, words: str) -> None:
    with pytest.raises(ConfigError) as refused:
        resolve_secret(reference, SETTING, environ={})
    (problem,) = refused.value.problems
    assert problem.startswith(SETTING + ": ")
    assert words in problem


def test_an_empty_secret_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="is empty: put the secret in it"):
        resolve_secret(str(tmp_path / "empty"), SETTING)


def test_session_defaults_and_bounds() -> None:
    session = Auth().session
    assert (session.lifetime.total_seconds(), session.idle.total_seconds()) == (12 * 3600, 2 * 3600)
    with pytest.raises(ValidationError, match=r"session.idle[\s\S]*longer than lifetime 1h"):
        Auth.model_validate({"session": {"lifetime": "1h", "idle": "2h"}})
    with pytest.raises(ValidationError, match=r"session.lifetime[\s\S]*above zero"):
        Auth.model_validate({"session": {"lifetime": "0s"}})


def test_a_redirect_url_needs_the_callback_path() -> None:
    oidc = {"issuer": "https://idp.example.com", "client_id": "llmgw", "client_secret_file": "env:S"}
    with pytest.raises(ValidationError, match="has no path: give the callback"):
        Auth.model_validate({"oidc": {**oidc, "redirect_url": "https://llm.example.com"}})
    ok = Auth.model_validate({"oidc": {**oidc, "redirect_url": "https://llm.example.com/auth/callback"}})
    assert ok.oidc.redirect_url.endswith("/auth/callback")


def test_a_file_reference_may_say_file(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("from-file\n")
    assert resolve_secret(f"file:{tmp_path / 'secret'}", SETTING) == "from-file"
    assert resolve_secret("file:secret", SETTING, base_dir=tmp_path) == "from-file"
