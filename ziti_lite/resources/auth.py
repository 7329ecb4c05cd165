"""Auth policies, external JWT signers, CAs (CRUD), enrollments and controllers.

Auth policies keep ``primary``/``secondary`` as JSON in the wire shape (the login code reads
them); PATCH merges only the supplied leaves. CA verification, the CA JWT and the enroll flows
live elsewhere and build on the ``cas`` and ``enrollments`` rows kept here.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Literal, Optional

import msgspec

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api.ops import op
from ..api.resource import Field, Resource
from ..db.filters import Symbol
from ..enroll import new_enrollment, server_keypair
from ..errors import ApiError, CouldNotValidate, NotFound, ReferencedEntity, field_cause
from ..ids import new_id, new_token
from ..pki import ca as pki
from ..pki import tokens
from .common import NAME, Body, Tags, check_name, exists, name_of
from .identities import AUTHENTICATORS

ZERO_TIME = "0001-01-01T00:00:00.000Z"


def _blank(v):
    return None if v is None or (isinstance(v, str) and not v.strip()) else v


def _bad_request(field: str, reason: str, value) -> ApiError:
    """Upstream's "bad request field error": 400 REFERENCED_ENTITY_NOT_FOUND with a field cause."""
    return ApiError("REFERENCED_ENTITY_NOT_FOUND", 400, cause=field_cause(field, reason, value))


# ================================================================ auth policies
class AuthPolicyPrimaryCert(Body):
    allowed: bool
    allow_expired_certs: bool


class AuthPolicyPrimaryExtJwt(Body):
    allowed: bool
    allowed_signers: Optional[list[str]]


class AuthPolicyPrimaryUpdb(Body):
    allowed: bool
    lockout_duration_minutes: int
    max_attempts: int
    min_password_length: int
    require_mixed_case: bool
    require_number_char: bool
    require_special_char: bool


class AuthPolicyPrimary(Body):
    cert: AuthPolicyPrimaryCert
    ext_jwt: AuthPolicyPrimaryExtJwt
    updb: AuthPolicyPrimaryUpdb


class AuthPolicySecondary(Body):
    require_totp: bool
    require_ext_jwt_signer: Optional[str] = None


class AuthPolicyCreate(Body):
    name: str
    primary_: AuthPolicyPrimary = msgspec.field(name="primary")
    secondary: AuthPolicySecondary
    tags: Optional[Tags] = None


class AuthPolicyUpdate(AuthPolicyCreate):
    pass


# PATCH: every leaf optional; null (or absent) leaves the stored value alone
class AuthPolicyPrimaryCertPatch(Body):
    allowed: Optional[bool] = None
    allow_expired_certs: Optional[bool] = None


class AuthPolicyPrimaryExtJwtPatch(Body):
    allowed: Optional[bool] = None
    allowed_signers: Optional[list[str]] = None


class AuthPolicyPrimaryUpdbPatch(Body):
    allowed: Optional[bool] = None
    lockout_duration_minutes: Optional[int] = None
    max_attempts: Optional[int] = None
    min_password_length: Optional[int] = None
    require_mixed_case: Optional[bool] = None
    require_number_char: Optional[bool] = None
    require_special_char: Optional[bool] = None


class AuthPolicyPrimaryPatch(Body):
    cert: Optional[AuthPolicyPrimaryCertPatch] = None
    ext_jwt: Optional[AuthPolicyPrimaryExtJwtPatch] = None
    updb: Optional[AuthPolicyPrimaryUpdbPatch] = None


class AuthPolicySecondaryPatch(Body):
    require_ext_jwt_signer: Optional[str] = None
    require_totp: Optional[bool] = None


class AuthPolicyPatch(Body):
    name: Optional[str] = None
    primary_: Optional[AuthPolicyPrimaryPatch] = msgspec.field(default=None, name="primary")
    secondary: Optional[AuthPolicySecondaryPatch] = None
    tags: Optional[Tags] = None


