"""SCIM provisioning end to end: `llmgw server` with auth and `auth.scim` on, driven over
real sockets with the requests Entra ID and Okta send (their documented provisioning
sequences: look up, create, change, deactivate, groups and their members, delete).

Checked through the other real interfaces: a personal key made with the admin API
answers until its person is made inactive, then is refused (polled, within the
gateway's cache_ttl); the person's usage records stay; a team that names the group
(set with `llmgw teams create --idp-group`, a subprocess) holds the group's members.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

TOKEN = "scim-" + "t0k3n" * 8
SCIM_JSON = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
CHAT = {"model": "chat-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
# Bounds on polling, never asserted as durations: the key must be refused within
# cache_ttl, and this is many times that.
POLL_S = 20.0


class Deployment:
    def __init__(self, gateway: GatewayProcess, store: Path) -> None:
        self.gateway = gateway
        self.store = store
        self.admin_token = gateway.admin_token()
        self.client = httpx.Client(timeout=10)

    def scim(
        self, method: str, path: str, body: Any = None, *, token: str | None = TOKEN, **headers: str
    ) -> httpx.Response:
        sent = {"content-type": SCIM_JSON, **headers}
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        return self.client.request(method, self.gateway.url + "/scim/v2" + path, json=body, headers=sent)

    def raw(self, method: str, path: str, content: bytes) -> httpx.Response:
        headers = {"authorization": f"Bearer {TOKEN}", "content-type": SCIM_JSON}
        return self.client.request(
            method, self.gateway.url + "/scim/v2" + path, content=content, headers=headers
        )

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = self.client.request(
            method,
            self.gateway.admin_url + path,
            json=body,
            headers={"authorization": f"Bearer {self.admin_token}"},
        )
        assert answer.status_code < 300, answer.text
        return answer.json()

    def cli(self, *args: str) -> str:
        group, *rest = args
        token_file = self.gateway.config_path.parent / "secrets" / "admin-token"
        command = [sys.executable, "-m", "llmgw", group, "--admin", self.gateway.admin_url]
        command += ["--token-file", str(token_file), *rest]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def chat(self, key: str) -> httpx.Response:
        return self.client.post(
            self.gateway.base_url + "/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"}
        )

    def team_members(self, team: str) -> dict[str, str]:
        rows = self.admin("GET", f"/api/teams/{team}/members")["data"]
        return {row["user"]: row["source"] for row in rows}

    def personal_key(self, user_id: str) -> tuple[str, str]:
        made = self.admin("POST", "/api/keys", {"user": user_id, "name": "laptop"})
        return made["id"], made["key"]

    def refused_within_poll(self, key: str) -> httpx.Response:
        deadline = time.monotonic() + POLL_S
        while True:
            answer = self.chat(key)
            if answer.status_code != 200 or time.monotonic() > deadline:
                return answer
            time.sleep(0.05)

    def add_browser_session(self, user_id: str) -> None:
        """A signed-in browser, as the sign-in pages leave one in the store."""
        now = time.time()
        with contextlib.closing(sqlite3.connect(self.store, timeout=30)) as db, db:
            db.execute(
                "INSERT INTO browser_sessions (id_hash, user_id, csrf_token, created_at, last_seen_at, "
                "expires_at) VALUES (?, ?, 'csrf', ?, ?, ?)",
                (uuid.uuid4().hex, user_id, now, now, now + 3600),
            )

    def browser_sessions(self, user_id: str) -> int:
        with contextlib.closing(sqlite3.connect(self.store, timeout=30)) as db:
            query = "SELECT count(*) FROM browser_sessions WHERE user_id = ?"
            return int(db.execute(query, (user_id,)).fetchone()[0])

    def usage_records(self, key_id: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + POLL_S
        while True:
            records: list[dict[str, Any]] = self.admin("GET", f"/api/usage/records?key={key_id}&since=1h")[
                "data"
            ]
            if records or time.monotonic() > deadline:
                return records
            time.sleep(0.05)


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def deployment(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    where = tmp_path_factory.mktemp("scim")
    token_file = where / "scim-token"
    token_file.write_text(TOKEN + "\n")
    config = {
        "auth": {
            "enabled": True,
            "store": str(where / "llmgw.db"),
            "flush_interval": "100ms",
            "cache_ttl": "1s",
            "scim": {"enabled": True, "token_file": str(token_file)},
        },
        "endpoints": [endpoint("sim-1", engine, "chat-a")],
    }
    with running_gateway(config) as gateway:
        deployment = Deployment(gateway, where / "llmgw.db")
        try:
            yield deployment
        finally:
            deployment.client.close()


def _ok(answer: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == SCIM_JSON
    body: dict[str, Any] = answer.json()
    return body


def _error(answer: httpx.Response, status: int, scim_type: str | None = None) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == SCIM_JSON
    body: dict[str, Any] = answer.json()
    assert body["schemas"] == [ERROR]
    assert body["status"] == str(status)
    assert body.get("scimType") == scim_type
    assert body["detail"]
    return body


def _team(deployment: Deployment, name: str, group: str) -> None:
    deployment.cli("orgs", "create", f"{name}-org")
    out = deployment.cli("teams", "create", name, "--org", f"{name}-org", "--idp-group", group, "--json")
    assert group in out


def test_entra_id_provisioning_sequence(deployment: Deployment) -> None:
    # The connection test: a user that cannot exist is looked up, and found nowhere.
    probe = _ok(deployment.scim("GET", f'/Users?filter=userName eq "{uuid.uuid4()}"'))
    assert probe["totalResults"] == 0
    assert probe["Resources"] == []
    assert _ok(deployment.scim("GET", '/Users?filter=userName eq "ada@contoso.com"'))["totalResults"] == 0
    created = deployment.scim(
        "POST",
        "/Users",
        {
            "schemas": [USER, ENTERPRISE],
            "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
            "userName": "ada@contoso.com",
            "active": True,
            "emails": [{"primary": True, "type": "work", "value": "ada@contoso.com"}],
            "meta": {"resourceType": "User"},
            "name": {"formatted": "Ada Lovelace", "familyName": "Lovelace", "givenName": "Ada"},
            "roles": [],
            ENTERPRISE: {"department": "Research"},
        },
    )
    user = _ok(created, 201)
    user_id = user["id"]
    assert user_id == "ada@contoso.com"
    assert user["userName"] == "ada@contoso.com"
    assert user["active"] is True
    assert user["emails"][0]["value"] == "ada@contoso.com"
    assert user["meta"]["resourceType"] == "User"
    assert user["meta"]["location"].endswith(f"/scim/v2/Users/{user_id}")
    assert created.headers["etag"] == user["meta"]["version"] == 'W/"1"'
    found = _ok(deployment.scim("GET", '/Users?filter=userName eq "ADA@contoso.com"'))
    assert found["totalResults"] == 1
    assert found["Resources"][0]["id"] == user_id
    # Entra's changes arrive capitalised, with booleans as strings.
    changed = _ok(
        deployment.scim(
            "PATCH",
            f"/Users/{user_id}",
            {
                "schemas": [PATCH],
                "Operations": [
                    {"op": "Replace", "path": "userName", "value": "ada.king@contoso.com"},
                    {"op": "Replace", "path": "name.formatted", "value": "Ada King"},
                    {"op": "Add", "path": 'emails[type eq "work"].value', "value": "ada.king@contoso.com"},
                    {"op": "Replace", "path": "displayName", "value": "Ada King"},
                ],
            },
        )
    )
    assert changed["displayName"] == "Ada King"
    assert changed["emails"][0]["value"] == "ada.king@contoso.com"
    assert changed["meta"]["version"] == 'W/"2"'
    # A renamed user principal name: the user name follows, the llmgw id stays.
    assert (changed["id"], changed["userName"]) == (user_id, "ada.king@contoso.com")
    renamed = _ok(deployment.scim("GET", '/Users?filter=userName eq "ada.king@contoso.com"'))
    assert [u["id"] for u in renamed["Resources"]] == [user_id]

    key_id, key = deployment.personal_key(user_id)
    assert deployment.chat(key).status_code == 200

    _team(deployment, "research", "Research")
    group = _ok(
        deployment.scim(
            "POST",
            "/Groups",
            {"schemas": [GROUP], "externalId": "g-1", "displayName": "Research", "members": []},
        ),
        201,
    )
    found_group = _ok(
        deployment.scim("GET", '/Groups?excludedAttributes=members&filter=displayName eq "Research"')
    )
    assert found_group["totalResults"] == 1
    assert "members" not in found_group["Resources"][0]
    add = {
        "schemas": [PATCH],
        "Operations": [{"op": "Add", "path": "members", "value": [{"value": user_id}]}],
    }
    _ok(deployment.scim("PATCH", f"/Groups/{group['id']}", add))
    assert deployment.team_members("research") == {user_id: "scim"}
    remove = {
        "schemas": [PATCH],
        "Operations": [{"op": "Remove", "path": "members", "value": [{"value": user_id}]}],
    }
    assert _ok(deployment.scim("PATCH", f"/Groups/{group['id']}", remove))["members"] == []
    assert deployment.team_members("research") == {}
    _ok(deployment.scim("PATCH", f"/Groups/{group['id']}", add))
    assert deployment.team_members("research") == {user_id: "scim"}

    deployment.add_browser_session(user_id)
    assert deployment.browser_sessions(user_id) == 1
    disable = {"schemas": [PATCH], "Operations": [{"op": "Replace", "path": "active", "value": "False"}]}
    assert _ok(deployment.scim("PATCH", f"/Users/{user_id}", disable))["active"] is False
    assert deployment.browser_sessions(user_id) == 0
    refused = deployment.refused_within_poll(key)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert deployment.usage_records(key_id), "the person's usage went with them"

    assert deployment.scim("DELETE", f"/Users/{user_id}").status_code == 204
    _error(deployment.scim("GET", f"/Users/{user_id}"), 404)
    assert deployment.team_members("research") == {}
    assert _ok(deployment.scim("GET", f"/Groups/{group['id']}"))["members"] == []
    assert deployment.usage_records(key_id), "deprovisioning kept the usage"
    keys = deployment.admin("GET", f"/api/keys?user={user_id}&all=1")["data"]
    assert [k["state"] for k in keys] == ["revoked"]


def test_okta_provisioning_sequence(deployment: Deployment) -> None:
    assert (
        _ok(deployment.scim("GET", '/Users?filter=userName eq "grace@okta.example"&startIndex=1&count=100'))[
            "totalResults"
        ]
        == 0
    )
    user = _ok(
        deployment.scim(
            "POST",
            "/Users",
            {
                "schemas": [USER],
                "userName": "grace@okta.example",
                "name": {"givenName": "Grace", "familyName": "Hopper"},
                "emails": [{"primary": True, "value": "grace@okta.example", "type": "work"}],
                "displayName": "Grace Hopper",
                "locale": "en-US",
                "externalId": "00u1abcd",
                "groups": [],
                "password": "not-kept",
                "active": True,
            },
        ),
        201,
    )
    user_id = user["id"]
    other = _ok(
        deployment.scim(
            "POST", "/Users", {"schemas": [USER], "userName": "linus@okta.example", "active": True}
        ),
        201,
    )
    key_id, key = deployment.personal_key(user_id)
    assert deployment.chat(key).status_code == 200
    # Okta updates a profile with PUT of the whole resource, sending the version it read.
    replaced = deployment.scim(
        "PUT",
        f"/Users/{user_id}",
        {
            **user,
            "displayName": "Rear Admiral Hopper",
            "emails": [{"primary": True, "value": "rear@okta.example"}],
        },
        **{"if-match": user["meta"]["version"]},
    )
    assert _ok(replaced)["emails"][0]["value"] == "rear@okta.example"

    _team(deployment, "compilers", "Compilers")
    group = _ok(
        deployment.scim(
            "POST",
            "/Groups",
            {
                "schemas": [GROUP],
                "displayName": "Compilers",
                "members": [{"value": user_id, "display": "grace"}],
            },
        ),
        201,
    )
    assert deployment.team_members("compilers") == {user_id: "scim"}
    # Okta pushes a group by replacing all of its members.
    everyone = {
        "schemas": [PATCH],
        "Operations": [
            {"op": "replace", "path": "members", "value": [{"value": user_id}, {"value": other["id"]}]}
        ],
    }
    assert len(_ok(deployment.scim("PATCH", f"/Groups/{group['id']}", everyone))["members"]) == 2
    assert deployment.team_members("compilers") == {user_id: "scim", other["id"]: "scim"}
    one_out = {
        "schemas": [PATCH],
        "Operations": [{"op": "remove", "path": f'members[value eq "{other["id"]}"]'}],
    }
    _ok(deployment.scim("PATCH", f"/Groups/{group['id']}", one_out))
    assert deployment.team_members("compilers") == {user_id: "scim"}
    # A rename takes the group away from the team that named the old name.
    rename = {
        "schemas": [PATCH],
        "Operations": [{"op": "replace", "value": {"id": group["id"], "displayName": "Compilers 2"}}],
    }
    assert _ok(deployment.scim("PATCH", f"/Groups/{group['id']}", rename))["displayName"] == "Compilers 2"
    assert deployment.team_members("compilers") == {}
    deployment.cli("teams", "set", "compilers", "--idp-group", "Compilers 2")
    assert deployment.team_members("compilers") == {user_id: "scim"}

    deactivate = {"schemas": [PATCH], "Operations": [{"op": "replace", "value": {"active": False}}]}
    assert _ok(deployment.scim("PATCH", f"/Users/{user_id}", deactivate))["active"] is False
    assert deployment.refused_within_poll(key).status_code == 401
    assert deployment.usage_records(key_id)
    # Okta reactivates with the same PATCH; the person's key works again.
    reactivate = {"schemas": [PATCH], "Operations": [{"op": "replace", "value": {"active": True}}]}
    assert _ok(deployment.scim("PATCH", f"/Users/{user_id}", reactivate))["active"] is True
    deadline = time.monotonic() + POLL_S
    while deployment.chat(key).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert deployment.chat(key).status_code == 200

    assert deployment.scim("DELETE", f"/Groups/{group['id']}").status_code == 204
    assert deployment.team_members("compilers") == {}
    _error(deployment.scim("GET", f"/Groups/{group['id']}"), 404)


def test_refusals_answer_in_scims_shape_and_create_nothing(deployment: Deployment) -> None:
    before = _ok(deployment.scim("GET", "/Users?count=0"))["totalResults"]
    body = {"schemas": [USER], "userName": "mallory@example.com", "active": True}
    _error(deployment.scim("POST", "/Users", body, token=None), 401)
    _error(deployment.scim("POST", "/Users", body, token="wrong-" + TOKEN), 401)
    _error(deployment.raw("POST", "/Users", b'{"userName": "mallory@example.com",'), 400, "invalidSyntax")
    _error(deployment.raw("POST", "/Users", b"[1, 2]"), 400, "invalidSyntax")
    _error(deployment.scim("GET", '/Users?filter=userName co "mallory"'), 400, "invalidFilter")
    _error(deployment.scim("GET", '/Groups?filter=members eq "x"'), 400, "invalidFilter")
    _error(deployment.scim("POST", "/Users", {"schemas": [USER], "active": True}), 400, "invalidValue")
    _error(
        deployment.scim(
            "POST", "/Groups", {"schemas": [GROUP], "displayName": "G", "members": [{"value": "nobody"}]}
        ),
        400,
        "invalidValue",
    )
    assert _ok(deployment.scim("GET", "/Users?count=0"))["totalResults"] == before
    assert _ok(deployment.scim("GET", '/Groups?filter=displayName eq "G"'))["totalResults"] == 0

    made = _ok(deployment.scim("POST", "/Users", body), 201)
    _error(deployment.scim("POST", "/Users", {**body, "userName": "MALLORY@example.com"}), 409, "uniqueness")
    stale = {"schemas": [PATCH], "Operations": [{"op": "replace", "path": "displayName", "value": "M"}]}
    _error(deployment.scim("PATCH", f"/Users/{made['id']}", stale, **{"if-match": 'W/"41"'}), 412)
    _error(deployment.scim("GET", "/Users/no-such-person"), 404)
    _error(
        deployment.scim(
            "PATCH", f"/Users/{made['id']}", {"schemas": [PATCH], "Operations": [{"op": "move"}]}
        ),
        400,
        "invalidSyntax",
    )
    _error(deployment.scim("GET", "/Nothing"), 404)


def test_pagination_and_discovery(deployment: Deployment) -> None:
    for n in range(5):
        _ok(deployment.scim("POST", "/Users", {"schemas": [USER], "userName": f"page{n}@example.com"}), 201)
    total = _ok(deployment.scim("GET", "/Users?count=0"))["totalResults"]
    page = _ok(deployment.scim("GET", "/Users?startIndex=2&count=2"))
    assert page["totalResults"] == total
    assert page["itemsPerPage"] == 2
    assert page["startIndex"] == 2
    everyone = _ok(deployment.scim("GET", f"/Users?count={total}"))["Resources"]
    assert [u["id"] for u in page["Resources"]] == [u["id"] for u in everyone[1:3]]
    _error(deployment.scim("GET", "/Users?count=many"), 400, "invalidValue")

    config = _ok(deployment.scim("GET", "/ServiceProviderConfig"))
    assert config["patch"]["supported"] is True
    assert config["etag"]["supported"] is True
    assert config["bulk"]["supported"] is False
    types = _ok(deployment.scim("GET", "/ResourceTypes"))
    assert {t["endpoint"] for t in types["Resources"]} == {"/Users", "/Groups"}
    schemas = _ok(deployment.scim("GET", "/Schemas"))
    assert {s["id"] for s in schemas["Resources"]} == {USER, GROUP}
    assert _ok(deployment.scim("GET", f"/Schemas/{USER}"))["name"] == "User"


def test_a_token_that_cannot_be_read_stops_the_start_naming_the_setting(tmp_path: Path) -> None:
    config = {
        "auth": {
            "enabled": True,
            "store": str(tmp_path / "llmgw.db"),
            "scim": {"enabled": True, "token_file": str(tmp_path / "absent-token")},
        },
        "endpoints": [{"id": "none", "url": "http://127.0.0.1:9", "models": ["unused"], "engine": "sim"}],
    }
    with pytest.raises(RuntimeError) as failed:
        start_gateway(config)
    assert "auth.scim.token_file" in str(failed.value)
    assert "Traceback" not in str(failed.value)
