"""The OIDC provider under ``/oidc`` (upstream's ``edge-oidc`` binding): discovery, JWKS,
authorize, the login steps (password, certificate, TOTP), the authorize callback, token
(authorization code with PKCE S256, refresh-token rotation), revocation and end session.

Why a separate ASGI handler and not ``@op`` routes: these answers are OAuth's (redirects, form
bodies, ``{"error": "invalid_grant"}``), not the edge API's envelopes, and they live outside the
edge API prefixes, as upstream serves them. ``app._App`` hands it ``/oidc/…`` and
``/.well-known/openid-configuration``.

Auth requests and codes are kept in memory (as upstream keeps them), for ``AUTH_REQUEST_SECONDS``;
a code is used once. Logins go through the same primary methods as ``/authenticate`` (password
with its lockout and KDF admission, certificate with the auth policy's rules), so the identity's
auth policy decides the same way. A token is issued only when every secondary factor the policy
asks for was given (else the callback answers ``interaction_required``), as upstream.

The provider is split by job: this module (the route table, dispatch, discovery, JWKS and the
auth requests it keeps), ``login.py`` (authorize and the login steps), ``grants.py`` (token,
refresh, revoke, introspect, userinfo, end session); ``common.py`` has what they share.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from ..auth import oidc_tokens as tokens
from ..auth.methods import METHODS
from ..errors import ApiError
from . import grants, login
from .common import (
    AUTH_REQUEST_SECONDS,
    LOGOUT_GLOBS,
    REDIRECT_GLOBS,
    TOKEN_EXCHANGE,
    AuthRequest,
    Handler,
    jwks_alg,
    log,
    oauth_error,
    patterns,
)

if TYPE_CHECKING:
    from ..api.controller import ApiController


class Provider:
    """The OIDC endpoints of one controller (``Controller.oidc``)."""

    def __init__(self, ctl: ApiController, headers: list[tuple[bytes, bytes]] | None = None):
        self.ctl = ctl
        self.headers = headers or []     # added to every answer (the controller's server and CORS headers)
        self.requests: dict[str, AuthRequest] = {}
        self.codes: dict[str, str] = {}
        self.grants: collections.Counter[str] = collections.Counter()   # tokens issued, by grant type
        # the redirect URIs an authorize request may name, and the post-logout ones: upstream's
        # defaults and those serve was given (--oidc-redirect-uri, --oidc-post-logout-uri)
        settings = ctl.settings
        self.redirect_uris = patterns((*REDIRECT_GLOBS, *settings.oidc_redirect_uri))
        self.logout_uris = patterns((*LOGOUT_GLOBS, *settings.oidc_post_logout_uri))

    @staticmethod
    def handles(path: str) -> bool:
        return path == "/.well-known/openid-configuration" or path == "/oidc" or path.startswith("/oidc/")

    # ------------------------------------------------------------------ dispatch
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        path = scope["path"]
        if path.startswith("/oidc/"):
            path = path[len("/oidc"):]
        handler = _ROUTES.get((scope["method"] if scope["method"] != "HEAD" else "GET", path))
        if handler is None and scope["method"] == "POST" and path.startswith("/login/") and path[7:] in METHODS:
            handler = login.login_step(path[7:])   # /login/NAME: a primary method of auth.methods.METHODS
        try:
            if scope["method"] == "OPTIONS" and any(p == path for _, p in _ROUTES):   # a CORS preflight
                response: Response = Response(b"", status_code=200)
            elif handler is None:
                response = PlainTextResponse("404 page not found", status_code=404)
            else:
                self._clean()
                response = await handler(self, request)
        except ApiError as e:
            response = JSONResponse({"error": {"code": e.code, "message": e.message}, "meta": {}},
                                    status_code=e.status)
        except Exception:  # a bug: an OAuth server_error, never a traceback
            log.exception("OIDC %s %s", scope["method"], scope["path"])
            response = oauth_error("server_error", "internal error", 500)
        response.headers["cache-control"] = "no-store"
        response.raw_headers.extend(self.headers)
        await response(scope, receive, send)

    def _clean(self) -> None:
        oldest = time.monotonic() - AUTH_REQUEST_SECONDS
        for id in [id for id, r in self.requests.items() if r.created < oldest]:
            r = self.requests.pop(id)
            self.codes.pop(r.code, None)

    # ------------------------------------------------------------------ discovery and keys
    async def discovery(self, request: Request) -> Response:
        iss = tokens.issuer(self.ctl)
        alg = jwks_alg(self.ctl)
        return JSONResponse({
            "issuer": iss,
            "authorization_endpoint": iss + "/authorize",
            "token_endpoint": iss + "/oauth/token",
            "introspection_endpoint": iss + "/oauth/introspect",
            "userinfo_endpoint": iss + "/userinfo",
            "revocation_endpoint": iss + "/revoke",
            "end_session_endpoint": iss + "/end_session",
            "jwks_uri": iss + "/keys",
            "scopes_supported": ["openid", "profile", "email", "phone", "address", "offline_access"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", TOKEN_EXCHANGE],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [alg],
            "request_object_signing_alg_values_supported": [alg],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
            "claims_supported": ["sub", "aud", "exp", "iat", "iss", "auth_time", "nonce", "acr", "amr", "c_hash",
                                 "at_hash", "act", "scopes", "client_id", "azp"],
            "request_parameter_supported": True,
            "ui_locales_supported": ["en"],
        })

    async def keys(self, request: Request) -> Response:
        return JSONResponse(tokens.jwks(self.ctl))

    def request_for(self, id: str | None) -> AuthRequest | None:
        r = self.requests.get(id or "")
        if r is None or r.created < time.monotonic() - AUTH_REQUEST_SECONDS:
            return None
        return r


_ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", "/.well-known/openid-configuration"): Provider.discovery,
    ("GET", "/keys"): Provider.keys,
    ("GET", "/authorize"): login.authorize,
    ("POST", "/authorize"): login.authorize,
    ("GET", "/authorize/callback"): login.callback,
    ("GET", "/login/auth-queries"): login.auth_queries,
    ("GET", "/login/password"): login.login_page,
    ("GET", "/login/username"): login.login_page,
    ("POST", "/login/username"): login.login_password,
    ("GET", "/login/cert"): login.login_get,
    ("GET", "/login/ext-jwt"): login.login_get,
    # POST /login/NAME for every registered primary method: __call__ (_login_step)
    ("POST", "/login/totp"): login.totp,
    ("POST", "/login/totp/enroll"): login.totp_enroll,
    ("POST", "/login/totp/enroll/verify"): login.totp_enroll_verify,
    ("POST", "/oauth/token"): grants.token,
    ("POST", "/revoke"): grants.revoke,
    # where ZAC 4.5.1 sends its logout's revocation (upstream v2.0.3 answers it 404; the
    # console then keeps tokens that still work): the same revocation
    ("POST", "/oauth/revoke"): grants.revoke,
    ("POST", "/oauth/introspect"): grants.introspect,
    ("GET", "/end_session"): grants.end_session,
    ("POST", "/end_session"): grants.end_session,
    ("GET", "/logged-out"): grants.logged_out,
    ("GET", "/userinfo"): grants.userinfo,
    ("POST", "/userinfo"): grants.userinfo,
}