# what a policy reads as when a key was never stored (upstream's read defaults)
PRIMARY_DEFAULTS = {
    "cert": {"allowed": True, "allowExpiredCerts": True},
    "extJwt": {"allowed": True, "allowedSigners": []},
    "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 5, "minPasswordLength": 5,
             "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False},
}
SECONDARY_DEFAULTS = {"requireExtJwtSigner": None, "requireTotp": False}


def _merge(base: dict, patch: dict) -> dict:
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            continue
        out[k] = _merge(out.get(k) or {}, v) if isinstance(v, dict) else v
    return out


def normalized_policy(primary, secondary) -> tuple[dict, dict]:
    p = _merge(PRIMARY_DEFAULTS, primary or {})
    s = _merge(SECONDARY_DEFAULTS, secondary or {})
    if secondary and "requireExtJwtSigner" in secondary:
        s["requireExtJwtSigner"] = secondary["requireExtJwtSigner"]
    return p, s


def _load(text):
    return json.loads(text) if text else {}


def prepare_auth_policy(ctx, values: dict, existing: dict | None) -> None:
    check_name(values)
    patch = existing is not None and ctx.route.method == "PATCH"
    if "primary_" not in values and "secondary" not in values:
        return
    p_in, s_in = values.get("primary_") or {}, values.get("secondary") or {}
    if patch:
        p_in = _merge(_load(existing["primary_"]), p_in)
        if "requireExtJwtSigner" in s_in and s_in["requireExtJwtSigner"] is not None:
            keep = s_in["requireExtJwtSigner"]
        else:
            keep = _load(existing["secondary"]).get("requireExtJwtSigner")
        s_in = _merge(_load(existing["secondary"]), s_in)
        s_in["requireExtJwtSigner"] = keep
    primary, secondary = normalized_policy(p_in, s_in)
    updb = primary["updb"]
    updb["lockoutDurationMinutes"] = max(0, updb["lockoutDurationMinutes"])
    updb["maxAttempts"] = max(0, updb["maxAttempts"])
    updb["minPasswordLength"] = max(5, updb["minPasswordLength"])
    signers = list(dict.fromkeys(primary["extJwt"].get("allowedSigners") or []))
    primary["extJwt"]["allowedSigners"] = signers
    for sid in signers:
        if not exists(ctx.store, "external_jwt_signers", sid):
            raise _signer_missing("primary.extJwt.allowedSigners", sid)
    required = _blank(secondary.get("requireExtJwtSigner"))
    secondary["requireExtJwtSigner"] = required
    if required is not None and not exists(ctx.store, "external_jwt_signers", required):
        raise _signer_missing("secondary.requireExtJwtSigner", required)
    values["primary_"], values["secondary"] = primary, secondary


def _signer_missing(field: str, id: str) -> ApiError:
    # upstream answers a dangling signer reference with 404 NOT_FOUND (its tests assert 404)
    return ApiError("NOT_FOUND", 404, cause=field_cause(field, f"externalJwtSigner with id {id} not found", id))


def render_auth_policy(ctx, row: dict, out: dict) -> None:
    # upstream omits a null requireExtJwtSigner; an explicit null reads the same to every client
    out["primary"], out["secondary"] = normalized_policy(_load(row["primary_"]), _load(row["secondary"]))


def before_delete_auth_policy(ctx, row: dict) -> None:
    ids = ctx.store.column("SELECT id FROM identities WHERE auth_policy_id = ? ORDER BY id", (row["id"],))
    if ids:
        raise ReferencedEntity("authPolicyId", "authPolicy", "identity", ids)


def _json_sym(kind: str, column: str, path: str) -> Symbol:
    return Symbol(kind, f"json_extract(t.{column}, '$.{path}')")


