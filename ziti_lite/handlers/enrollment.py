"""HTTP side of enrollment and certificates: the client API's ``/enroll`` endpoints, CA
verification and JWT, authenticator re-enrollment, the caller's own authenticators (password
change, certificate extension) and ``POST /authenticate?method=cert``.

The logic lives in ``ziti_lite.enroll`` and ``ziti_lite.auth.certs``; client certificates come
from ``ziti_lite.tls``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated

import msgspec
from msgspec import Meta
from starlette.responses import Response

from .. import clock, tls
from ..api import crud
from ..api import envelope as env
from ..api import render as rendering
from ..api.context import Ctx, not_parsable
from ..api.ops import BOTH, op
from ..api.resource import derive_patch
from ..auth import certs as certauth
from ..auth import enrollments as create
from ..auth import passwords
from ..auth.methods import Login, method
from ..enroll import complete as enroll
from ..enroll import token as token_enroll
from ..errors import ApiError, CouldNotValidate, NotFound, Unauthorized, field_cause, generic_cause
from ..resources.cas_enrollments import CAS, ENROLLMENTS
from ..resources.common import Body, Tags
from ..resources.identities import AUTHENTICATORS

CLIENT = ("client",)
RAW_TYPES = {"text/plain", "application/x-pem-file", "application/pkcs7-mime", "application/pkcs10"}
PEM_TYPE = "application/x-pem-file"
_json = msgspec.json.Decoder()

Username = Annotated[str, Meta(min_length=4, max_length=100)]
Password = Annotated[str, Meta(min_length=5, max_length=100)]


# ================================================================ method=cert
@method("cert", rank=2)
async def cert_login(ctx: Ctx, body) -> Login:
    identity_id, authenticator_id, extendable, improper = certauth.login(ctx, tls.peer_certs(ctx))
    return Login(identity_id, authenticator_id, extendable, improper)


@crud.listen(CAS)
def _trust_registered_ca(ctx: Ctx, id, before, values) -> None:
    """A CA created through the API is accepted by TLS handshakes from now on (no restart);
    whether its certificates are worth anything is decided per request."""
    if values is not None and values.get("cert_pem"):
        tls.trust(ctx.ctl, values["cert_pem"])


# ================================================================ /enroll
async def _read_body(ctx: Ctx) -> tuple[bytes, dict | None]:
    """The body as raw bytes, and as a JSON object when it is JSON (upstream: by Content-Type)."""
    ctype = (ctx.request.headers.get("content-type") or "").split(";")[0].strip().lower()
    body = await ctx.body()
    if ctype == "":  # clients that send no type: an empty body, JSON, or PEM
        ctype = "application/json" if body.lstrip()[:1] == b"{" else "text/plain"
    if ctype == "application/json":
        if not body.strip():
            return body, {}
        try:
            doc = _json.decode(body)
        except (msgspec.DecodeError, UnicodeDecodeError) as e:
            raise not_parsable(e) from None
        return body, doc if isinstance(doc, dict) else {}
    if ctype in RAW_TYPES:
        return body, None
    raise ApiError("INVALID_CONTENT_TYPE",
                   cause=generic_cause(f"content type {ctype} is not supported"))


def wants_json(accept: str | None) -> bool:
    """JSON when the client accepts it explicitly or accepts anything; bare PEM otherwise."""
    if not accept:
        return False
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {"application/json", "*/*"})


def _requested_name(doc: dict | None) -> str:
    name = (doc or {}).get("name")
    return name if isinstance(name, str) else ""


# go-openapi's uuid format, which upstream's enroll operations declare their token query parameter in
_UUID = re.compile(r"(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def check_token_parameter(ctx: Ctx) -> None:
    """A ``token`` query parameter that is no UUID fails upstream's parameter binding, before the
    body is read or the token looked up: 400 COULD_NOT_VALIDATE naming ``token``."""
    raw = ctx.q("token")
    if (ctx.q("method") or "") == "ca":   # auto CA enrollment takes no token: SDKs send the CA JWT's id
        return
    if raw and not _UUID.match(raw):
        quoted = '"' + raw.replace("\\", "\\\\").replace('"', '\\"') + '"'
        raise CouldNotValidate("token", f"token in query must be of type uuid: {quoted}", raw)


def _enroll_handler(default_method: str | None):
    async def handler(ctx: Ctx):
        check_token_parameter(ctx)
        body, doc = await _read_body(ctx)
        method_name = ctx.q("method") or default_method
        if method_name == "ca":
            enroll.enroll_ca(ctx, tls.peer_certs(ctx), _requested_name(doc))
            return env.empty()
        token = ctx.q("token") or ((doc or {}).get("token") if isinstance((doc or {}).get("token"), str) else None)
        enr = enroll.find(ctx.store, token)
        kind = enr["method"]  # the stored method decides, not the query
        if kind == "ott":
            leaf = enroll.enroll_ott(ctx, enr, body, doc is not None)
            if wants_json(ctx.request.headers.get("accept")):
                return env.ok({"cert": certauth.chain_pem(ctx.ctl, leaf), "ca": certauth.ca_bundle_pem(ctx.ctl)})
            return Response(leaf, media_type=PEM_TYPE)
        if kind == "ottca":
            enroll.enroll_ottca(ctx, enr, tls.peer_certs(ctx))
            return env.empty()
        if kind == "updb":
            enroll.enroll_updb(ctx, enr, doc or {})
            return env.empty()
        if kind in enroll.ROUTER_OWNER:
            return env.ok(enroll.enroll_router(ctx, enr, doc or {}))
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    return handler


for _path, _op_id, _default in (("/enroll", "enroll", None), ("/enroll/ott", "enrollOtt", None),
                                ("/enroll/ottca", "enrollOttCa", None), ("/enroll/ca", "enrollCa", "ca"),
                                ("/enroll/updb", "enrollUpdb", None), ("/enroll/erott", "enrollErOtt", None)):
    op("POST", _path, apis=CLIENT, auth="public", op_id=_op_id, tag="enroll",
       body="text/plain", query=("method", "token") if _path == "/enroll" else ())(_enroll_handler(_default))


@op("POST", "/enroll/extend/router", apis=CLIENT, auth="public", op_id="extendRouterEnrollment", tag="enroll")
async def extend_router(ctx: Ctx):
    _, doc = await _read_body(ctx)
    return env.ok(enroll.extend_router(ctx, tls.peer_certs(ctx), doc or {}))


class TokenEnrollmentRequest(Body):
    client_csr: str | None = None


async def _token_request(ctx: Ctx) -> dict:
    """The JSON body of ``/enroll/token``, as upstream's binding takes it: JSON only (415
    otherwise) and required (upstream answers its HTTP 602 for none; ziti-lite 400)."""
    ctype = (ctx.request.headers.get("content-type") or "").split(";")[0].strip().lower()
    body = await ctx.body()
    if ctype and ctype != "application/json":
        err = CouldNotValidate("Content-Type", f'unsupported media type "{ctype}", only [application/json] are allowed',
                               ctype)
        err.status = 415
        raise err
    if not body.strip():
        raise CouldNotValidate("tokenEnrollmentRequest", "tokenEnrollmentRequest in body is required", "")
    try:
        doc = _json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise not_parsable(e) from None
    if not isinstance(doc, dict):
        raise ApiError("COULD_NOT_PARSE_BODY", cause=generic_cause("the body must be a JSON object"))
    return doc


@op("POST", "/enroll/token", apis=CLIENT, auth="public", op_id="enrollToken", tag="enroll",
    body=TokenEnrollmentRequest)
async def enroll_by_token(ctx: Ctx):
    """Enrollment from an identity provider (``enroll/token.py``): the identity a JWT of an
    external JWT signer names is made, with a certificate for ``clientCsr`` or to log in with
    such JWTs. A request without an Authorization header is refused before the body is read
    (upstream v2.0.3 answers its HTTP 602 there)."""
    if not ctx.request.headers.getlist("authorization"):
        raise CouldNotValidate("Authorization", "Authorization in header is required", None)
    doc = await _token_request(ctx)
    csr = doc.get("clientCsr")
    if csr is not None and not isinstance(csr, str):
        kind = {bool: "bool", list: "array", dict: "object"}.get(type(csr), "number")
        raise ApiError("COULD_NOT_PARSE_BODY", cause=generic_cause(
            f'parsing tokenEnrollmentRequest body from "" failed, because json: cannot unmarshal {kind} into Go'
            " struct field TokenEnrollmentRequest.clientCsr of type string"))   # upstream's words
    certs = await token_enroll.enroll_token(ctx, csr or "")
    return env.ok(certs if certs is not None else {"data": None, "meta": None})


# ================================================================ CAs
def _ca(ctx: Ctx) -> dict:
    id = ctx.params["id"]
    rows = certauth.ca_rows(ctx.store, "id = ?", (id,))
    if not rows:
        raise NotFound()  # upstream's CA verify and jwt operations answer 404 without a cause
    return rows[0]


@op("POST", "/cas/{id}/verify", op_id="verifyCa", body="text/plain", tag="certificate-authority", perm=("ca", "update"))
async def verify_ca(ctx: Ctx):
    row = _ca(ctx)
    certauth.verify_ca(ctx, row, await ctx.body())
    with ctx.store.write():
        before = crud.get_row(ctx.store, CAS, row["id"])
        ctx.store.execute("UPDATE cas SET is_verified = 1, updated_at = ? WHERE id = ?", (clock.stamp(), row["id"]))
        crud.changed(ctx, CAS, row["id"], before, {"is_verified": True})
    tls.trust(ctx.ctl, row["cert_pem"])
    return env.empty()


@op("GET", "/cas/{id}/jwt", op_id="getCaJwt", tag="certificate-authority", perm=("ca", "read"))
async def ca_jwt(ctx: Ctx):
    row = _ca(ctx)
    return Response(create.ca_jwt(ctx.ctl, row["id"]), media_type="application/jwt")


# ================================================================ authenticators
class ReEnroll(Body):
    expires_at: dt.datetime


def _future(t: dt.datetime) -> dt.datetime:
    t = t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)
    if t <= clock.now():
        raise CouldNotValidate("expiresAt", "must be after the current date and time", clock.fmt(t))
    return t


@op("POST", "/authenticators/{id}/re-enroll", op_id="reEnrollAuthenticator", body=ReEnroll, status=201,
    tag="authenticator", perm=("authenticator", "update"))
async def reenroll_authenticator(ctx: Ctx):
    id = ctx.params["id"]
    if ctx.store.one("SELECT id FROM authenticators WHERE id = ?", (id,)) is None:
        raise NotFound("authenticator", id)
    body = await ctx.json(ReEnroll)
    expires = _future(body.expires_at)
    with ctx.store.write():
        auth = ctx.store.one("SELECT * FROM authenticators WHERE id = ?", (id,))
        if auth is None:
            raise NotFound("authenticator", id)
        enr_id = create.reenroll_authenticator(ctx, auth, expires)
        # as upstream's stores: the authenticator is deleted, an enrollment created (entityChange,
        # and the request's audit row on the authenticator)
        crud.changed(ctx, AUTHENTICATORS, id, auth, None)
        crud.changed(ctx, ENROLLMENTS, enr_id, None, {"authenticator_id": id})
    return env.created(enr_id, f"./enrollments/{enr_id}")


class RequestExtend(Body):
    roll_keys: bool = False


@op("POST", "/authenticators/{id}/request-extend", op_id="requestExtendAuthenticator", body=RequestExtend,
    tag="authenticator", perm=("authenticator", "update"))
async def request_extend_authenticator(ctx: Ctx):
    body = await ctx.json(RequestExtend)
    with ctx.store.write():
        before, values = certauth.request_extend(ctx, ctx.params["id"], body.roll_keys)
        crud.changed(ctx, AUTHENTICATORS, before["id"], before, values)
    return env.empty()


# ---------------------------------------------------------------- the caller's own
def _render_own(ctx: Ctx, row: dict) -> dict:
    # upstream's links of one's own authenticator: self alone, under /current-identity
    out = rendering.render(ctx, AUTHENTICATORS, row)
    out["_links"] = {"self": {"href": f"./current-identity/authenticators/{row['id']}"}}
    return out


def _own(ctx: Ctx) -> dict:
    id = ctx.params["id"]
    row = ctx.store.one("SELECT * FROM authenticators WHERE id = ? AND identity_id = ?", (id, ctx.identity_id))
    if row is None:
        raise NotFound("authenticator", id)
    return row


@op("GET", "/current-identity/authenticators", apis=BOTH, auth="session", op_id="listCurrentIdentityAuthenticators",
    tag="current-api-session", query=("limit", "offset", "filter"))
async def list_own(ctx: Ctx):
    return crud.list_response(ctx, AUTHENTICATORS, "t.identity_id = ?", [ctx.identity_id], render_row=_render_own)


@op("GET", "/current-identity/authenticators/{id}", apis=BOTH, auth="session",
    op_id="detailCurrentIdentityAuthenticator", tag="current-api-session")
async def detail_own(ctx: Ctx):
    return env.ok(_render_own(ctx, _own(ctx)))


class OwnUpdate(Body):
    username: Username
    password: Password
    current_password: Password
    tags: Tags | None = None


OwnPatch = derive_patch(OwnUpdate, default=None, keep=("current_password",))


async def _change_own(ctx: Ctx, struct):
    row = _own(ctx)
    body = await ctx.json(struct)
    if row["method"] != "updb":
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR")
    if not await passwords.verify_async(body.current_password, row["password_hash"], row["salt"]):
        raise ApiError("UNAUTHORIZED", cause=field_cause("currentPassword", "invalid current password", None))
    values: dict = {}
    if body.username is not None:
        values["username"] = body.username
    if body.password is not None:
        values["password_hash"], values["salt"] = passwords.hash_password(body.password)
    if struct is OwnUpdate:
        values["tags"] = body.tags or {}
    elif body.tags:
        values["tags"] = body.tags
    res = AUTHENTICATORS
    with ctx.store.write():
        before = ctx.store.one("SELECT * FROM authenticators WHERE id = ?", (row["id"],))
        crud.write_row(ctx.store, res, row["id"], values)
        crud.changed(ctx, res, row["id"], before, values)
    return env.empty()


@op("PUT", "/current-identity/authenticators/{id}", apis=BOTH, auth="session", body=OwnUpdate,
    op_id="updateCurrentIdentityAuthenticator", tag="current-api-session")
async def update_own(ctx: Ctx):
    return await _change_own(ctx, OwnUpdate)


@op("PATCH", "/current-identity/authenticators/{id}", apis=BOTH, auth="session", body=OwnPatch,
    op_id="patchCurrentIdentityAuthenticator", tag="current-api-session")
async def patch_own(ctx: Ctx):
    return await _change_own(ctx, OwnPatch)


class ExtendRequest(Body):
    client_cert_csr: str


class ExtendVerifyRequest(Body):
    client_cert: str


def _own_cert_authenticator(ctx: Ctx) -> dict:
    """The caller's authenticator named in the path, once the body is valid and a client
    certificate was presented: another identity's answers 404 like an unknown id (no oracle)."""
    if not tls.peer_certs(ctx):
        raise Unauthorized(None)  # upstream: 401 without a cause
    row = ctx.store.one("SELECT * FROM authenticators WHERE id = ? AND identity_id = ?",
                        (ctx.params["id"], ctx.identity_id))
    if row is None:
        raise NotFound("authenticator", ctx.params["id"])
    return row


@op("POST", "/current-identity/authenticators/{id}/extend", apis=BOTH, auth="session", body=ExtendRequest,
    op_id="extendCertAuthenticator", tag="current-api-session")
async def extend_own(ctx: Ctx):
    body = await ctx.json(ExtendRequest)
    row = _own_cert_authenticator(ctx)
    with ctx.store.write():   # the new certificate and its entityChange/audit row in one transaction
        answer = certauth.extend(ctx, row, tls.peer_certs(ctx), body.client_cert_csr)
        crud.changed(ctx, AUTHENTICATORS, row["id"], row, {"unverified_cert_pem": None})
    return env.ok(answer)


@op("POST", "/current-identity/authenticators/{id}/extend-verify", apis=BOTH, auth="session",
    body=ExtendVerifyRequest, op_id="extendVerifyCertAuthenticator", tag="current-api-session")
async def extend_verify_own(ctx: Ctx):
    body = await ctx.json(ExtendVerifyRequest)
    row = _own_cert_authenticator(ctx)
    with ctx.store.write():
        certauth.verify_extension(ctx, row, body.client_cert)
        crud.changed(ctx, AUTHENTICATORS, row["id"], row, {"cert_pem": None})
    return env.empty()
