"""The OIDC provider's grants and token endpoints: token (authorization code with PKCE,
refresh-token rotation, token exchange), revocation, introspection, end session and userinfo.
Functions of the provider (``p``), entered in ``provider.py``'s route table."""

from __future__ import annotations

import secrets
import urllib.parse
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from .. import clock
from ..auth import oidc_tokens as tokens
from ..auth import sessions
from .common import (
    ID_TOKEN_GRACE_SECONDS,
    REUSE_SECONDS,
    TOKEN_EXCHANGE,
    TT_ACCESS,
    TT_ID,
    TT_REFRESH,
    _allowed,
    _form,
    oauth_error,
)

if TYPE_CHECKING:
    from .provider import Provider


# ------------------------------------------------------------------ token
async def token(p: Provider, request: Request) -> Response:
    form = await _form(request)
    grant = form.get("grant_type", "")
    if grant == "authorization_code":
        response = _code_grant(p, request, form)
    elif grant == "refresh_token":
        response = _refresh_grant(p, form)
    elif grant == TOKEN_EXCHANGE:
        response = _exchange_grant(p, form)
    elif not grant:
        return oauth_error("invalid_request", "grant_type missing")
    else:
        return oauth_error("unsupported_grant_type", f"{grant} not supported")
    if response.status_code == 200:
        p.grants[grant] += 1
    return response


def _code_grant(p: Provider, request: Request, form: dict[str, str]) -> Response:
    code = form.get("code", "")
    id = p.codes.get(code)
    r = p.request_for(id) if id else None
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
    if p.codes.pop(code, None) is None:   # a code is good for one exchange
        return oauth_error("invalid_grant", "invalid code")
    p.requests.pop(r.id, None)
    store = p.ctl.store
    ident = store.one("SELECT is_admin, is_default_admin, external_id FROM identities WHERE id = ?",
                      (r.identity_id,))
    if ident is None:
        return oauth_error("invalid_grant", "the identity no longer exists")
    mfa_verified = store.value("SELECT 1 FROM mfa WHERE identity_id = ? AND is_verified = 1",
                               (r.identity_id,)) is not None
    client = request.client
    ip = client.host if client else ""
    with store.write():
        row = sessions.create(p.ctl, r.identity_id, r.authenticator_id, ip, r.config_types,
                              mfa_required=mfa_verified, cert_extendable=r.cert_extendable,
                              improper_chain=bool(r.cert_flags.get("z_iccc")),
                              id=tokens.new_api_session_id())
        if tokens.AMR_TOTP in r.amr:
            store.execute("UPDATE api_sessions SET is_mfa_complete = 1, mfa_passed_at = ? WHERE id = ?",
                          (clock.stamp(), row["id"]))
    answer = tokens.issue(
        p.ctl, identity_id=r.identity_id, api_session_id=row["id"], client_id=r.client_id, amr=r.amr,
        config_types=r.config_types, scopes=r.scopes, auth_time=r.auth_time,
        is_admin=bool(ident["is_admin"] or ident["is_default_admin"]), external_id=ident["external_id"],
        remote_address=ip, cert_extendable=r.cert_extendable, cert_fingerprints=r.fingerprints,
        cert_flags=r.cert_flags, nonce=r.nonce, sdk_info=r.sdk_info,
        env_info=r.env_info)
    return JSONResponse(answer)


def _refresh_grant(p: Provider, form: dict[str, str]) -> Response:
    try:
        claims = tokens.verify_refresh(p.ctl, form.get("refresh_token", ""))
    except tokens.Rejected as e:
        return oauth_error("invalid_grant", f"invalid refresh token: {e}")
    if form.get("client_id", claims.get("client_id")) != claims.get("client_id"):
        return oauth_error("invalid_client", "the refresh token was issued to another client")
    return _renew(p, claims)


def _exchange_grant(p: Provider, form: dict[str, str]) -> Response:
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
            claims = tokens.verify_refresh(p.ctl, subject, grace=grace)
        else:
            if wanted != TT_ACCESS:
                return oauth_error("invalid_request", "an access token is exchanged only for an access token")
            claims = tokens.verify_access(p.ctl, subject)
    except tokens.Rejected as e:
        return oauth_error("invalid_request", f"subject_token is invalid: {e}")
    if wanted == TT_ID:
        if tokens.session_row(p.ctl, claims) is None:
            return oauth_error("invalid_grant", "the API session of the token has ended")
        id_token = tokens.id_token(p.ctl, claims)
        return JSONResponse({"access_token": id_token, "issued_token_type": TT_ID, "token_type": "N_A",
                             "expires_in": tokens.ID_SECONDS, "scope": " ".join(claims.get("scopes") or [])})
    return _renew(p, claims, exchange=wanted, rotate=kind == TT_REFRESH)