AUTH_POLICIES = Resource(
    name="auth-policies", entity="authPolicy", table="auth_policies",
    fields=(NAME, Field("primary", "json", column="primary_", filterable=False),
            Field("secondary", "json", filterable=False)),
    create=AuthPolicyCreate, update=AuthPolicyUpdate, patch=AuthPolicyPatch,
    auth={"list": "session"},
    extra_symbols={
        "primary.cert.allowed": _json_sym("bool", "primary_", "cert.allowed"),
        "primary.cert.allowExpiredCerts": _json_sym("bool", "primary_", "cert.allowExpiredCerts"),
        "primary.updb.allowed": _json_sym("bool", "primary_", "updb.allowed"),
        "primary.updb.minPasswordLength": _json_sym("int", "primary_", "updb.minPasswordLength"),
        "primary.updb.requireSpecialChar": _json_sym("bool", "primary_", "updb.requireSpecialChar"),
        "primary.updb.requireNumberChar": _json_sym("bool", "primary_", "updb.requireNumberChar"),
        "primary.updb.requireMixedCase": _json_sym("bool", "primary_", "updb.requireMixedCase"),
        "primary.updb.maxAttempts": _json_sym("int", "primary_", "updb.maxAttempts"),
        "primary.updb.lockoutDurationMinutes": _json_sym("int", "primary_", "updb.lockoutDurationMinutes"),
        "primary.extJwt.allowed": _json_sym("bool", "primary_", "extJwt.allowed"),
        "primary.extJwt.allowedSigners": Symbol(
            "set", "SELECT value FROM json_each(t.primary_, '$.extJwt.allowedSigners')"),
        "secondary.requireTotp": _json_sym("bool", "secondary", "requireTotp"),
        "secondary.requireExtJwtSigner": _json_sym("string", "secondary", "requireExtJwtSigner"),
    },
    prepare=prepare_auth_policy, render=render_auth_policy, before_delete=before_delete_auth_policy,
)


# ================================================================ external JWT signers
class ExternalJwtSignerCreate(Body):
    name: str
    enabled: bool
    issuer: str
    audience: Optional[str]
    cert_pem: Optional[str] = None
    jwks_endpoint: Optional[str] = None
    kid: Optional[str] = None
    claims_property: Optional[str] = None
    use_external_id: Optional[bool] = None
    external_auth_url: Optional[str] = None
    client_id: Optional[str] = None
    scopes: Optional[list[str]] = None
    target_token: Optional[Literal["ACCESS", "ID"]] = None
    tags: Optional[Tags] = None


class ExternalJwtSignerUpdate(ExternalJwtSignerCreate):
    pass


def prepare_signer(ctx, values: dict, existing: dict | None) -> None:
    check_name(values)
    full = existing is None or ctx.route.method == "PUT"
    for key in ("cert_pem", "jwks_endpoint", "kid", "external_auth_url", "audience", "client_id"):
        if key in values:
            values[key] = _blank(values[key])
    if "issuer" in values and _blank(values["issuer"]) is None:
        raise CouldNotValidate("issuer", "issuer is required", values["issuer"])
    if "claims_property" in values or full:
        values["claims_property"] = _blank(values.get("claims_property")) or "sub"
    if full:
        values["use_external_id"] = bool(values.get("use_external_id"))
        values["target_token"] = values.get("target_token") or "ACCESS"
    cert = values["cert_pem"] if "cert_pem" in values else (existing or {}).get("cert_pem")
    jwks = values["jwks_endpoint"] if "jwks_endpoint" in values else (existing or {}).get("jwks_endpoint")
    if cert is None and jwks is None:
        raise _bad_request("certPem", "jwksEndpoint or certPem is required", None)
    if cert is not None and jwks is not None:
        raise _bad_request("jwksEndpoint", "only one of jwksEndpoint or certPem may be defined", jwks)
    if "cert_pem" in values or full:
        values.update(_cert_columns(cert))


