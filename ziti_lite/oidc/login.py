"""The OIDC provider's login steps: authorize (a new auth request), the login page, one step
per primary method of ``auth.methods.METHODS`` (``POST /oidc/login/NAME``, the body and the
functions ``/authenticate`` uses), the auth queries, the TOTP step and enrollment (through
``handlers/totp.py``, audited as ``/current-identity/mfa``'s), and the callback that issues the
code. Functions of the provider (``p``), entered in ``provider.py``'s route table."""

from __future__ import annotations

import json
import secrets
import time
import urllib.parse
from typing import TYPE_CHECKING

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from .. import clock
from ..api.caller import Session
from ..api.context import Ctx
from ..api.router import Route
from ..auth import mfa, sessions
from ..auth import oidc_tokens as tokens
from ..auth.methods import METHODS, Login, login_outcome
from ..auth.policy import policy_secondary
from ..errors import ApiError, InvalidAuth, Unauthorized
from ..handlers import totp as enrolment
from ..handlers.authentication import Authenticate

# the cert method's module loads here, as before this provider dispatched through METHODS: the
# route table (and so the served spec) lists operations in the order their modules load
from ..handlers.enrollment import cert_login as _cert_login  # noqa: F401
from .common import (
    _CONTACT,
    AuthRequest,
    Handler,
    _allowed,
    _api_error,
    _fingerprints,
    _form,
    _info,
    _login_html,
    _payload,
    _peer_cert,
    _redirect_error,
    _str,
    _strings,
    oauth_error,
    refusal,
    wants_html,
)

if TYPE_CHECKING:
    from .provider import Provider


# ------------------------------------------------------------------ authorize
async def authorize(p: Provider, request: Request) -> Response:
    q = dict(request.query_params)
    if request.method == "POST":
        q.update(await _form(request))
    # upstream's answers: plain text where no redirect URI can be trusted, else a redirect
    client_id = q.get("client_id", "")
    if client_id not in tokens.CLIENT_IDS:
        return PlainTextResponse("unable to retrieve client by id", status_code=400)
    redirect_uri = q.get("redirect_uri", "")
    if not _allowed(redirect_uri, p.redirect_uris):
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
    p.requests[id] = AuthRequest(id, client_id, redirect_uri, state, q.get("nonce", ""), scopes, challenge,
                                    time.monotonic(), fingerprints=_fingerprints(request))
    method = q.get("method", "")
    step = "cert" if method == "cert" or (method != "password" and _peer_cert(request)) else "username"
    return RedirectResponse(f"/oidc/login/{step}?authRequestID={id}", status_code=302)


def _logged_in(p: Provider, request: Request, payload: dict) -> AuthRequest | None:
    """The auth request a TOTP step names (``id`` in the body, else in the query), once its
    primary login is done; None otherwise."""
    r = p.request_for(_str(payload.get("id")) or request.query_params.get("id"))
    return r if r is not None and r.identity_id else None


async def callback(p: Provider, request: Request) -> Response:
    r = p.request_for(request.query_params.get("id"))
    if r is None:
        return oauth_error("invalid_request", "the auth request was not found or has expired")
    if not r.done():
        return _redirect_error(r.redirect_uri, "interaction_required",
                               "the user is not logged in and/or additional interaction is required", r.state)
    if not r.code:
        r.code = secrets.token_urlsafe(24)
        p.codes[r.code] = r.id
    q = {"code": r.code}
    if r.state:
        q["state"] = r.state
    sep = "&" if "?" in r.redirect_uri else "?"
    return RedirectResponse(r.redirect_uri + sep + urllib.parse.urlencode(q), status_code=302)


# ------------------------------------------------------------------ login steps
async def login_page(p: Provider, request: Request) -> Response:
    id = request.query_params.get("authRequestID", "")
    return _login_html(id, None, headers={"auth-request-id": id})


async def login_get(p: Provider, request: Request) -> Response:
    id = request.query_params.get("authRequestID", "")
    return PlainTextResponse("please POST to this URL", headers={"auth-request-id": id})


async def login_password(p: Provider, request: Request) -> Response:
    """``/login/username``: upstream's other name of the password step."""
    return await _login(p, request, "password")


async def _login(p: Provider, request: Request, method: str) -> Response:
    payload = await _payload(request)
    id = (request.query_params.get("authRequestID") or request.query_params.get("id")
          or _str(payload.get("id")) or _str(payload.get("authRequestID")))
    r = p.request_for(id)
    html = wants_html(request)
    if r is None:   # upstream: not an API error, so its generic 401
        return PlainTextResponse("The authentication request failed: the auth request was not found or expired",
                                 status_code=401) if html else refusal(Unauthorized())
    ctx = Ctx(p.ctl, request, "client", {}, _LOGIN_ROUTE)
    username = _str(payload.get("username"))
    try:
        # the body /authenticate decodes, and its method from the same registry (the client
        # certificate of the TLS connection, the external JWT as Authorization: Bearer); only the
        # password step reads credentials from the body (SDKs post empty ones with a certificate)
        fields = ("username", "password") if method == "password" else ()
        body = msgspec.convert({k: v for k, v in payload.items() if k in fields}, Authenticate, strict=False)
        login: Login = await METHODS[method](ctx, body)
    except (ApiError, msgspec.ValidationError) as e:
        refused = e if isinstance(e, ApiError) else InvalidAuth()
        login_outcome(ctx, method, None, None, refused, username)
        # OpenZiti 2.0: the API error as JSON (SDKs read it), a page or its text to a browser
        if not html:
            return refusal(refused)
        if method == "password":
            return _login_html(r.id, refused.message, status=refused.status)
        return PlainTextResponse(refused.message, status_code=refused.status)
    login_outcome(ctx, method, login, None, None, username)   # the authentication event and audit row
    store = p.ctl.store
    for fp in _fingerprints(request):
        if fp not in r.fingerprints:
            r.fingerprints.append(fp)
    r.identity_id, r.authenticator_id = login.identity_id, login.authenticator_id
    r.cert_extendable = login.cert_extendable
    r.cert_flags = tokens.cert_claims(store, login.authenticator_id, login.improper_chain)
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