def _renew(p: Provider, claims: dict, exchange: str = "", rotate: bool = True) -> Response:
    """New tokens for the API session a verified refresh (or access) token names."""
    store = p.ctl.store
    if tokens.session_row(p.ctl, claims) is None:
        return oauth_error("invalid_grant", "the API session of the refresh token has ended")
    if rotate:   # the refresh token is replaced: revoked, in force a little later (REUSE_SECONDS)
        tokens.revoke(store, claims["jti"], claims["exp"], after=REUSE_SECONDS)
    ident = store.one("SELECT is_admin, is_default_admin, external_id, disabled_at FROM identities WHERE id = ?",
                      (claims["sub"],))
    if ident is None or ident["disabled_at"]:
        return oauth_error("invalid_grant", "the identity is disabled or gone")
    with store.write():
        store.execute("UPDATE api_sessions SET last_activity_at = ? WHERE id = ?",
                      (clock.stamp(), claims["z_asid"]))
    scopes = claims.get("scopes") or []
    answer = tokens.issue(
        p.ctl, identity_id=claims["sub"], api_session_id=claims["z_asid"], client_id=claims.get("client_id", ""),
        amr=claims.get("amr") or [], config_types=claims.get("z_ct") or [], scopes=scopes,
        auth_time=claims.get("auth_time", 0), is_admin=bool(ident["is_admin"] or ident["is_default_admin"]),
        external_id=ident["external_id"], remote_address=claims.get("z_ra", ""),
        cert_extendable=bool(claims.get("z_ice")), cert_fingerprints=claims.get("z_cfs"),
        cert_flags={k: claims.get(k) for k in tokens.CERT_CLAIMS},
        sdk_info=claims.get("z_sdk"), env_info=claims.get("z_env"), with_id_token=not exchange)
    if exchange:
        answer["issued_token_type"] = exchange
    return JSONResponse(answer)


# ------------------------------------------------------------------ revocation, end session, userinfo
async def revoke(p: Provider, request: Request) -> Response:
    form = await _form(request)
    token = form.get("token", "")
    for kind in (tokens.TYPE_REFRESH, tokens.TYPE_ACCESS):
        try:
            claims = tokens._verify(p.ctl, token, kind)
        except tokens.Rejected:
            continue
        tokens.revoke(p.ctl.store, claims["jti"], claims["exp"])
        break
    return Response(b"", status_code=200)   # RFC 7009: unknown tokens are no error


async def introspect(p: Provider, request: Request) -> Response:
    """RFC 7662: whether a token of ours is active (signature, expiry, revocation, its API
    session), and its main claims when it is; only the token's holder can ask."""
    form = await _form(request)
    token = form.get("token", "")
    for kind in (tokens.TYPE_ACCESS, tokens.TYPE_REFRESH):
        try:
            claims = (tokens.verify_access(p.ctl, token) if kind == tokens.TYPE_ACCESS
                      else tokens.verify_refresh(p.ctl, token))
        except tokens.Rejected:
            continue
        if tokens.session_row(p.ctl, claims) is None:
            break
        return JSONResponse({"active": True, "sub": claims["sub"], "client_id": claims.get("client_id"),
                             "aud": claims.get("aud"), "iss": claims.get("iss"), "exp": claims["exp"],
                             "iat": claims.get("iat"), "jti": claims["jti"],
                             "token_type": "Bearer" if kind == tokens.TYPE_ACCESS else "refresh_token",
                             "scope": " ".join(claims.get("scopes") or [])})
    return JSONResponse({"active": False})


async def end_session(p: Provider, request: Request) -> Response:
    q = dict(request.query_params)
    if request.method == "POST":
        q.update(await _form(request))
    target = q.get("post_logout_redirect_uri", "")
    if not _allowed(target, p.logout_uris):
        target = "/oidc/logged-out"
    elif q.get("state"):
        target += ("&" if "?" in target else "?") + urllib.parse.urlencode({"state": q["state"]})
    return RedirectResponse(target, status_code=302)


async def logged_out(p: Provider, request: Request) -> Response:
    return PlainTextResponse("signed out successfully")


async def userinfo(p: Provider, request: Request) -> Response:
    token = tokens.bearer(request.headers)
    try:
        claims = tokens.verify_access(p.ctl, token or "")
    except tokens.Rejected:
        return oauth_error("invalid_token", "access token invalid", 401)
    name = p.ctl.store.value("SELECT name FROM identities WHERE id = ?", (claims["sub"],))
    return JSONResponse({"sub": claims["sub"], "name": name})