def _cert_columns(cert_pem: str | None) -> dict:
    if cert_pem is None:
        return {"fingerprint": None, "common_name": "", "not_before": None, "not_after": None}
    try:
        certs = pki.load_certs(cert_pem)
    except Exception:
        certs = []
    if len(certs) != 1:
        raise ApiError("INVALID_CERT_PEM", 400, message="the certificate PEM must hold exactly one certificate")
    info = pki.cert_info(certs[0])
    return {"fingerprint": info["fingerprint"], "common_name": info["cn"] or "",
            "not_before": clock.fmt(info["not_before"]), "not_after": clock.fmt(info["not_after"])}


def render_signer(ctx, row: dict, out: dict) -> None:
    out["notBefore"] = row["not_before"] or ZERO_TIME
    out["notAfter"] = row["not_after"] or ZERO_TIME


def before_delete_signer(ctx, row: dict) -> None:
    ids = ctx.store.column(
        "SELECT id FROM auth_policies p WHERE EXISTS (SELECT 1 FROM json_each(p.primary_, '$.extJwt.allowedSigners')"
        " WHERE value = ?1) OR json_extract(p.secondary, '$.requireExtJwtSigner') = ?1 ORDER BY id", (row["id"],))
    if ids:
        raise ReferencedEntity("primary.extJwt.allowedSigners", "externalJwtSigner", "authPolicy", ids)


EXT_JWT_SIGNERS = Resource(
    name="external-jwt-signers", entity="externalJwtSigner", table="external_jwt_signers",
    unique=("name", "issuer", "kid", "fingerprint"),
    fields=(
        NAME,
        Field("certPem", nullable=True),
        Field("jwksEndpoint", nullable=True),
        Field("kid", nullable=True),
        Field("issuer"),
        Field("audience", nullable=True),
        Field("enabled", "bool"),
        Field("claimsProperty"),
        Field("useExternalId", "bool"),
        Field("externalAuthUrl", nullable=True),
        Field("clientId", nullable=True),
        Field("scopes", "set", nullable=True),
        Field("targetToken", filterable=False),
        Field("fingerprint", nullable=True),
        Field("commonName"),
        Field("notBefore", "datetime", nullable=True),
        Field("notAfter", "datetime", nullable=True),
    ),
    create=ExternalJwtSignerCreate, update=ExternalJwtSignerUpdate,
    prepare=prepare_signer, render=render_signer, before_delete=before_delete_signer,
)


@op("GET", "/external-jwt-signers", apis=("client",), auth="public", op_id="listExternalJwtSigners",
    tag="external-jwt-signers", query=("limit", "offset", "filter"))
async def list_client_signers(ctx):
    """The client API's view: enabled signers only, just what a login UI needs."""
    rows, limit, offset, total = crud.page(ctx, EXT_JWT_SIGNERS, "t.enabled = 1")
    data = []
    for r in rows:
        item = {"id": r["id"], "createdAt": r["created_at"], "updatedAt": r["updated_at"],
                "tags": crud.Raw(r["tags"]), "_links": env.links("external-jwt-signers", r["id"]),
                "name": r["name"], "externalAuthUrl": r["external_auth_url"],
                "scopes": crud.Raw(r["scopes"]) if r["scopes"] else None}
        if r["client_id"] is not None:
            item["clientId"] = r["client_id"]
        if r["audience"] is not None:
            item["audience"] = r["audience"]
        data.append(item)
    return env.listing(data, limit, offset, total, EXT_JWT_SIGNERS.filterable)


# ================================================================ CAs
Location = Literal["COMMON_NAME", "SAN_URI", "SAN_EMAIL"]
Matcher = Literal["ALL", "PREFIX", "SUFFIX", "SCHEME"]
Parser = Literal["NONE", "SPLIT"]
DEFAULT_NAME_FORMAT = "[caName]-[commonName]"
CLAIM_DEFAULTS = {"index": 0, "location": "", "matcher": "", "matcherCriteria": "", "parser": "", "parserCriteria": ""}


class ExternalIdClaim(Body):
    index: Optional[int] = None
    location: Optional[Location] = None
    matcher: Optional[Matcher] = None
    matcher_criteria: Optional[str] = None
    parser: Optional[Parser] = None
    parser_criteria: Optional[str] = None


