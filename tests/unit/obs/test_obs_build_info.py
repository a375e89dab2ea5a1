"""`llmgw_build_info`: the commit read from an installation's record (PEP 610), from git
in an editable checkout, and left empty when neither says."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

import llmgw
from llmgw.obs.build_info import BuildInfo, BuildInfoCollector, build_info, commit_of

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_an_install_from_a_git_url_names_its_commit(tmp_path: Path) -> None:
    record = '{"url": "https://example.com/llmgw.git", "vcs_info": {"vcs": "git", "commit_id": "%s"}}'
    assert commit_of(record % COMMIT, tmp_path) == COMMIT


def test_an_editable_install_asks_git_where_the_package_is(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(tmp_path), *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "f").write_text("x")
    git("add", "f")
    git("commit", "-q", "-m", "one")
    editable = '{"url": "file:///elsewhere", "dir_info": {"editable": true}}'
    assert commit_of(editable, tmp_path) == git("rev-parse", "HEAD")


def test_no_record_a_wheel_or_a_directory_outside_git_leave_it_empty(tmp_path: Path) -> None:
    assert commit_of(None, tmp_path) == ""
    assert commit_of("not json", tmp_path) == ""
    assert commit_of('{"url": "https://example.com/llmgw.whl", "archive_info": {}}', tmp_path) == ""
    assert commit_of('{"url": "file:///x", "dir_info": {"editable": true}}', tmp_path / "gone") == ""


def test_the_family_is_one_sample_with_the_build_in_its_labels() -> None:
    info = build_info()
    assert info.version == llmgw.__version__
    assert info.python == platform.python_version()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BuildInfoCollector(BuildInfo("1.2.3", "3.11.7", COMMIT)))
    text = generate_latest(registry).decode()
    assert f'llmgw_build_info{{commit="{COMMIT}",python="3.11.7",version="1.2.3"}} 1.0' in text
