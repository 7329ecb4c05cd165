"""TOTP enrollment of the current identity, ``POST /authenticate/mfa`` and the admin reset.

Reachable by partially authenticated sessions (so that a session that owes TOTP can give it,
or enroll when its auth policy requires TOTP): ``POST /authenticate/mfa``, ``GET/POST
/current-identity/mfa``, ``POST /current-identity/mfa/verify``, ``GET .../qr-code``. The
recovery codes and ``DELETE /current-identity/mfa`` need a fully authenticated session. The
secret (in ``provisioningUrl`` and the QR code) and the recovery codes are shown only while
the enrollment is unverified; afterwards recovery codes are read with a current TOTP code.

Every change of the MFA record is reported through ``crud.changed`` as an entity of type
``mfas`` (upstream's store, declared in ``totp.py`` with the enrollment both this module and the
OIDC login use), so it makes an entityChange event and the request's audit row; its secret and
recovery codes are redacted there like any secret field.
"""

from __future__ import annotations

from starlette.responses import Response

from .. import clock
from ..api import envelope as env
from ..api.context import Ctx, decode
from ..api.ops import BOTH, op
from ..auth import mfa, oidc_tokens, sessions
from ..auth.methods import Login, auth_query, login_outcome
from ..errors import ApiError, NotFound
from ..resources.common import Body, refuse_for_admin
from .totp import changed as _changed
from .totp import enroll, verify
from .totp import row as _row

TAG = "current-identity"
CODE_HEADER = "mfa-validation-code"


class MfaCode(Body):
    code: str


class OptionalMfaCode(Body):
    code: str | None = None


def _record(ctx: Ctx, verified: bool | None = None) -> dict:
    """The caller's MFA record; 404 when there is none (or it is not in the wanted state)."""
    rec = mfa.get(ctx.store, ctx.identity_id)
    if rec is None or (verified is not None and bool(rec["is_verified"]) != verified):
        raise NotFound()  # upstream: 404 without a cause
    return rec


async def _given_code(ctx: Ctx) -> str | None:
    """The code from the ``mfa-validation-code`` header, else from a JSON body ``{"code"}``."""
    code = ctx.request.headers.get(CODE_HEADER)
    if code:
        return code
    body = await ctx.body()
    if not body.strip():
        return None
    try:
        return decode(body, OptionalMfaCode).code
    except ApiError:
        return None


def detail(ctx: Ctx, rec: dict) -> dict:
    links = {"self": env.link("./current-identity/mfa"), "current-identity": env.link("./current-identity")}
    out = env.base(rec, "", link_map=links)  # tags: never written, {}
    out["isVerified"] = bool(rec["is_verified"])
    if rec["is_verified"]:
        links["recovery-codes"] = env.link("./current-identity/mfa/recovery-codes")
        out["recoveryCodes"] = None
    else:
        links["verify"] = env.link("./current-identity/mfa/verify")
        links["qr"] = env.link("./current-identity/mfa/qr-code")
        out["provisioningUrl"] = _provisioning_url(ctx, rec)
        out["recoveryCodes"] = rec["recovery_codes"]
    return out


def _provisioning_url(ctx: Ctx, rec: dict) -> str:
    name = ctx.store.value("SELECT name FROM identities WHERE id = ?", (rec["identity_id"],)) or rec["identity_id"]
    return mfa.provisioning_url(mfa.issuer(ctx.ctl), name, rec["secret"])


# ---------------------------------------------------------------- auth query
TOTP_QUERY = {"typeId": "MFA", "provider": "ziti", "httpMethod": "POST", "httpUrl": "./authenticate/mfa",
              "minLength": 4, "maxLength": 6, "format": "alphaNumeric", "scopes": None}


def totp_auth_query(ctx: Ctx, row: dict, secondary: dict) -> list:
    """The MFA auth query while the session owes a TOTP code."""
    if sessions.totp_outstanding(row, secondary):
        return [dict(TOTP_QUERY)]
    return []


auth_query(rank=1)(totp_auth_query)  # upstream lists MFA before EXT-JWT


# ---------------------------------------------------------------- operations
@op("POST", "/authenticate/mfa", apis=BOTH, auth="partial", op_id="authenticateMfa", body=MfaCode,
    tag="authentication")
async def authenticate_mfa(ctx: Ctx):
    body = await ctx.json(MfaCode)
    session = ctx.api_session
    rec: dict | None = mfa.get(ctx.store, ctx.identity_id)
    if rec is None:
        raise _failed(ctx, None, ApiError("MFA_NOT_ENROLLED"))
    with ctx.store.write():
        before = _row(ctx, rec["id"])
        codes = len(rec["recovery_codes"])
        ok = mfa.check_code(ctx.store, rec, body.code, recovery=True)
        if ok:
            mfa.pass_session(ctx.store, session.id)
            if len(rec["recovery_codes"]) != codes:   # a recovery code was used up
                _changed(ctx, rec["id"], before, {"recovery_codes": rec["recovery_codes"]})
    if not ok:
        raise _failed(ctx, rec, ApiError("MFA_INVALID_TOKEN"))
    _outcome(ctx, rec)
    return env.empty()


def _outcome(ctx: Ctx, rec: dict | None, error: ApiError | None = None) -> None:
    """Tell the login-outcome hooks (the audit trail, ``authentication`` events) how the TOTP
    step of a login went (``error``: the failure answered)."""
    session = ctx.api_session
    login_outcome(ctx, "mfa", Login(session.identity_id, rec["id"] if rec else ""), session.id, error, None)


def _failed(ctx: Ctx, rec: dict | None, error: ApiError) -> ApiError:
    """``error``, the answer to a failed TOTP step, once the login-outcome hooks know of it."""
    _outcome(ctx, rec, error)
    return error