class CaCreate(Body):
    name: str
    cert_pem: str
    is_auto_ca_enrollment_enabled: bool
    is_ott_ca_enrollment_enabled: bool
    is_auth_enabled: bool
    identity_roles: Optional[list[str]]
    identity_name_format: Optional[str] = None
    external_id_claim: Optional[ExternalIdClaim] = None
    tags: Optional[Tags] = None


class CaUpdate(Body):
    name: str
    is_auto_ca_enrollment_enabled: bool
    is_ott_ca_enrollment_enabled: bool
    is_auth_enabled: bool
    identity_roles: Optional[list[str]]
    identity_name_format: str
    external_id_claim: Optional[ExternalIdClaim] = None
    tags: Optional[Tags] = None


class CaPatch(Body):
    name: Optional[str] = None
    is_auto_ca_enrollment_enabled: Optional[bool] = None
    is_ott_ca_enrollment_enabled: Optional[bool] = None
    is_auth_enabled: Optional[bool] = None
    identity_roles: Optional[list[str]] = None
    identity_name_format: Optional[str] = None
    external_id_claim: Optional[ExternalIdClaim] = None
    tags: Optional[Tags] = None


def check_identity_roles(store, roles) -> list[str]:
    """CA identity roles become the role attributes of identities it enrolls, so the CLI sends
    plain attributes; entries written as policy roles (``#attr``, ``@id``) are checked as such."""
    roles = list(dict.fromkeys(roles or []))
    for r in roles:
        if r == "" or r in ("#", "@"):
            raise CouldNotValidate("identityRoles", "empty role", roles)
        if r == "#all" and len(roles) > 1:
            raise CouldNotValidate("identityRoles", "if using #all, no other roles may be used", roles)
    missing = [r[1:] for r in roles if r.startswith("@") and not exists(store, "identities", r[1:])]
    if missing:
        raise CouldNotValidate("identityRoles", "no identities found with the given ids", missing)
    return roles


def prepare_ca(ctx, values: dict, existing: dict | None) -> None:
    store = ctx.store
    check_name(values)
    patch = existing is not None and ctx.route.method == "PATCH"
    if existing is None:
        values.update(_ca_cert(store, values.get("cert_pem") or ""))
        values["is_verified"] = False
        values["verification_token"] = new_id()
    else:
        for k in ("cert_pem", "fingerprint", "is_verified", "verification_token"):
            values.pop(k, None)
    if "identity_roles" in values or not patch:
        values["identity_roles"] = check_identity_roles(store, values.get("identity_roles"))
    if "identity_name_format" in values or not patch:
        values["identity_name_format"] = _blank(values.get("identity_name_format")) or DEFAULT_NAME_FORMAT
    if "external_id_claim" in values:
        claim = values["external_id_claim"]
        if claim is not None:
            base = (_load(existing["external_id_claim"]) or {}) if patch else {}
            claim = _merge(_merge(CLAIM_DEFAULTS, base), claim)
            if claim["matcher"] == "SCHEME" and claim["location"] != "SAN_URI":
                raise _bad_request("matcher", "scheme matcher can only be used with URI locations", claim["matcher"])
        values["external_id_claim"] = claim


def _ca_cert(store, pem: str) -> dict:
    try:
        certs = pki.load_certs(pem)
    except Exception as e:
        raise CouldNotValidate("certPem", f"could not parse the certificate PEM: {e}", pem) from None
    if not certs:
        raise CouldNotValidate("certPem", "at least one leaf certificate must be supplied", pem)
    if not pki.is_ca(certs[0]):
        raise ApiError("CERTIFICATE_IS_NOT_CA", 400, message="the certificate is not a CA")
    fp = pki.fingerprint(certs[0])
    other = store.value("SELECT id FROM cas WHERE fingerprint = ?", (fp,))
    if other:
        raise CouldNotValidate("certPem", f"certificate already used as CA {other}", pem)
    return {"fingerprint": fp, "cert_pem": pem}


