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
"""

from __future__ import annotations

import collections
import fnmatch
import html
import json
import logging
import secrets
import time
import urllib.parse
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from .. import clock
from ..api.caller import Session
from ..api.context import Ctx
from ..api.router import Route
from ..auth import mfa, sessions
from ..auth import oidc_tokens as tokens
from ..auth.methods import METHODS, Login, login_outcome
from ..auth.policy import policy_secondary
from ..errors import ApiError, InvalidAuth
from ..handlers import totp
from ..handlers.authentication import Authenticate

# the cert method's module loads here, as before this provider dispatched through METHODS: the
# route table (and so the served spec) lists operations in the order their modules load
from ..handlers.enrollment import cert_login as _cert_login  # noqa: F401
from ..pki.ca import fingerprint
from ..tls import peer_certs

if TYPE_CHECKING:
    from ..api.controller import ApiController
    from ..auth.sessions import AuthController

log = logging.getLogger("ziti_lite")

AUTH_REQUEST_SECONDS = 10 * 60      # upstream drops auth requests older than ten minutes
REDIRECT_GLOBS = ("openziti://auth/callback", "https://127.0.0.1:*/auth/callback", "http://127.0.0.1:*/auth/callback",
                  "https://localhost:*/auth/callback", "http://localhost:*/auth/callback")
LOGOUT_GLOBS = ("https://127.0.0.1:*/auth/logout", "http://127.0.0.1:*/auth/logout",
                "https://localhost:*/auth/logout", "http://localhost:*/auth/logout")
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TT_REFRESH = "urn:ietf:params:oauth:token-type:refresh_token"
TT_ACCESS = "urn:ietf:params:oauth:token-type:access_token"
TT_ID = "urn:ietf:params:oauth:token-type:id_token"
ID_TOKEN_GRACE_SECONDS = 60     # see _exchange_grant
_CONTACT = " If you have any questions, you may contact the administrator of the application."


@dataclass
class AuthRequest:
    id: str
    client_id: str
    redirect_uri: str
    state: str
    nonce: str
    scopes: list[str]
    challenge: str
    created: float
    identity_id: str = ""
    authenticator_id: str = ""
    amr: list[str] = field(default_factory=list)
    config_types: list[str] = field(default_factory=list)
    totp_required: bool = False
    totp_enrolled: bool = False
    cert_extendable: bool = False
    auth_time: int = 0
    sdk_info: Any = None
    env_info: Any = None
    code: str = ""
    fingerprints: list[str] = field(default_factory=list)   # certificates shown on the way (z_cfs)

    def done(self) -> bool:
        return bool(self.identity_id) and (not self.totp_required or tokens.AMR_TOTP in self.amr)


def oauth_error(error: str, description: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


def _allowed(uri: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(uri, g) for g in globs)


def _redirect_error(req_uri: str, error: str, description: str, state: str) -> Response:
    q = {"error": error, "error_description": description}
    if state:
        q["state"] = state
    sep = "&" if "?" in req_uri else "?"
    return RedirectResponse(req_uri + sep + urllib.parse.urlencode(q), status_code=302)


class Provider:
    """The OIDC endpoints of one controller (``Controller.oidc``)."""

    def __init__(self, ctl: ApiController, headers: list[tuple[bytes, bytes]] | None = None):
        self.ctl = ctl
        self.headers = headers or []     # added to every answer (the controller's server and CORS headers)
        self.requests: dict[str, AuthRequest] = {}
        self.codes: dict[str, str] = {}
        self.grants: collections.Counter[str] = collections.Counter()   # tokens issued, by grant type

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
            handler = _LOGIN_STEPS.get(path[7:]) or _LOGIN_STEPS.setdefault(path[7:], _login_step(path[7:]))
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

    # ------------------------------------------------------------------ authorize
    async def authorize(self, request: Request) -> Response:
        q = dict(request.query_params)
        if request.method == "POST":
            q.update(await _form(request))
        # upstream's answers: plain text where no redirect URI can be trusted, else a redirect
        client_id = q.get("client_id", "")
        if client_id not in tokens.CLIENT_IDS:
            return PlainTextResponse("unable to retrieve client by id", status_code=400)
        redirect_uri = q.get("redirect_uri", "")
        if not _allowed(redirect_uri, REDIRECT_GLOBS):
            return PlainTextResponse("The requested redirect_uri is missing in the client configuration." + _CONTACT,
                                     status_code=400)
        state = q.get("state", "")
        if q.get("response_type") != "code":
            return _redirect_error(redirect_uri, "unsupported_response_type",
                                   "The requested response type is missing in the client configuration." + _CONTACT,
                                   state)
        scopes = q.get("scope", "").split()
        if "openid" not in scopes:
            return _redirect_error(redirect_uri, "invalid_scope", "The scope openid is missing in your request. Please"
                                   " ensure the scope openid is added to the request." + _CONTACT, state)
        # without a challenge the login may go on: the token endpoint then refuses the code, as upstream
        challenge = q.get("code_challenge", "")
        if challenge and q.get("code_challenge_method") != "S256":
            return _redirect_error(redirect_uri, "invalid_request", "only the code_challenge_method S256 is supported",
                                   state)
        id = secrets.token_hex(16)
        self.requests[id] = AuthRequest(id, client_id, redirect_uri, state, q.get("nonce", ""), scopes, challenge,
                                        time.monotonic(), fingerprints=_fingerprints(request))
        method = q.get("method", "")
        step = "cert" if method == "cert" or (method != "password" and _peer_cert(request)) else "username"
        return RedirectResponse(f"/oidc/login/{step}?authRequestID={id}", status_code=302)

    def _request_for(self, id: str | None) -> AuthRequest | None:
        r = self.requests.get(id or "")
        if r is None or r.created < time.monotonic() - AUTH_REQUEST_SECONDS:
            return None
        return r

    def _logged_in(self, request: Request, payload: dict) -> AuthRequest | None:
        """The auth request a TOTP step names (``id`` in the body, else in the query), once its
        primary login is done; None otherwise."""
        r = self._request_for(_str(payload.get("id")) or request.query_params.get("id"))
        return r if r is not None and r.identity_id else None

    async def callback(self, request: Request) -> Response:
        r = self._request_for(request.query_params.get("id"))
        if r is None:
            return oauth_error("invalid_request", "the auth request was not found or has expired")
        if not r.done():
            return _redirect_error(r.redirect_uri, "interaction_required",
                                   "the user is not logged in and/or additional interaction is required", r.state)
        if not r.code:
            r.code = secrets.token_urlsafe(24)
            self.codes[r.code] = r.id
        q = {"code": r.code}
        if r.state:
            q["state"] = r.state
        sep = "&" if "?" in r.redirect_uri else "?"
        return RedirectResponse(r.redirect_uri + sep + urllib.parse.urlencode(q), status_code=302)

    # ------------------------------------------------------------------ login steps
    async def login_page(self, request: Request) -> Response:
        id = request.query_params.get("authRequestID", "")
        return _login_html(id, None, headers={"auth-request-id": id})

    async def login_get(self, request: Request) -> Response:
        id = request.query_params.get("authRequestID", "")
        return PlainTextResponse("please POST to this URL", headers={"auth-request-id": id})

    async def login_password(self, request: Request) -> Response:
        """``/login/username``: upstream's other name of the password step."""
        return await self._login(request, "password")

    async def _login(self, request: Request, method: str) -> Response:
        payload = await _payload(request)
        id = (request.query_params.get("authRequestID") or request.query_params.get("id")
              or _str(payload.get("id")) or _str(payload.get("authRequestID")))
        r = self._request_for(id)
        wants_json = "application/json" in request.headers.get("accept", "") or _is_json(request)
        if r is None:
            return PlainTextResponse("The authentication request failed: the auth request was not found or expired",
                                     status_code=401)
        ctx = Ctx(self.ctl, request, "client", {}, _LOGIN_ROUTE)
        username = _str(payload.get("username"))
        try:
            # the body /authenticate decodes, and its method from the same registry (the client
            # certificate of the TLS connection, the external JWT as Authorization: Bearer)
            body = msgspec.convert({k: v for k, v in payload.items() if k in ("username", "password")},
                                   Authenticate, strict=False)
            login: Login = await METHODS[method](ctx, body)
        except (ApiError, msgspec.ValidationError) as e:
            login_outcome(ctx, method, None, None, e if isinstance(e, ApiError) else InvalidAuth(), username)
            if method == "password" and not wants_json:
                return _login_html(r.id, "The authentication request failed", status=401)
            return PlainTextResponse("The authentication request failed", status_code=401)
        login_outcome(ctx, method, login, None, None, username)   # the authentication event and audit row
        store = self.ctl.store
        for fp in _fingerprints(request):
            if fp not in r.fingerprints:
                r.fingerprints.append(fp)
        r.identity_id, r.authenticator_id = login.identity_id, login.authenticator_id
        r.cert_extendable = login.cert_extendable
        if method not in r.amr:
            r.amr.append(method)
        r.config_types = sessions.resolve_config_types(store, _strings(payload.get("configTypes")))
        r.sdk_info, r.env_info = _info(payload.get("sdkInfo")), _info(payload.get("envInfo"))
        if r.sdk_info or r.env_info:   # shown on the identity, as a password or certificate login's are
            with store.write():
                sessions.record_client_info(store, login.identity_id,
                                            json.dumps(r.env_info) if r.env_info else None,
                                            json.dumps(r.sdk_info) if r.sdk_info else None)
        r.auth_time = int(clock.now().timestamp())
        verified = store.value("SELECT 1 FROM mfa WHERE identity_id = ? AND is_verified = 1", (login.identity_id,))
        r.totp_required = verified is not None or bool(policy_secondary(store, login.identity_id).get("requireTotp"))
        r.totp_enrolled = verified is not None
        headers = {"totp-required": "true"} if r.totp_required else {}
        if not r.done():
            return JSONResponse({"authQueries": _auth_queries(r)}, headers=headers)
        return RedirectResponse(f"/oidc/authorize/callback?id={r.id}", status_code=302, headers=headers)

    async def auth_queries(self, request: Request) -> Response:
        r = self._request_for(request.query_params.get("id"))
        if r is None:
            return PlainTextResponse("The authentication request failed", status_code=401)
        headers = {"totp-required": "true"} if r.totp_required else {}
        return JSONResponse({"authQueries": [] if r.done() else _auth_queries(r)}, headers=headers)

    async def totp(self, request: Request) -> Response:
        payload = await _payload(request)
        r = self._logged_in(request, payload)
        store = self.ctl.store
        ok = False
        if r is not None:
            with store.write():
                rec = mfa.get(store, r.identity_id)
                code = _str(payload.get("code"))
                ok = rec is not None and bool(rec["is_verified"]) and mfa.check_code(store, rec, code)
        if r is None or not ok:
            return _api_error(400, "INVALID TOTP CODE", "an invalid TOTP code was supplied")   # upstream's code
        if tokens.AMR_TOTP not in r.amr:
            r.amr.append(tokens.AMR_TOTP)
        return RedirectResponse(f"/oidc/authorize/callback?id={r.id}", status_code=302)

    async def totp_enroll(self, request: Request) -> Response:
        """Start a TOTP enrollment for the identity of a logged-in auth request (the policy asks
        for TOTP, the identity has none): 201 with the MFA detail, as newer SDKs expect."""
        payload = await _payload(request)
        r = self._logged_in(request, payload)
        if r is None:
            return _api_error(401, "UNAUTHORIZED", "the auth request is unknown, expired or not logged in")
        store = self.ctl.store
        ctx = self._step_ctx(request, r, _ENROLL_ROUTE)
        with store.write():
            rec = mfa.get(store, r.identity_id)
            if rec is not None and rec["is_verified"]:
                return _api_error(409, "ALREADY_EXISTS", "the identity has a verified TOTP enrollment")
            if rec is None:
                rec = totp.enroll(ctx, r.identity_id)
        name = store.value("SELECT name FROM identities WHERE id = ?", (r.identity_id,)) or r.identity_id
        return JSONResponse({"id": rec["id"], "isVerified": False, "recoveryCodes": rec["recovery_codes"],
                             "provisioningUrl": mfa.provisioning_url(mfa.issuer(self.ctl), name, rec["secret"])},
                            status_code=201)

    async def totp_enroll_verify(self, request: Request) -> Response:
        """Finish the enrollment with a current code: the TOTP factor counts for this login too."""
        payload = await _payload(request)
        r = self._logged_in(request, payload)
        if r is None:
            return _api_error(401, "UNAUTHORIZED", "the auth request is unknown, expired or not logged in")
        store = self.ctl.store
        ctx = self._step_ctx(request, r, _VERIFY_ROUTE)
        with store.write():
            rec = mfa.get(store, r.identity_id)
            if rec is None or rec["is_verified"]:
                return _api_error(404, "NOT_FOUND", "no TOTP enrollment is waiting for verification")
            if not totp.verify(ctx, rec, _str(payload.get("code"))):
                return _api_error(400, "INVALID_TOTP_CODE", "an invalid TOTP code was supplied")
        r.totp_enrolled = True
        if tokens.AMR_TOTP not in r.amr:
            r.amr.append(tokens.AMR_TOTP)
        return RedirectResponse(f"/oidc/authorize/callback?id={r.id}", status_code=302)

    def _step_ctx(self, request: Request, r: AuthRequest, route: Route) -> Ctx:
        """The ``Ctx`` of a login step that changes the identity's credentials (its TOTP
        enrollment): the caller is the auth request's identity, logged in partway, whose API
        session does not exist yet (a stand-in with no id), so the change is reported, audited
        and attributed as ``/current-identity/mfa``'s is."""
        ctx = Ctx(self.ctl, request, "client", {}, route)
        name = self.ctl.store.value("SELECT name FROM identities WHERE id = ?", (r.identity_id,)) or ""
        ctx.session = Session("", "", r.identity_id, False, r.authenticator_id, True, "", identity_name=name)
        return ctx

    # ------------------------------------------------------------------ token
    async def token(self, request: Request) -> Response:
        form = await _form(request)
        grant = form.get("grant_type", "")
        if grant == "authorization_code":
            response = self._code_grant(request, form)
        elif grant == "refresh_token":
            response = self._refresh_grant(form)
        elif grant == TOKEN_EXCHANGE:
            response = self._exchange_grant(form)
        elif not grant:
            return oauth_error("invalid_request", "grant_type missing")
        else:
            return oauth_error("unsupported_grant_type", f"{grant} not supported")
        if response.status_code == 200:
            self.grants[grant] += 1
        return response

    def _code_grant(self, request: Request, form: dict[str, str]) -> Response:
        code = form.get("code", "")
        id = self.codes.get(code)
        r = self._request_for(id) if id else None
        if r is None or not r.done():
            return oauth_error("invalid_grant", "invalid code")
        # a refused exchange leaves the code to its rightful holder (the verifier is the proof), as upstream
        if form.get("client_id", r.client_id) != r.client_id:
            return oauth_error("invalid_client", "the code was issued to another client")
        if form.get("redirect_uri", "") != r.redirect_uri:
            return oauth_error("invalid_grant", "redirect_uri does not correspond")
        if not r.challenge:
            return oauth_error("invalid_request", "code_challenge required")
        verifier = form.get("code_verifier", "")
        if not verifier or not secrets.compare_digest(tokens.digest(verifier), r.challenge):
            return oauth_error("invalid_grant", "invalid code challenge")
        if self.codes.pop(code, None) is None:   # a code is good for one exchange
            return oauth_error("invalid_grant", "invalid code")
        self.requests.pop(r.id, None)
        store = self.ctl.store
        ident = store.one("SELECT is_admin, is_default_admin, external_id FROM identities WHERE id = ?",
                          (r.identity_id,))
        if ident is None:
            return oauth_error("invalid_grant", "the identity no longer exists")
        mfa_verified = store.value("SELECT 1 FROM mfa WHERE identity_id = ? AND is_verified = 1",
                                   (r.identity_id,)) is not None
        client = request.client
        ip = client.host if client else ""
        with store.write():
            row = sessions.create(self.ctl, r.identity_id, r.authenticator_id, ip, r.config_types,
                                  mfa_required=mfa_verified, cert_extendable=r.cert_extendable)
            if tokens.AMR_TOTP in r.amr:
                store.execute("UPDATE api_sessions SET is_mfa_complete = 1, mfa_passed_at = ? WHERE id = ?",
                              (clock.stamp(), row["id"]))
        answer = tokens.issue(
            self.ctl, identity_id=r.identity_id, api_session_id=row["id"], client_id=r.client_id, amr=r.amr,
            config_types=r.config_types, scopes=r.scopes, auth_time=r.auth_time,
            is_admin=bool(ident["is_admin"] or ident["is_default_admin"]), external_id=ident["external_id"],
            remote_address=ip, cert_extendable=r.cert_extendable, cert_fingerprints=r.fingerprints,
            nonce=r.nonce, sdk_info=r.sdk_info,
            env_info=r.env_info)
        return JSONResponse(answer)

    def _refresh_grant(self, form: dict[str, str]) -> Response:
        try:
            claims = tokens.verify_refresh(self.ctl, form.get("refresh_token", ""))
        except tokens.Rejected as e:
            return oauth_error("invalid_grant", f"invalid refresh token: {e}")
        if form.get("client_id", claims.get("client_id")) != claims.get("client_id"):
            return oauth_error("invalid_client", "the refresh token was issued to another client")
        return self._renew(claims)

    def _exchange_grant(self, form: dict[str, str]) -> Response:
        """RFC 8693 token exchange, as newer SDKs refresh: a refresh token for new access and
        refresh tokens (rotated like the refresh grant), or for an ID token; an access token for
        a new access token."""
        subject, kind = form.get("subject_token", ""), form.get("subject_token_type", "")
        wanted = form.get("requested_token_type") or TT_REFRESH
        if not subject:
            return oauth_error("invalid_request", "subject_token missing")
        if not kind:
            return oauth_error("invalid_request", "subject_token_type missing")
        if kind not in (TT_REFRESH, TT_ACCESS):
            return oauth_error("invalid_request", "subject_token_type is not supported")
        if wanted not in (TT_REFRESH, TT_ACCESS, TT_ID):
            return oauth_error("invalid_request", "requested_token_type is invalid")
        for aud in form.get("audience", "").split():
            if aud not in tokens.CLIENT_IDS:
                return oauth_error("invalid_request", f"invalid audience requested [{aud}]")
        try:
            if kind == TT_REFRESH:
                # an ID token may still be asked for with a refresh token rotated moments ago (the
                # SDK asks for both with the same subject token)
                grace = ID_TOKEN_GRACE_SECONDS if wanted == TT_ID else 0
                claims = tokens.verify_refresh(self.ctl, subject, grace=grace)
            else:
                if wanted != TT_ACCESS:
                    return oauth_error("invalid_request", "an access token is exchanged only for an access token")
                claims = tokens.verify_access(self.ctl, subject)
        except tokens.Rejected as e:
            return oauth_error("invalid_request", f"subject_token is invalid: {e}")
        if wanted == TT_ID:
            if tokens.session_row(self.ctl, claims) is None:
                return oauth_error("invalid_grant", "the API session of the token has ended")
            id_token = tokens.id_token(self.ctl, claims)
            return JSONResponse({"access_token": id_token, "issued_token_type": TT_ID, "token_type": "N_A",
                                 "expires_in": tokens.ID_SECONDS, "scope": " ".join(claims.get("scopes") or [])})
        return self._renew(claims, exchange=wanted, rotate=kind == TT_REFRESH)

    def _renew(self, claims: dict, exchange: str = "", rotate: bool = True) -> Response:
        """New tokens for the API session a verified refresh (or access) token names."""
        store = self.ctl.store
        if tokens.session_row(self.ctl, claims) is None:
            return oauth_error("invalid_grant", "the API session of the refresh token has ended")
        if rotate and not tokens.revoke(store, claims["jti"], claims["exp"]):   # each refresh token works once
            return oauth_error("invalid_grant", "invalid refresh token: already used")
        ident = store.one("SELECT is_admin, is_default_admin, external_id, disabled_at FROM identities WHERE id = ?",
                          (claims["sub"],))
        if ident is None or ident["disabled_at"]:
            return oauth_error("invalid_grant", "the identity is disabled or gone")
        with store.write():
            store.execute("UPDATE api_sessions SET last_activity_at = ? WHERE id = ?",
                          (clock.stamp(), claims["z_asid"]))
        scopes = claims.get("scopes") or []
        answer = tokens.issue(
            self.ctl, identity_id=claims["sub"], api_session_id=claims["z_asid"], client_id=claims.get("client_id", ""),
            amr=claims.get("amr") or [], config_types=claims.get("z_ct") or [], scopes=scopes,
            auth_time=claims.get("auth_time", 0), is_admin=bool(ident["is_admin"] or ident["is_default_admin"]),
            external_id=ident["external_id"], remote_address=claims.get("z_ra", ""),
            cert_extendable=bool(claims.get("z_ice")), cert_fingerprints=claims.get("z_cfs"),
            sdk_info=claims.get("z_sdk"), env_info=claims.get("z_env"), with_id_token=not exchange)
        if exchange:
            answer["issued_token_type"] = exchange
        return JSONResponse(answer)

    # ------------------------------------------------------------------ revocation, end session, userinfo
    async def revoke(self, request: Request) -> Response:
        form = await _form(request)
        token = form.get("token", "")
        for kind in (tokens.TYPE_REFRESH, tokens.TYPE_ACCESS):
            try:
                claims = tokens._verify(self.ctl, token, kind)
            except tokens.Rejected:
                continue
            tokens.revoke(self.ctl.store, claims["jti"], claims["exp"])
            break
        return Response(b"", status_code=200)   # RFC 7009: unknown tokens are no error

    async def introspect(self, request: Request) -> Response:
        """RFC 7662: whether a token of ours is active (signature, expiry, revocation, its API
        session), and its main claims when it is; only the token's holder can ask."""
        form = await _form(request)
        token = form.get("token", "")
        for kind in (tokens.TYPE_ACCESS, tokens.TYPE_REFRESH):
            try:
                claims = (tokens.verify_access(self.ctl, token) if kind == tokens.TYPE_ACCESS
                          else tokens.verify_refresh(self.ctl, token))
            except tokens.Rejected:
                continue
            if tokens.session_row(self.ctl, claims) is None:
                break
            return JSONResponse({"active": True, "sub": claims["sub"], "client_id": claims.get("client_id"),
                                 "aud": claims.get("aud"), "iss": claims.get("iss"), "exp": claims["exp"],
                                 "iat": claims.get("iat"), "jti": claims["jti"],
                                 "token_type": "Bearer" if kind == tokens.TYPE_ACCESS else "refresh_token",
                                 "scope": " ".join(claims.get("scopes") or [])})
        return JSONResponse({"active": False})

    async def end_session(self, request: Request) -> Response:
        q = dict(request.query_params)
        if request.method == "POST":
            q.update(await _form(request))
        target = q.get("post_logout_redirect_uri", "")
        if not _allowed(target, LOGOUT_GLOBS):
            target = "/oidc/logged-out"
        elif q.get("state"):
            target += ("&" if "?" in target else "?") + urllib.parse.urlencode({"state": q["state"]})
        return RedirectResponse(target, status_code=302)

    async def logged_out(self, request: Request) -> Response:
        return PlainTextResponse("signed out successfully")

    async def userinfo(self, request: Request) -> Response:
        token = tokens.bearer(request.headers)
        try:
            claims = tokens.verify_access(self.ctl, token or "")
        except tokens.Rejected:
            return oauth_error("invalid_token", "access token invalid", 401)
        name = self.ctl.store.value("SELECT name FROM identities WHERE id = ?", (claims["sub"],))
        return JSONResponse({"sub": claims["sub"], "name": name})


