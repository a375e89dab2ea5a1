"""Where the command line finds the admin API and its token: explicit options, then the
environment, then the server's configuration (`--config`), then the defaults; and a
place that was named but fails is one sentence saying which and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmgw.cli.admin_client import (
    DEFAULT_ADMIN_URL,
    AdminError,
    Connection,
    admin_url,
    dial_address,
    find_token,
    open_client,
)
from llmgw.config import load_settings


def _config(where: Path, admin_listen: str, token: str | None = "from-config") -> Path:
    token_file = where / "admin.token"
    if token is not None:
        token_file.write_text(token + "\n")
    path = where / "llmgw.yaml"
    # admin_remote: the server refuses a wildcard admin_listen without it.
    path.write_text(f'admin_listen: "{admin_listen}"\nadmin_remote: true\nadmin_token_file: "{token_file}"\n')
    return path


@pytest.mark.parametrize(
    ("listen", "dialled"),
    [
        ("127.0.0.1:9191", "127.0.0.1:9191"),
        (":9191", "127.0.0.1:9191"),
        ("0.0.0.0:9191", "127.0.0.1:9191"),
        ("[::]:9191", "[::1]:9191"),
        ("[::1]:9191", "[::1]:9191"),
        ("admin.internal:9191", "admin.internal:9191"),
    ],
)
def test_a_wildcard_listener_is_dialled_on_this_machine(listen: str, dialled: str) -> None:
    assert dial_address(listen) == dialled


def test_the_address_comes_from_option_then_environment_then_configuration(tmp_path: Path) -> None:
    config = _config(tmp_path, ":9191")
    settings = load_settings(config, environ={})
    env = {"LLMGW_ADMIN": "http://127.0.0.1:9292"}
    option = Connection(admin="http://127.0.0.1:9393", config=config)
    assert admin_url(option, settings, env) == "http://127.0.0.1:9393"
    assert admin_url(Connection(config=config), settings, env) == "http://127.0.0.1:9292"
    assert admin_url(Connection(config=config), settings, {}) == "http://127.0.0.1:9191"
    assert admin_url(Connection(), None, {}) == DEFAULT_ADMIN_URL
    # A listener's address is taken where a URL is expected.
    assert admin_url(Connection(admin="127.0.0.1:9494"), None, {}) == "http://127.0.0.1:9494"
    assert admin_url(Connection(), None, {"LLMGW_ADMIN": ":9595"}) == "http://127.0.0.1:9595"


def test_an_address_that_is_not_one_names_where_it_came_from() -> None:
    with pytest.raises(AdminError, match=r"^LLMGW_ADMIN 'ftp://x': give the admin API's address"):
        admin_url(Connection(), None, {"LLMGW_ADMIN": "ftp://x"})
    with pytest.raises(AdminError, match=r"^--admin 'nowhere' has no port"):
        admin_url(Connection(admin="nowhere"), None, {})


def test_the_token_comes_from_options_then_environment_then_configuration(tmp_path: Path) -> None:
    config = _config(tmp_path, ":9191")
    settings = load_settings(config, environ={})
    token_file = tmp_path / "given.token"
    token_file.write_text("from-file\n")
    env = {"LLMGW_ADMIN_TOKEN": "from-env"}
    given = Connection(token="from-option", token_file=token_file, config=config)
    assert find_token(given, settings, env) == "from-option"
    assert find_token(Connection(token_file=token_file, config=config), settings, env) == "from-file"
    assert find_token(Connection(config=config), settings, env) == "from-env"
    assert find_token(Connection(config=config), settings, {}) == "from-config"


def test_a_named_token_file_that_cannot_be_read_is_an_error_not_a_fall_through(tmp_path: Path) -> None:
    missing = tmp_path / "absent.token"
    with pytest.raises(AdminError, match=f"^--token-file {missing}: no such file$"):
        find_token(Connection(token_file=missing), None, {"LLMGW_ADMIN_TOKEN": "from-env"})
    config = _config(tmp_path, ":9191", token=None)
    settings = load_settings(config, environ={})
    with pytest.raises(AdminError, match=r"its admin token file .* no such file; is the server started with"):
        find_token(Connection(config=config), settings, {})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, "no such configuration file"),
        ("admin_listen: 9090\n", "admin_listen"),
        ("listen: [\n", ""),
    ],
)
def test_a_configuration_that_does_not_load_is_one_line_naming_the_file(
    tmp_path: Path, text: str | None, problem: str
) -> None:
    config = tmp_path / "llmgw.yaml"
    if text is not None:
        config.write_text(text)
    with pytest.raises(AdminError) as refused:
        open_client(Connection(config=config), {})
    message = str(refused.value)
    assert message.startswith(f"--config {config}")
    assert problem in message
    assert "\n" not in message


def test_options_given_to_a_command_win_over_its_groups() -> None:
    group = Connection(admin="http://group", token="group-token", config=Path("group.yaml"))
    command = Connection(admin="http://command", token_file=Path("command.token"))
    assert command.over(group) == Connection(
        admin="http://command",
        token="group-token",
        token_file=Path("command.token"),
        config=Path("group.yaml"),
    )
