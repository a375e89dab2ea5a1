"""The pages' languages: one message catalog per language (messages/<code>.yaml, shipped
in the wheel), and which language a visitor is answered in.

A visitor's choice (the switcher at the foot of every page) is kept in a cookie and wins;
else the first language of the browser's Accept-Language this portal speaks; else
`landing.language`; else English. Catalogs are plain YAML dictionaries read once at
start: a handful of pages in two languages needs no gettext toolchain.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from urllib.parse import parse_qs

import yaml

from llmgw.config.portal import PORTAL_LANGUAGES

LANGUAGE_COOKIE = "llmgw_lang"
DEFAULT_LANGUAGE = "en"
# A year: a language picked once stays picked.
LANGUAGE_COOKIE_MAX_AGE_S = 365 * 24 * 3600

Messages = Mapping[str, str]


def load_catalogs() -> dict[str, Messages]:
    """Every language's messages, by language code."""
    folder = resources.files("llmgw.web") / "messages"
    catalogs: dict[str, Messages] = {}
    for code in PORTAL_LANGUAGES:
        loaded = yaml.safe_load((folder / f"{code}.yaml").read_text(encoding="utf-8"))
        catalogs[code] = {str(key): str(value).strip() for key, value in loaded.items()}
    return catalogs


def language_switch(query_string: str, known: Mapping[str, object], target: str) -> list[tuple[str, str]]:
    """The headers of the switcher's answer: back to `target` (a page the caller has
    checked is its own), setting the language cookie when `?set=` names a known one."""
    wanted = (parse_qs(query_string).get("set") or [""])[0]
    headers = [("location", target), ("cache-control", "no-store")]
    if wanted in known:
        cookie = f"{LANGUAGE_COOKIE}={wanted}; Path=/; Max-Age={LANGUAGE_COOKIE_MAX_AGE_S}; SameSite=Lax"
        headers.append(("set-cookie", cookie))
    return headers


def cookie_value(header: str | None, name: str) -> str | None:
    """The value of cookie `name` in a Cookie header, or None."""
    if not header:
        return None
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _accepted(header: str) -> list[str]:
    """The primary language tags of an Accept-Language header, most wanted first
    (q=0 dropped; equal weights keep the header's order)."""
    ranked: list[tuple[float, int, str]] = []
    for index, item in enumerate(header.split(",")):
        tag, *params = item.strip().split(";")
        weight = 1.0
        for param in params:
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if tag and weight > 0:
            ranked.append((-weight, index, tag.split("-")[0].lower()))
    return [tag for _, _, tag in sorted(ranked)]


def pick_language(cookie: str | None, accept_language: str | None, fallback: str) -> str:
    """The language to answer in: the visitor's cookie, their browser's preference,
    `fallback` (landing.language, empty for English), in that order."""
    if cookie in PORTAL_LANGUAGES:
        return cookie
    for tag in _accepted(accept_language or ""):
        if tag in PORTAL_LANGUAGES:
            return tag
    return fallback or DEFAULT_LANGUAGE