def jwks_alg(ctl: AuthController) -> str:
    return tokens.jwks(ctl)["keys"][0]["alg"]


def _auth_queries(r: AuthRequest) -> list[dict]:
    """Upstream's TOTP query of a login step (``isTotpEnrolled`` as newer controllers add it:
    without it an SDK would try to enroll)."""
    if r.totp_required and tokens.AMR_TOTP not in r.amr:
        return [{"format": "numeric", "httpMethod": "POST", "httpUrl": "./oidc/login/totp", "maxLength": 8,
                 "minLength": 6, "provider": "ziti", "typeId": "TOTP", "isTotpEnrolled": r.totp_enrolled}]
    return []


def _api_error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}, "meta": {}}, status_code=status)


def _peer_cert(request: Request) -> bool:
    return bool(peer_certs(request))


def _fingerprints(request: Request) -> list[str]:
    """SHA-1 hex of the client's leaf certificate on this request (none: [])."""
    certs = peer_certs(request)
    return [fingerprint(certs[0])] if certs else []


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _strings(v: Any) -> list[str] | None:
    """Config type names as a login sends them: a comma-separated string or a list of strings."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str)][:100]
    return None


def _info(v: Any) -> dict[str, str] | None:
    """SDK or environment info for the token claims: string values only, bounded."""
    if not isinstance(v, dict):
        return None
    return {k[:64]: x[:255] for k, x in list(v.items())[:16] if isinstance(k, str) and isinstance(x, str)} or None


def _is_json(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip() == "application/json"


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (OAuth's), first value of each key."""
    raw = await request.body()
    try:
        pairs = urllib.parse.parse_qsl(raw.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        return {}
    out: dict[str, str] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


_SDK_FIELDS = {"sdkAppId": "appId", "sdkAppID": "appId",  # upstream's name, and ours before
               "sdkAppVersion": "appVersion", "sdkBranch": "branch", "sdkRevision": "revision",
               "sdkType": "type", "sdkVersion": "version"}
_ENV_FIELDS = {"envArch": "arch", "envOs": "os", "envOsRelease": "osRelease", "envOsVersion": "osVersion"}


async def _payload(request: Request) -> dict[str, Any]:
    """A login step's body: JSON, or a form as SDKs post it (``configTypes`` repeated, SDK and
    environment info as flat ``sdk…``/``env…`` fields)."""
    raw = await request.body()
    if _is_json(request):
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    try:
        pairs = urllib.parse.parse_qsl(raw.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        return {}
    out: dict[str, Any] = {}
    sdk: dict[str, str] = {}
    env: dict[str, str] = {}
    for k, v in pairs:
        if k == "configTypes":
            out.setdefault(k, []).append(v)
        elif k in _SDK_FIELDS:
            if v:
                sdk[_SDK_FIELDS[k]] = v
        elif k in _ENV_FIELDS:
            if v:
                env[_ENV_FIELDS[k]] = v
        else:
            out.setdefault(k, v)
    if sdk:
        out["sdkInfo"] = sdk
    if env:
        out["envInfo"] = env
    return out


def _login_html(id: str, error: str | None, status: int = 200, headers: dict | None = None) -> Response:
    err = f'<p class="error">{html.escape(error)}</p>' if error else ""
    page = (f"<!DOCTYPE html><html><head><title>Login</title></head><body><form method=\"POST\""
            f" action=\"/oidc/login/password\"><input type=\"hidden\" name=\"id\" value=\"{html.escape(id)}\">"
            f"<label>Username <input name=\"username\"></label><label>Password <input type=\"password\""
            f" name=\"password\"></label><button type=\"submit\">Login</button>{err}</form></body></html>")
    return HTMLResponse(page, status_code=status, headers=headers)


async def _no_handler(ctx: Ctx) -> Response:
    raise AssertionError("the login steps are dispatched by Provider")


# what the login outcome hooks (events, audit) see of a login step: no edge API route serves it
_LOGIN_ROUTE = Route("client", "POST", "/oidc/login", _no_handler, auth="public", op_id="oidcLogin", tag="oidc")
# and of its TOTP enrollment steps: the caller's own credentials, audited as /current-identity/mfa's
_ENROLL_ROUTE = Route("client", "POST", "/current-identity/mfa", _no_handler, auth="partial",
                      op_id="oidcEnrollMfa", tag="oidc")
_VERIFY_ROUTE = Route("client", "POST", "/current-identity/mfa/verify", _no_handler, auth="partial",
                      op_id="oidcVerifyMfa", tag="oidc")

_ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", "/.well-known/openid-configuration"): Provider.discovery,
    ("GET", "/keys"): Provider.keys,
    ("GET", "/authorize"): Provider.authorize,
    ("POST", "/authorize"): Provider.authorize,
    ("GET", "/authorize/callback"): Provider.callback,
    ("GET", "/login/auth-queries"): Provider.auth_queries,
    ("GET", "/login/password"): Provider.login_page,
    ("GET", "/login/username"): Provider.login_page,
    ("POST", "/login/username"): Provider.login_password,
    ("GET", "/login/cert"): Provider.login_get,
    ("GET", "/login/ext-jwt"): Provider.login_get,
    # POST /login/NAME for every registered primary method: __call__ (_login_step)
    ("POST", "/login/totp"): Provider.totp,
    ("POST", "/login/totp/enroll"): Provider.totp_enroll,
    ("POST", "/login/totp/enroll/verify"): Provider.totp_enroll_verify,
    ("POST", "/oauth/token"): Provider.token,
    ("POST", "/revoke"): Provider.revoke,
    ("POST", "/oauth/introspect"): Provider.introspect,
    ("GET", "/end_session"): Provider.end_session,
    ("POST", "/end_session"): Provider.end_session,
    ("GET", "/logged-out"): Provider.logged_out,
    ("GET", "/userinfo"): Provider.userinfo,
    ("POST", "/userinfo"): Provider.userinfo,
}


Handler = Callable[[Provider, Request], Coroutine[Any, Any, Response]]
_LOGIN_STEPS: dict[str, Handler] = {}   # POST /login/NAME for each primary method of auth.methods.METHODS


def _login_step(name: str) -> Handler:
    """The handler of ``POST /oidc/login/NAME``: the login step of that primary method."""
    async def step(provider: Provider, request: Request) -> Response:
        return await provider._login(request, name)
    return step
