"""Which language a visitor is answered in, and the message catalogs it draws from."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from llmgw.config.portal import PORTAL_LANGUAGES
from llmgw.web.i18n import cookie_value, load_catalogs, pick_language


@pytest.mark.parametrize(
    ("cookie", "accept", "fallback", "expected"),
    [
        ("tr", "en-US,en;q=0.9", "", "tr"),  # the visitor's choice wins over the browser
        (None, "tr-TR,tr;q=0.9,en;q=0.8", "", "tr"),
        (None, "de-DE, en;q=0.5, tr;q=0.7", "", "tr"),  # by weight, not by order
        (None, "en;q=0, tr;q=0", "", "en"),  # q=0 means "not this one"
        (None, "de, fr", "tr", "tr"),  # none spoken: landing.language
        (None, None, "", "en"),
        ("xx", None, "tr", "tr"),  # a cookie naming no language is ignored
        (None, "en;q=bad, tr", "", "tr"),  # a malformed weight counts as zero
    ],
)
def test_the_language_is_the_cookie_then_the_browser_then_the_setting(
    cookie: str | None, accept: str | None, fallback: str, expected: str
) -> None:
    assert pick_language(cookie, accept, fallback) == expected


def test_a_cookie_is_found_among_others() -> None:
    assert cookie_value("a=1; llmgw_lang=tr; b=2", "llmgw_lang") == "tr"
    assert cookie_value("llmgw_language=tr", "llmgw_lang") is None
    assert cookie_value(None, "llmgw_lang") is None


def test_every_language_has_every_message_and_the_same_placeholders() -> None:
    catalogs = load_catalogs()
    assert set(catalogs) == set(PORTAL_LANGUAGES)
    english = catalogs["en"]
    for code, messages in catalogs.items():
        assert set(messages) == set(english), code
        for key, text in messages.items():
            assert text, f"{code}.{key} is empty"
            assert re.findall(r"\{\w+\}", text) == re.findall(r"\{\w+\}", english[key]), f"{code}.{key}"
    assert catalogs["tr"]["models_title"] != english["models_title"]


def test_every_message_a_template_names_exists() -> None:
    """The templates name messages as t.key or t["key"]; a typo would fail the page."""
    english = load_catalogs()["en"]
    folder = resources.files("llmgw.web") / "templates"
    named: set[str] = set()
    for template in folder.iterdir():
        text = template.read_text(encoding="utf-8")
        named |= set(re.findall(r"\bt\.(\w+)", text)) | set(re.findall(r'\bt\["(\w+)"\]', text))
    assert named
    assert named <= set(english), named - set(english)