def render_ca(ctx, row: dict, out: dict) -> None:
    if not row["is_verified"]:
        out["_links"]["verify"] = {"href": f"./cas/{row['id']}/verify"}
    if row["is_auto_ca_enrollment_enabled"]:
        out["_links"]["jwt"] = {"href": f"./cas/{row['id']}/jwt"}
    claim = _load(row["external_id_claim"]) if row["external_id_claim"] else None
    if claim:
        out["externalIdClaim"] = _merge(CLAIM_DEFAULTS, claim)
    else:
        out.pop("externalIdClaim", None)


def before_delete_ca(ctx, row: dict) -> None:
    store, id = ctx.store, row["id"]
    store.execute("DELETE FROM enrollments WHERE ca_id = ? AND method = 'ottca'", (id,))
    store.execute("DELETE FROM api_sessions WHERE authenticator_id IN"
                  " (SELECT id FROM authenticators WHERE ca_id = ? AND method = 'cert')", (id,))
    store.execute("DELETE FROM authenticators WHERE ca_id = ? AND method = 'cert'", (id,))


CAS = Resource(
    name="cas", entity="ca", unique=("name", "fingerprint"),
    fields=(
        NAME,
        Field("certPem", filterable=False),
        Field("fingerprint"),
        Field("isVerified", "bool"),
        Field("verificationToken"),
        Field("isAutoCaEnrollmentEnabled", "bool"),
        Field("isOttCaEnrollmentEnabled", "bool"),
        Field("isAuthEnabled", "bool"),
        Field("identityRoles", "set"),
        Field("identityNameFormat", filterable=False),
        Field("externalIdClaim", "json", filterable=False, nullable=True),
    ),
    create=CaCreate, update=CaUpdate, patch=CaPatch,
    prepare=prepare_ca, render=render_ca, before_delete=before_delete_ca,
)


# ================================================================ enrollments
def _ref(store, entity: str, table: str, id: str | None) -> dict | None:
    if id is None:
        return None
    try:
        name = name_of(store, table, id)
    except Exception:  # the table of that family may not exist in this build
        name = None
    return env.entity_ref(entity, entity, id, name)


def render_enrollment(ctx, row: dict, out: dict) -> None:
    store = ctx.store
    out["identity"] = _ref(store, "identities", "identities", row["identity_id"])
    out["edgeRouter"] = _ref(store, "edge-routers", "routers", row["edge_router_id"])
    out["transitRouter"] = _ref(store, "transit-routers", "routers", row["transit_router_id"])
    if row["ca_id"] is not None:
        out["ca"] = _ref(store, "cas", "cas", row["ca_id"])
    for k in [k for k, v in out.items() if v is None or v == ""]:
        del out[k]


ENROLLMENTS = Resource(
    name="enrollments", entity="enrollment", unique=("token",),
    fields=(
        Field("method"),
        Field("token"),
        Field("expiresAt", "datetime"),
        Field("jwt", filterable=False),
        Field("identityId", filterable=False),
        Field("edgeRouterId", filterable=False),
        Field("transitRouterId", filterable=False),
        Field("caId", column="ca_id"),
        Field("username", filterable=False),
    ),
    ops=("list", "detail", "delete"),
    extra_symbols={"identity": Symbol("string", "t.identity_id"),
                   "edgeRouter": Symbol("string", "t.edge_router_id"),
                   "transitRouter": Symbol("string", "t.transit_router_id")},
    render=render_enrollment,
)


class EnrollmentCreate(Body):
    method: Literal["ott", "ottca", "updb"]
    expires_at: dt.datetime
    identity_id: str
    ca_id: Optional[str] = None
    username: Optional[str] = None


class EnrollmentRefresh(Body):
    expires_at: dt.datetime