async def auth_queries(p: Provider, request: Request) -> Response:
    r = p.request_for(request.query_params.get("id"))
    if r is None:
        return PlainTextResponse("The authentication request failed", status_code=401)
    headers = {"totp-required": "true"} if r.totp_required else {}
    return JSONResponse({"authQueries": [] if r.done() else _auth_queries(r)}, headers=headers)


async def totp(p: Provider, request: Request) -> Response:
    payload = await _payload(request)
    r = _logged_in(p, request, payload)
    store = p.ctl.store
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


async def totp_enroll(p: Provider, request: Request) -> Response:
    """Start a TOTP enrollment for the identity of a logged-in auth request (the policy asks
    for TOTP, the identity has none): 201 with the MFA detail, as newer SDKs expect."""
    payload = await _payload(request)
    r = _logged_in(p, request, payload)
    if r is None:
        return _api_error(401, "UNAUTHORIZED", "the auth request is unknown, expired or not logged in")
    store = p.ctl.store
    ctx = _step_ctx(p, request, r, _ENROLL_ROUTE)
    with store.write():
        rec = mfa.get(store, r.identity_id)
        if rec is not None and rec["is_verified"]:
            return _api_error(409, "ALREADY_EXISTS", "the identity has a verified TOTP enrollment")
        if rec is None:
            rec = enrolment.enroll(ctx, r.identity_id)
    name = store.value("SELECT name FROM identities WHERE id = ?", (r.identity_id,)) or r.identity_id
    return JSONResponse({"id": rec["id"], "isVerified": False, "recoveryCodes": rec["recovery_codes"],
                         "provisioningUrl": mfa.provisioning_url(mfa.issuer(p.ctl), name, rec["secret"])},
                        status_code=201)


async def totp_enroll_verify(p: Provider, request: Request) -> Response:
    """Finish the enrollment with a current code: the TOTP factor counts for this login too."""
    payload = await _payload(request)
    r = _logged_in(p, request, payload)
    if r is None:
        return _api_error(401, "UNAUTHORIZED", "the auth request is unknown, expired or not logged in")
    store = p.ctl.store
    ctx = _step_ctx(p, request, r, _VERIFY_ROUTE)
    with store.write():
        rec = mfa.get(store, r.identity_id)
        if rec is None or rec["is_verified"]:
            return _api_error(404, "NOT_FOUND", "no TOTP enrollment is waiting for verification")
        if not enrolment.verify(ctx, rec, _str(payload.get("code"))):
            return _api_error(400, "INVALID_TOTP_CODE", "an invalid TOTP code was supplied")
    r.totp_enrolled = True
    if tokens.AMR_TOTP not in r.amr:
        r.amr.append(tokens.AMR_TOTP)
    return RedirectResponse(f"/oidc/authorize/callback?id={r.id}", status_code=302)


def _step_ctx(p: Provider, request: Request, r: AuthRequest, route: Route) -> Ctx:
    """The ``Ctx`` of a login step that changes the identity's credentials (its TOTP
    enrollment): the caller is the auth request's identity, logged in partway, whose API
    session does not exist yet (a stand-in with no id), so the change is reported, audited
    and attributed as ``/current-identity/mfa``'s is."""
    ctx = Ctx(p.ctl, request, "client", {}, route)
    name = p.ctl.store.value("SELECT name FROM identities WHERE id = ?", (r.identity_id,)) or ""
    ctx.session = Session("", "", r.identity_id, False, r.authenticator_id, True, "", identity_name=name)
    return ctx


def _auth_queries(r: AuthRequest) -> list[dict]:
    """Upstream's TOTP query of a login step (``isTotpEnrolled`` as newer controllers add it:
    without it an SDK would try to enroll)."""
    if r.totp_required and tokens.AMR_TOTP not in r.amr:
        return [{"format": "numeric", "httpMethod": "POST", "httpUrl": "./oidc/login/totp", "maxLength": 8,
                 "minLength": 6, "provider": "ziti", "typeId": "TOTP", "isTotpEnrolled": r.totp_enrolled}]
    return []


async def _no_handler(ctx: Ctx) -> Response:
    raise AssertionError("the login steps are dispatched by Provider")


# what the login outcome hooks (events, audit) see of a login step: no edge API route serves it
_LOGIN_ROUTE = Route("client", "POST", "/oidc/login", _no_handler, auth="public", op_id="oidcLogin", tag="oidc")


# and of its TOTP enrollment steps: the caller's own credentials, audited as /current-identity/mfa's
_ENROLL_ROUTE = Route("client", "POST", "/current-identity/mfa", _no_handler, auth="partial",
                      op_id="oidcEnrollMfa", tag="oidc")


_VERIFY_ROUTE = Route("client", "POST", "/current-identity/mfa/verify", _no_handler, auth="partial",
                      op_id="oidcVerifyMfa", tag="oidc")


_LOGIN_STEPS: dict[str, Handler] = {}   # POST /login/NAME for each primary method of auth.methods.METHODS


def login_step(name: str) -> Handler:
    """The handler of ``POST /oidc/login/NAME``: the login step of that primary method."""
    handler = _LOGIN_STEPS.get(name)
    if handler is None:
        async def step(provider: Provider, request: Request) -> Response:
            return await _login(provider, request, name)
        handler = _LOGIN_STEPS[name] = step
    return handler
