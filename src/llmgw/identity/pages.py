"""The sign-in pages: minimal server-rendered HTML, every value escaped, no script.

Plain on purpose: the web console restyles them later. Each function returns the whole
document as bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from llmgw.store.people import Role

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;line-height:1.5}"
    "label{display:block;margin-top:1rem}input,textarea{width:100%;padding:.4rem}"
    "button{margin-top:1rem;padding:.4rem 1rem}.error{color:#a00}"
)


def document(title: str, body: str) -> bytes:
    """A page: `body` is HTML already escaped by the caller."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)} · llmgw</title><style>{_STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    ).encode()


def _sign_out(csrf_token: str) -> str:
    return (
        '<form method=post action="/auth/logout">'
        f'<input type=hidden name=csrf_token value="{escape(csrf_token)}">'
        "<button type=submit>Sign out</button></form>"
    )


def account(name: str, user_id: str, email: str | None, roles: Iterable[Role], csrf_token: str) -> bytes:
    """The signed-in person's page: who they are, their roles, and sign-out."""
    items = "".join(f"<li>{escape(r.role)} of {escape(r.kind)} {escape(r.id)}</li>" for r in roles)
    return document(
        "Signed in",
        f"<p>You are signed in as <strong>{escape(name)}</strong> ({escape(user_id)}"
        f"{', ' + escape(email) if email else ''}).</p>"
        + (f"<h2>Roles</h2><ul>{items}</ul>" if items else "<p>You hold no team or project role yet.</p>")
        + _sign_out(csrf_token),
    )


def waiting(name: str, csrf_token: str) -> bytes:
    """What a person whose signup is pending sees, and nothing else."""
    return document(
        "Waiting for approval",
        f"<p>Hello {escape(name)}. Your account is waiting for an administrator's approval; "
        "you can use llmgw once it is approved.</p>" + _sign_out(csrf_token),
    )


def refused(message: str, code: str | None) -> bytes:
    """A sign-in or form refused: what happened and what to do, and a way back."""
    return document(
        "Sign-in refused" if code else "Refused",
        f"<p class=error>{escape(message)}</p>"
        + (f"<p><small>Reason code: {escape(code)}</small></p>" if code else "")
        + '<p><a href="/auth/login">Sign in again</a></p>',
    )


def signed_out() -> bytes:
    return document("Signed out", '<p>You are signed out.</p><p><a href="/auth/login">Sign in</a></p>')


def sign_in(display_name: str) -> bytes:
    """Shown at /auth when nobody is signed in."""
    return document(
        "Sign in",
        f'<p><a href="/auth/login">{escape(display_name or "Single sign-on")}</a></p>',
    )


def signup_form(form_token: str, message: str = "") -> bytes:
    """The signup form; `form_token` is also in a cookie, and both must come back."""
    return document(
        "Sign up",
        (f"<p class=error>{escape(message)}</p>" if message else "") + '<form method=post action="/signup">'
        f'<input type=hidden name=csrf_token value="{escape(form_token)}">'
        "<label>Name <input name=name required maxlength=200></label>"
        "<label>E-mail <input name=email type=email required maxlength=254></label>"
        "<label>Why you need access <textarea name=reason rows=4 maxlength=2000></textarea></label>"
        "<button type=submit>Ask for an account</button></form>",
    )


def signup_received() -> bytes:
    """The one answer to every accepted signup, new address or known: no enumeration."""
    return document(
        "Thank you",
        "<p>If the address can be given an account, an administrator will review the request. "
        "Once it is approved, sign in with that address.</p>",
    )