def _utc(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


@op("POST", "/enrollments", op_id="createEnrollment", body=EnrollmentCreate, status=201, tag="enrollments")
async def create_enrollment(ctx):
    body = await ctx.json(EnrollmentCreate)
    expires = _utc(body.expires_at)
    store = ctx.store
    with store.write():
        if not exists(store, "identities", body.identity_id):
            raise _bad_request("identityId", "identity not found", body.identity_id)
        if expires <= clock.now():
            raise _bad_request("expiresAt", "expiresAt must be in the future", clock.fmt(expires))
        if body.method == "ottca" and (body.ca_id is None or not exists(store, "cas", body.ca_id)):
            raise _bad_request("caId", "ca not found", body.ca_id)
        if body.method == "updb" and not body.username:
            raise _bad_request("username", "username not provided", body.username)
        if store.value("SELECT 1 FROM enrollments WHERE identity_id = ? AND method = ?",
                       (body.identity_id, body.method)):
            raise ApiError("ENROLLMENT_EXISTS", 409,
                           cause=field_cause("method", "enrollment of same method exists", body.method))
        id = new_enrollment(ctx, body.method, identity_id=body.identity_id, expires_at=expires,
                            ca_id=body.ca_id if body.method == "ottca" else None,
                            username=body.username if body.method == "updb" else None)
    return env.created(id, f"./enrollments/{id}")


@op("POST", "/enrollments/{id}/refresh", op_id="refreshEnrollment", body=EnrollmentRefresh, tag="enrollments")
async def refresh_enrollment(ctx):
    id = ctx.params["id"]
    crud.get_row(ctx.store, ENROLLMENTS, id)
    body = await ctx.json(EnrollmentRefresh)
    expires = _utc(body.expires_at)
    with ctx.store.write():
        row = crud.get_row(ctx.store, ENROLLMENTS, id)
        if expires <= clock.now():
            raise CouldNotValidate("expiresAt", "must be after the current date and time", clock.fmt(expires))
        token = new_token()  # a new token first, then the JWT that carries it
        subject = row["identity_id"] or row["edge_router_id"] or row["transit_router_id"]
        jwt = tokens.enrollment_jwt(server=server_keypair(ctx.ctl), issuer=ctx.ctl.settings.base_url,
                                    subject=subject, token=token, method=row["method"], expires_at=expires)
        ctx.store.execute("UPDATE enrollments SET token = ?, jwt = ?, expires_at = ?, updated_at = ? WHERE id = ?",
                          (token, jwt, clock.fmt(expires), clock.stamp(), id))
    return env.empty()


# ================================================================ identity sub-lists
@op("GET", "/identities/{id}/authenticators", op_id="getIdentityAuthenticators", tag="identities",
    query=("limit", "offset", "filter"))
async def identity_authenticators(ctx):
    id = ctx.params["id"]
    if not exists(ctx.store, "identities", id):
        raise NotFound("identity", id)
    return crud.list_response(ctx, AUTHENTICATORS, "t.identity_id = ?", [id])


@op("GET", "/identities/{id}/enrollments", op_id="getIdentityEnrollments", tag="identities",
    query=("limit", "offset", "filter"))
async def identity_enrollments(ctx):
    id = ctx.params["id"]
    if not exists(ctx.store, "identities", id):
        raise NotFound("identity", id)
    return crud.list_response(ctx, ENROLLMENTS, "t.identity_id = ?", [id])


# ================================================================ controllers
CONTROLLERS = Resource(
    name="controllers", entity="controller",
    fields=(
        NAME,
        Field("ctrlAddress", nullable=True),
        Field("certPem"),
        Field("fingerprint"),
        Field("isOnline", "bool"),
        Field("lastJoinedAt", "datetime"),
        Field("apiAddresses", "map", filterable=False),
    ),
    ops=("list",), apis=("management", "client"), auth={"list": "session"},
)

RESOURCES = (AUTH_POLICIES, EXT_JWT_SIGNERS, CAS, ENROLLMENTS, CONTROLLERS)
