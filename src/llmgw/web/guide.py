"""What the landing page and the docs portal say about this gateway, read from its
running configuration: the base URL a client should use, the models it lists, how a
person gets a key, the limits a request meets, and the example calls. Pure functions of
the settings and the model listing, so the pages and the OpenAPI document agree."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from llmgw.config import Settings

# A Host header made of what host names, addresses and ports are made of; anything else
# is not repeated back in a page (the listen address is used instead).
_HOST = re.compile(r"[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?")
_PLACEHOLDER_MODEL = "MODEL"


@dataclass(frozen=True)
class ModelRow:
    """One model as the pages list it."""

    name: str
    aliases: tuple[str, ...]
    context_length: int | None
    max_output: int | None
    abilities: tuple[str, ...]
    """Message keys (cap_chat, cap_tools, ...), shown in the visitor's language."""
    simulated: bool
    embeddings: bool


@dataclass(frozen=True)
class KeyRoute:
    """How someone without a key gets one: sign in (and sign up), a contact, or nothing
    to get because the gateway takes no key."""

    needs_key: bool
    sign_in_url: str | None
    signup_url: str | None
    contact: str
    contact_url: str | None
    """The contact as a link, when it is one (a URL or an e-mail address)."""


def base_url(host_header: str | None, forwarded_proto: str | None, listen: str) -> str:
    """The URL clients reach the API at, as this visitor reached the page: the request's
    Host (when it is a plain host[:port]) or else the listen address, under /v1."""
    if host_header and _HOST.fullmatch(host_header):
        host = host_header
    else:
        name, _, port = listen.rpartition(":")
        host = (
            f"{name or '127.0.0.1'}:{port}"
            if name not in ("", "0.0.0.0", "::", "[::]")
            else f"127.0.0.1:{port}"
        )
    # Only the scheme a proxy names is taken from it, and only for what the page shows.
    scheme = "https" if forwarded_proto == "https" else "http"
    return f"{scheme}://{host}/v1"


def model_rows(entries: Sequence[Mapping[str, Any]]) -> list[ModelRow]:
    """The `/v1/models` entries as the pages list them."""
    rows = []
    for entry in entries:
        caps = entry.get("capabilities") or {}
        embeddings = bool(caps.get("embeddings"))
        abilities = ["cap_embeddings"] if embeddings else ["cap_chat"]
        abilities += [key for cap, key in (("tools", "cap_tools"), ("vision", "cap_vision")) if caps.get(cap)]
        rows.append(
            ModelRow(
                name=str(entry["id"]),
                aliases=tuple(entry.get("aliases") or ()),
                context_length=entry.get("context_length"),
                max_output=entry.get("max_output"),
                abilities=tuple(abilities),
                simulated=bool(entry.get("simulated")),
                embeddings=embeddings,
            )
        )
    return rows


def example_models(rows: Sequence[ModelRow]) -> tuple[str, str]:
    """The model named in the chat examples and the one in the embeddings example."""
    chat = next((r.name for r in rows if not r.embeddings), _PLACEHOLDER_MODEL)
    embed = next((r.name for r in rows if r.embeddings), chat)
    return chat, embed


def key_route(settings: Settings, *, identity: bool) -> KeyRoute:
    """How a visitor gets a key here; `identity` when sign-in is served (auth on, OIDC)."""
    auth = settings.auth
    contact = settings.landing.contact.strip()
    signs_in = identity and auth.enabled and auth.oidc.enabled
    return KeyRoute(
        needs_key=auth.enabled,
        sign_in_url="/auth/login?return_to=/account" if signs_in else None,
        signup_url="/signup" if signs_in and auth.signup_open else None,
        contact=contact,
        contact_url=contact_link(contact),
    )


def contact_link(contact: str) -> str | None:
    """`contact` as a link target: a web address as it is, an e-mail address as
    mailto:; None for anything else (a chat channel's name is shown as text)."""
    if re.fullmatch(r"https?://\S+", contact):
        return contact
    if re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", contact):
        return "mailto:" + contact
    return None


def python_snippet(base: str, model: str, needs_key: bool) -> str:
    key = 'os.environ["LLMGW_API_KEY"]' if needs_key else '"none"'
    return (
        ("import os\n" if needs_key else "") + "from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{base}", api_key={key})\n'
        "answer = client.chat.completions.create(\n"
        f'    model="{model}",\n'
        '    messages=[{"role": "user", "content": "Hello!"}],\n'
        ")\n"
        "print(answer.choices[0].message.content)\n"
    )


def curl_snippet(base: str, route: str, body: Mapping[str, Any] | None, needs_key: bool) -> str:
    """A curl call of `route` (POST with `body`, GET without)."""
    lines = [f"curl {base}{route}"]
    if needs_key:
        lines.append('  -H "Authorization: Bearer $LLMGW_API_KEY"')
    if body is not None:
        lines.append('  -H "Content-Type: application/json"')
        lines.append("  -d '" + orjson.dumps(body).decode() + "'")
    return " \\\n".join(lines) + "\n"


@dataclass(frozen=True)
class RouteExample:
    """One route of the client API, with a call of it."""

    method: str
    path: str
    title_key: str
    curl: str


def route_examples(base: str, chat_model: str, embed_model: str, needs_key: bool) -> list[RouteExample]:
    """An example call for each route the gateway serves (llmgw.router.app)."""
    hello = [{"role": "user", "content": "Hello!"}]
    return [
        RouteExample(
            "POST",
            "/chat/completions",
            "route_chat",
            curl_snippet(base, "/chat/completions", {"model": chat_model, "messages": hello}, needs_key),
        ),
        RouteExample(
            "POST",
            "/completions",
            "route_completions",
            curl_snippet(
                base,
                "/completions",
                {"model": chat_model, "prompt": "Once upon", "max_tokens": 32},
                needs_key,
            ),
        ),
        RouteExample(
            "POST",
            "/embeddings",
            "route_embeddings",
            curl_snippet(base, "/embeddings", {"model": embed_model, "input": "a sentence"}, needs_key),
        ),
        RouteExample("GET", "/models", "route_models", curl_snippet(base, "/models", None, needs_key)),
        RouteExample(
            "GET",
            "/models/{model}",
            "route_model",
            curl_snippet(base, f"/models/{chat_model}", None, needs_key),
        ),
    ]
