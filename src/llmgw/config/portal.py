"""The pages people see on the client port: the landing page at "/", the docs portal,
and conversation storage for a gateway that runs without API keys."""

from __future__ import annotations

from pydantic import field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import NonNegativeInt
from llmgw.core.strict import Strict

PORTAL_LANGUAGES: tuple[str, ...] = ("en", "tr")


class Landing(Strict):
    """The public welcome page at "/". Its main job is pointing newcomers to whoever hands
    out keys; documentation without that pointer leaves them stuck at step one.
    llmgw.web serves the pages (docs/web.md).
    """

    contact: str = ""
    """How to request access: an e-mail address, a link or a chat channel. Shown as a
    link when it looks like one, as plain text otherwise."""
    notice: str = ""
    """Optional free text shown on the page, for anything local readers should know."""
    language: str = ""
    """Fallback language of the web pages (en or tr), used when the visitor picked none
    and the browser's preferences match neither. Empty: English."""
    docs_sign_in: bool = False
    """Requires sign-in (or an API key, where there are no accounts) to read /docs and
    /openapi.json. Off, the docs are open to all, like the landing page, which lists the
    models too."""

    @field_validator("language")
    @classmethod
    def _spoken(cls, value: str) -> str:
        if value not in ("", *PORTAL_LANGUAGES):
            raise ValueError(
                f"{value!r} is not a language the portal speaks: use en or tr, or leave it empty"
            )
        return value


class Threads(Strict):
    """Saved conversations and agent notes when auth is off. There is no ownership:
    whoever can reach the client port and guesses or learns an id can read them. That
    suits a personal machine, not a shared network, so it needs opting in. With auth
    on, conversations are kept per project in the auth store and this block is unused.
    The Responses API's stored responses and conversations (docs/api.md) are kept here
    without auth; with auth on they live in the auth store, per project or person, for
    `retain_hours` when set, else 30 days.
    """

    store: str = ""
    """SQLite database path; empty stores nothing."""
    retain_hours: NonNegativeInt = 0
    """Hours an untouched conversation or note survives. Mandatory with `store`, so that
    keeping every prompt forever is never the accidental default."""

    @model_validator(mode="after")
    def _expiry(self) -> Threads:
        if self.store and self.retain_hours <= 0:
            refuse(
                "Threads",
                [
                    Problem(
                        ("retain_hours",),
                        f"is required with store {self.store!r}: "
                        "the hours idle conversations are kept, like 72",
                    )
                ],
            )
        return self
