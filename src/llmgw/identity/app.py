"""The sign-in routes, an RSGI application the server mounts on the client port:

    GET  /auth             who is signed in (a page), or a link to sign in
    GET  /auth/login       to the identity provider (?return_to=/local/path)
    GET  /auth/callback    back from it (the path of auth.oidc.redirect_url)
    POST /auth/logout      ends the session (the form's csrf_token required)
    GET  /auth/me          JSON: the person, their status and roles; 401 without a session
    GET|POST /signup       the signup form, with auth.signup_open

Pages are HTML; /auth/me answers in OpenAI's error shape like the API. A refusal is
logged with its reason code, and nothing is made by a sign-in that is refused.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import orjson

from llmgw.config.auth import Auth
from llmgw.errors import (
    ApiError,
    BadRequest,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    SignInRefused,
    StoreError,
    Unauthorized,
)
from llmgw.http.responses import JSON, api_error_response
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.identity import pages
from llmgw.identity.admit import admit
from llmgw.identity.claims import check_domain, profile
from llmgw.identity.oidc import OidcClient
from llmgw.identity.sessions import COOKIE, SessionManager, SignedIn
from llmgw.identity.signup import Signups, read_form
from llmgw.store import Store
from llmgw.store.sessions import PendingLogin

log = logging.getLogger(__name__)

HTML = "text/html; charset=utf-8"
CALLBACK = "/auth/callback"
FORM_COOKIE = "llmgw_form"
# Long enough to type a password and answer a second factor at the provider.
LOGIN_TTL = timedelta(minutes=10)
_MAX_FORM_FIELDS = 20
_NO_STORE = ("cache-control", "no-store")


class IdentityApp:
    """/auth and /signup over the store, the session manager and (with an issuer) the
    identity provider."""

    def __init__(
        self,
        auth: Auth,
        store: Store,
        sessions: SessionManager,
        oidc: OidcClient | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._auth = auth
        self._store = store
        self.sessions = sessions
        self._oidc = oidc
        self._clock = clock
        self._signups = Signups(store)
        redirect = auth.oidc.redirect_url
        self.callback_path = urlsplit(redirect).path if redirect else CALLBACK
        self._secure = redirect.startswith("https://")

    async def close(self) -> None:
        if self._oidc is not None:
            await self._oidc.close()

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The paths to mount this application at."""
        found = ["/auth"]
        if self._auth.signup_open:
            found.append("/signup")
        if not self.callback_path.startswith("/auth/"):
            found.append(self.callback_path)
        return tuple(found)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        path, method = scope.path, scope.method
        try:
            if path == self.callback_path:
                await self._only(method, "GET")
                await self._callback(scope, proto)
            elif path == "/auth":
                await self._only(method, "GET")
                await self._account(scope, proto)
            elif path == "/auth/login":
                await self._only(method, "GET")
                await self._login(scope, proto)
            elif path == "/auth/logout":
                await self._only(method, "POST")
                await self._logout(scope, proto)
            elif path == "/auth/me":
                await self._only(method, "GET")
                await self._me(scope, proto)
            elif path == "/signup" and self._auth.signup_open:
                await self._signup(scope, proto)
            else:
                raise NotFound(f"{path} is not a sign-in page: start at /auth", code="unknown_route")
        except SignInRefused as refused:
            log.warning("sign-in refused (%s): %s", refused.code, refused.message)
            self._page(proto, refused.status, pages.refused(refused.message, refused.code))
        except StoreError as exc:
            log.warning("sign-in: the store failed: %s", exc)
            self._page(
                proto, 503, pages.refused("the account store cannot be reached: try again shortly", None)
            )
        except ApiError as error:
            if path == "/auth/me":
                status, headers, body = api_error_response(error)
                proto.response_bytes(status, headers, body)
            else:
                self._page(proto, error.status, pages.refused(error.message, error.code))

    async def _only(self, method: str, allowed: str) -> None:
        if method != allowed:
            raise MethodNotAllowed(f"this page takes {allowed}, not {method}", allow=allowed)

    # --- OIDC ------------------------------------------------------------------------

    def _oidc_client(self) -> OidcClient:
        if self._oidc is None:
            raise NotFound(
                "single sign-on is not configured here (auth.oidc.issuer is empty)", code="no_oidc"
            )
        return self._oidc

    def _redirect_uri(self, scope: Scope) -> str:
        if self._auth.oidc.redirect_url:
            return self._auth.oidc.redirect_url
        host = scope.headers.get("host") or "localhost"
        return f"http://{host}{CALLBACK}"

    async def _login(self, scope: Scope, proto: HTTPProtocol) -> None:
        client = self._oidc_client()
        query = _query(scope.query_string)
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        login = PendingLogin(
            state_hash=_sha256(state),
            nonce=nonce,
            code_verifier=verifier,
            return_to=local_path(query.get("return_to", "")),
            expires_at=self._clock() + LOGIN_TTL.total_seconds(),
        )
        url = await client.authorization_url(self._redirect_uri(scope), state, nonce, verifier)
        await self._store.sessions.begin_login(login)
        proto.response_bytes(302, [("location", url), _NO_STORE], b"")

    async def _callback(self, scope: Scope, proto: HTTPProtocol) -> None:
        client = self._oidc_client()
        query = _query(scope.query_string)
        if "error" in query:
            raise SignInRefused(
                f"the identity provider did not sign you in ({query['error'][:100]}): try again",
                code="provider_error",
            )
        state, code = query.get("state", ""), query.get("code", "")
        if not state or not code:
            raise SignInRefused(
                "the sign-in answer lacks its state or code: start again", code="bad_callback"
            )
        now = self._clock()
        login = await self._store.sessions.take_login(_sha256(state), now)
        if login is None:
            raise SignInRefused(
                "this sign-in is unknown, used already or too old (a replayed state?): start again",
                code="unknown_state",
            )
        claims = await client.finish(code, self._redirect_uri(scope), login, now)
        found = profile(claims, self._auth.oidc.claims)
        check_domain(found, self._auth.oidc.allowed_domains)
        person = await admit(self._store, found, signup_open=self._auth.signup_open, now=now)
        token, _ = await self.sessions.start(person.id)
        log.info("signed in: %s (%s)", person.id, person.status)
        proto.response_bytes(
            302, [("location", login.return_to), ("set-cookie", self._cookie(token)), _NO_STORE], b""
        )

    # --- sessions --------------------------------------------------------------------

    def _cookie(self, token: str, *, max_age_s: float | None = None) -> str:
        age = int(self.sessions.lifetime_s if max_age_s is None else max_age_s)
        secure = "; Secure" if self._secure else ""
        return f"{COOKIE}={token}; Path=/; Max-Age={age}; HttpOnly; SameSite=Lax{secure}"

    async def _account(self, scope: Scope, proto: HTTPProtocol) -> None:
        who = await self.sessions.signed_in(scope.headers)
        if who is None:
            self._page(proto, 200, pages.sign_in(self._auth.oidc.display_name))
        elif not who.active:
            self._page(proto, 200, pages.waiting(who.name or who.user_id, who.csrf_token))
        else:
            self._page(
                proto,
                200,
                pages.account(who.name or who.user_id, who.user_id, who.email, who.roles, who.csrf_token),
            )

    async def _me(self, scope: Scope, proto: HTTPProtocol) -> None:
        who = await self.sessions.signed_in(scope.headers)
        if who is None:
            raise Unauthorized("nobody is signed in: sign in at /auth/login", code="not_signed_in")
        proto.response_bytes(200, [("content-type", JSON), _NO_STORE], orjson.dumps(me_json(who)))

    async def _logout(self, scope: Scope, proto: HTTPProtocol) -> None:
        who = await self.sessions.signed_in(scope.headers)
        form = _form(await proto())
        if who is None:
            raise Forbidden("nobody is signed in here, so nobody can be signed out", code="not_signed_in")
        check_csrf(form.get("csrf_token", ""), who.csrf_token)
        await self.sessions.end(who)
        log.info("signed out: %s", who.user_id)
        headers = [("content-type", HTML), ("set-cookie", self._cookie("", max_age_s=0)), _NO_STORE]
        proto.response_bytes(200, headers, pages.signed_out())

    # --- signup ----------------------------------------------------------------------

    async def _signup(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.method == "GET":
            token = secrets.token_urlsafe(24)
            secure = "; Secure" if self._secure else ""
            cookie = f"{FORM_COOKIE}={token}; Path=/signup; HttpOnly; SameSite=Strict{secure}"
            headers = [("content-type", HTML), ("set-cookie", cookie), _NO_STORE]
            proto.response_bytes(200, headers, pages.signup_form(token))
            return
        if scope.method != "POST":
            raise MethodNotAllowed(f"/signup takes GET or POST, not {scope.method}", allow="GET, POST")
        fields = _form(await proto())
        # No session yet to hold a CSRF token: the form's token is also in a cookie only
        # this site can set (double submit), so another site cannot post the form.
        check_csrf(fields.get("csrf_token", ""), _cookie_value(scope, FORM_COOKIE))
        try:
            form = read_form(fields)
        except BadRequest as bad:
            self._page(proto, 400, pages.signup_form(fields.get("csrf_token", ""), bad.message))
            return
        try:
            await self._signups.request(form, getattr(scope, "client", ""), self._clock())
        except RateLimited as limited:
            log.warning("signup refused: %s", limited.message)
            raise
        self._page(proto, 200, pages.signup_received())

    def _page(self, proto: HTTPProtocol, status: int, body: bytes) -> None:
        proto.response_bytes(status, [("content-type", HTML), _NO_STORE], body)


def me_json(who: SignedIn) -> dict[str, object]:
    """What /auth/me says of a signed-in person."""
    return {
        "id": who.user_id,
        "name": who.name,
        "email": who.email,
        "status": who.status,
        "roles": [{"kind": r.kind, "id": r.id, "role": r.role, "source": r.source} for r in who.roles],
        # What /api wants in x-csrf-token on a change; only this site's pages can read it.
        "csrf_token": who.csrf_token,
    }


def check_csrf(sent: str, expected: str | None) -> None:
    """Refuses a state-changing form whose csrf_token is missing or not this session's."""
    if not sent or not expected or not secrets.compare_digest(sent.encode(), expected.encode()):
        raise Forbidden(
            "the form lacks its csrf_token or it is not this session's: reload the page and send it again",
            code="bad_csrf_token",
        )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _query(text: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(text, max_num_fields=_MAX_FORM_FIELDS).items()}


def _form(body: bytes) -> dict[str, str]:
    try:
        return _query(body.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest("the form is not URL-encoded text: send it from the page", code="bad_form") from exc


def _cookie_value(scope: Scope, name: str) -> str | None:
    header = scope.headers.get("cookie") or ""
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def local_path(text: str) -> str:
    """`return_to` if it is a path on this site; "/auth" otherwise, so the sign-in cannot
    be used to send someone elsewhere (an open redirect)."""
    if (
        text.startswith("/")
        and not text.startswith("//")
        and "\\" not in text
        and "\r" not in text
        and "\n" not in text
    ):
        return text
    return "/auth"