@op("POST", "/current-identity/mfa", apis=BOTH, auth="partial", op_id="enrollMfa", tag=TAG, status=201)
async def enroll_mfa(ctx: Ctx):
    store = ctx.store
    with store.write():
        if mfa.get(store, ctx.identity_id) is not None:
            raise ApiError("MFA_EXISTS")
        rec = enroll(ctx, ctx.identity_id)
    return env.created(rec["id"], "./current-identity/mfa")


@op("GET", "/current-identity/mfa", apis=BOTH, auth="partial", op_id="detailMfa", tag=TAG)
async def detail_mfa(ctx: Ctx):
    return env.ok(detail(ctx, _record(ctx)))


@op("GET", "/current-identity/mfa/qr-code", apis=BOTH, auth="partial", op_id="detailMfaQrCode", tag=TAG)
async def mfa_qr_code(ctx: Ctx):
    rec = _record(ctx, verified=False)
    return Response(mfa.qr_png(_provisioning_url(ctx, rec)), media_type="image/png")


@op("POST", "/current-identity/mfa/verify", apis=BOTH, auth="partial", op_id="verifyMfa", body=MfaCode, tag=TAG)
async def verify_mfa(ctx: Ctx):
    body = await ctx.json(MfaCode)
    rec = _record(ctx, verified=False)
    with ctx.store.write():
        if not verify(ctx, rec, body.code):
            raise ApiError("MFA_INVALID_TOKEN")
        mfa.pass_session(ctx.store, ctx.api_session.id, verified_now=True)
    return env.empty()


@op("POST", "/current-api-session/totp-token", apis=BOTH, auth="session", op_id="createTotpToken", body=MfaCode,
    tag="current-api-session")
async def create_totp_token(ctx: Ctx):
    """A TOTP code of the caller's MFA (verified or not; no recovery code) for a token saying when
    this API session last gave one; only for sessions named by an OIDC access token, as upstream.
    The token's issue counts as the session's MFA pass for the MFA posture checks ziti-lite
    evaluates (upstream's routers count it once the SDK hands it to them: the SDK asks for one
    only to do so at once)."""
    body = await ctx.json(MfaCode)
    session = ctx.api_session
    claims = ctx.ctl.oidc_verified.get(session.bearer) if session.bearer else None
    if claims is None:
        raise ApiError("INVALID_BACKING_TOKEN_TYPE")
    rec = mfa.get(ctx.store, ctx.identity_id)
    if rec is None:
        raise ApiError("MFA_NOT_ENROLLED")
    if not mfa.valid_totp(rec["secret"], body.code):
        raise ApiError("MFA_INVALID_TOKEN")
    token, issued = oidc_tokens.totp_token(ctx.ctl, claims)
    with ctx.store.write():
        mfa.record_pass(ctx.store, session.id, clock.fmt(issued))
    return env.ok_without_meta({"token": token, "issuedAt": clock.fmt(issued)})


@op("GET", "/current-identity/mfa/recovery-codes", apis=BOTH, auth="session", op_id="detailMfaRecoveryCodes",
    body=MfaCode, tag=TAG)
async def recovery_codes(ctx: Ctx):
    rec = _record(ctx, verified=True)
    if not mfa.valid_totp(rec["secret"], await _given_code(ctx)):
        raise ApiError("MFA_INVALID_TOKEN")
    out = env.base(rec, "", link_map={"self": env.link("./current-identity/mfa/recovery-codes"),
                                      "mfa": env.link("./current-identity/mfa")})
    out["recoveryCodes"] = rec["recovery_codes"]
    return env.ok(out)


@op("POST", "/current-identity/mfa/recovery-codes", apis=BOTH, auth="session", op_id="createMfaRecoveryCodes",
    body=MfaCode, tag=TAG)
async def regenerate_recovery_codes(ctx: Ctx):
    rec = _record(ctx, verified=True)
    code = await _given_code(ctx)
    with ctx.store.write():
        before = _row(ctx, rec["id"])
        ok = mfa.check_code(ctx.store, rec, code, recovery=True)
        if ok:
            codes = mfa.regenerate(ctx.store, rec)
            _changed(ctx, rec["id"], before, {"recovery_codes": codes})
    if not ok:
        raise ApiError("MFA_INVALID_TOKEN")
    return env.empty()


@op("DELETE", "/current-identity/mfa", apis=BOTH, auth="session", op_id="deleteMfa", tag=TAG)
async def delete_mfa(ctx: Ctx):
    rec = _record(ctx)
    code = await _given_code(ctx)
    with ctx.store.write():
        before = _row(ctx, rec["id"])
        ok = not rec["is_verified"] or mfa.check_code(ctx.store, rec, code, recovery=True)
        if ok:
            mfa.delete(ctx.store, ctx.identity_id)
            _changed(ctx, rec["id"], before, None)
    if not ok:
        raise ApiError("MFA_INVALID_TOKEN")
    return env.empty()


@op("DELETE", "/identities/{id}/mfa", auth="admin", op_id="removeIdentityMfa", tag="identities",
    perm=("identity", "update"))
async def remove_identity_mfa(ctx: Ctx):
    id = ctx.params["id"]
    if ctx.store.value("SELECT 1 FROM identities WHERE id = ?", (id,)) is None:
        raise NotFound("identity", id)
    refuse_for_admin(ctx, id, "non-admins may not remove the MFA of admin identities")
    with ctx.store.write():
        before = ctx.store.one("SELECT * FROM mfa WHERE identity_id = ?", (id,))
        if before is None:
            raise NotFound()  # upstream: 404 without a cause
        mfa.delete(ctx.store, id)
        _changed(ctx, before["id"], before, None)
    return env.empty()
