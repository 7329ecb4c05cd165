"""Auth policies, external JWT signers, controllers and an identity's authenticators.

Auth policies keep ``primary``/``secondary`` as JSON in the wire shape (the login code reads
them); PATCH merges only the supplied leaves. CAs and enrollments are in ``cas_enrollments.py``.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Literal

import msgspec

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api.ops import op
from ..api.resource import Field, Resource, derive_patch
from ..auth.defaults import PRIMARY_DEFAULTS, SECONDARY_DEFAULTS
from ..db.filters import Symbol
from ..errors import ApiError, CouldNotValidate, NotFound, ReferencedEntity, field_cause, generic_cause, go_text, redact
from ..pki import ca as pki
from .common import NAME, Body, Tags, check_name, exists
from .identities import AUTHENTICATORS, IDENTITIES

if TYPE_CHECKING:
    from ..api.context import Ctx

ZERO_TIME = "0001-01-01T00:00:00.000Z"


def blank(v):
    return None if v is None or (isinstance(v, str) and not v.strip()) else v


def bad_request(field: str, reason: str, value) -> ApiError:
    """Upstream's "bad request field error": 400 INVALID_FIELD, as OpenZiti 2.0 answers it
    (v1.3.3 named the same error REFERENCED_ENTITY_NOT_FOUND; no client reads the code).

    Upstream hands its field error over by value, so its renderer does not know it for one and
    writes it as a generic cause whose message is the field error's text. Where upstream's text
    prints a pointer's address for the value, ziti-lite prints the value.
    """
    text = go_text(redact(field, value))
    return ApiError("INVALID_FIELD",
                    cause=generic_cause(f"the value '{text}' for '{field}' is invalid: {reason}"))


# ================================================================ auth policies
class AuthPolicyPrimaryCert(Body):
    allowed: bool
    allow_expired_certs: bool


class AuthPolicyPrimaryExtJwt(Body):
    allowed: bool
    allowed_signers: list[str] | None


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
    require_ext_jwt_signer: str | None = None


class AuthPolicyCreate(Body):
    name: str
    primary_: AuthPolicyPrimary = msgspec.field(name="primary")
    secondary: AuthPolicySecondary
    tags: Tags | None = None



def merge_leaves(base: dict, patch: dict) -> dict:
    """``base`` with the non-null leaves of ``patch`` written over it (nested dicts merged)."""
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            continue
        out[k] = merge_leaves(out.get(k) or {}, v) if isinstance(v, dict) else v
    return out


def normalized_policy(primary, secondary) -> tuple[dict, dict]:
    """Stored (or sent) primary/secondary completed with the read defaults; fresh dicts."""
    p = merge_leaves(copy.deepcopy(PRIMARY_DEFAULTS), primary or {})
    s = merge_leaves(dict(SECONDARY_DEFAULTS), secondary or {})
    if secondary and "requireExtJwtSigner" in secondary:
        s["requireExtJwtSigner"] = secondary["requireExtJwtSigner"]
    return p, s


def load_json(text):
    return json.loads(text) if text else {}


def prepare_auth_policy(ctx: Ctx, values: dict, existing: dict | None) -> None:
    check_name(values)
    patch = existing is not None and ctx.route.method == "PATCH"
    if "primary_" not in values and "secondary" not in values:
        return
    p_in, s_in = values.get("primary_") or {}, values.get("secondary") or {}
    if patch and existing is not None:  # only the leaves sent (null leaves count as not sent)
        p_in = merge_leaves(load_json(existing["primary_"]), p_in)
        s_in = merge_leaves(load_json(existing["secondary"]), s_in)
    primary, secondary = normalized_policy(p_in, s_in)
    updb = primary["updb"]
    updb["lockoutDurationMinutes"] = max(0, updb["lockoutDurationMinutes"])
    updb["maxAttempts"] = max(0, updb["maxAttempts"])
    updb["minPasswordLength"] = max(5, updb["minPasswordLength"])
    given = primary["extJwt"].get("allowedSigners") or []
    required = blank(secondary.get("requireExtJwtSigner"))
    secondary["requireExtJwtSigner"] = required
    # checked in upstream's order and named with its field paths; upstream checks on create only
    # (an update stores a signer id that does not exist), ziti-lite on every write
    if required is not None and not exists(ctx.store, "external_jwt_signers", required):
        raise _signer_missing("secondary.requiredExtJwtSigner", required)
    for i, sid in enumerate(given):
        if not exists(ctx.store, "external_jwt_signers", sid):
            raise _signer_missing(f"primary.extJwt.allowedExtJwtSigners[{i}]", sid)
    primary["extJwt"]["allowedSigners"] = list(dict.fromkeys(given))
    values["primary_"], values["secondary"] = primary, secondary


def _signer_missing(field: str, id: str) -> ApiError:
    # upstream answers a dangling signer reference with 404 NOT_FOUND (its tests assert 404)
    return ApiError("NOT_FOUND", cause=field_cause(field, "not found", id))


def render_auth_policy(ctx: Ctx, row: dict, out: dict) -> None:
    # upstream omits a null requireExtJwtSigner; an explicit null reads the same to every client
    out["primary"], out["secondary"] = normalized_policy(load_json(row["primary_"]), load_json(row["secondary"]))
    if out["secondary"].get("requireExtJwtSigner") is None:
        del out["secondary"]["requireExtJwtSigner"]  # upstream leaves an unset signer out


def before_delete_auth_policy(ctx: Ctx, row: dict) -> None:
    ids = ctx.store.column("SELECT id FROM identities WHERE auth_policy_id = ? ORDER BY id", (row["id"],))
    if ids:
        raise ReferencedEntity("authPolicyId", "authPolicy", "identity", ids)
    # the policy external JWT signers give the identities they enroll (upstream: a foreign key)
    ids = ctx.store.column("SELECT id FROM external_jwt_signers WHERE enroll_auth_policy_id = ? ORDER BY id",
                           (row["id"],))
    if ids:
        raise ReferencedEntity("enrollAuthPolicyId", "authPolicy", "externalJwtSigner", ids)


def _json_sym(kind: str, column: str, path: str) -> Symbol:
    return Symbol(kind, f"json_extract(t.{column}, '$.{path}')")


AUTH_POLICIES = Resource(
    name="auth-policies", entity="authPolicy", table="auth_policies", permission="auth-policy",
    fields=(NAME, Field("primary", "json", column="primary_"),
            Field("secondary", "json")),
    create=AuthPolicyCreate,
    patch=derive_patch(AuthPolicyCreate, default=None, nested=True),  # null (or absent) leaves the stored value alone
    extra_symbols={
        "primary.cert.allowed": _json_sym("bool", "primary_", "cert.allowed"),
        "primary.cert.allowExpiredCerts": _json_sym("bool", "primary_", "cert.allowExpiredCerts"),
        "primary.updb.allowed": _json_sym("bool", "primary_", "updb.allowed"),
        "primary.updb.minPasswordLength": _json_sym("int", "primary_", "updb.minPasswordLength"),
        "primary.updb.requireSpecialChar": _json_sym("bool", "primary_", "updb.requireSpecialChar"),
        "primary.updb.requireNumberChar": _json_sym("bool", "primary_", "updb.requireNumberChar"),
        "primary.updb.requireMixedCase": _json_sym("bool", "primary_", "updb.requireMixedCase"),
        "primary.updb.maxAttempts": _json_sym("int", "primary_", "updb.maxAttempts"),
        "primary.extJwt.allowed": _json_sym("bool", "primary_", "extJwt.allowed"),
        "secondary.requireTotp": _json_sym("bool", "secondary", "requireTotp"),
        "secondary.requireExtJwtSigner": _json_sym("string", "secondary", "requireExtJwtSigner"),
    },
    filters=("name", "primary.cert.allowed", "primary.cert.allowExpiredCerts", "primary.updb.allowed",
             "primary.updb.minPasswordLength", "primary.updb.requireSpecialChar", "primary.updb.requireNumberChar",
             "primary.updb.requireMixedCase", "primary.updb.maxAttempts", "primary.extJwt.allowed",
             "secondary.requireTotp", "secondary.requireExtJwtSigner"),
    prepare=prepare_auth_policy, render=render_auth_policy, before_delete=before_delete_auth_policy,
)


# ================================================================ external JWT signers
class ExternalJwtSignerCreate(Body):
    name: str
    enabled: bool
    issuer: str
    audience: str | None
    cert_pem: str | None = None
    jwks_endpoint: str | None = None
    kid: str | None = None
    claims_property: str | None = None
    use_external_id: bool | None = None
    external_auth_url: str | None = None
    client_id: str | None = None
    scopes: list[str] | None = None
    target_token: Literal["ACCESS", "ID"] | None = None
    enroll_to_cert_enabled: bool | None = None
    enroll_to_token_enabled: bool | None = None
    enroll_name_claims_selector: str | None = None
    enroll_attribute_claims_selector: str | None = None
    enroll_auth_policy_id: str | None = None
    tags: Tags | None = None


DEFAULT_NAME_SELECTOR = "/sub"     # upstream's default: the name of an enrolled identity is its sub
DEFAULT_AUTH_POLICY = "default"


def _enroll_defaults(values: dict, full: bool) -> None:
    """Upstream stores an empty name selector or auth policy as its default, and a PUT (or
    create) resets what it leaves out; the selectors are kept as sent (a leading ``/`` is added
    where they are read)."""
    for key, default in (("enroll_name_claims_selector", DEFAULT_NAME_SELECTOR),
                         ("enroll_auth_policy_id", DEFAULT_AUTH_POLICY)):
        if key in values or full:
            values[key] = (values.get(key) or "").strip() or default
    if "enroll_attribute_claims_selector" in values or full:
        values["enroll_attribute_claims_selector"] = (values.get("enroll_attribute_claims_selector") or "").strip()
    for key in ("enroll_to_cert_enabled", "enroll_to_token_enabled"):
        if key in values or full:
            values[key] = bool(values.get(key))


def _check_enroll_policy(ctx: Ctx, values: dict, existing: dict | None) -> None:
    """The auth policy enrolled identities get must exist and allow the enrollments the signer
    allows (upstream checks the stored result of every write)."""
    def now(key):
        return values[key] if key in values else (existing or {}).get(key)
    policy_id = now("enroll_auth_policy_id") or DEFAULT_AUTH_POLICY
    to_token, to_cert = bool(now("enroll_to_token_enabled")), bool(now("enroll_to_cert_enabled"))
    row = ctx.store.one("SELECT primary_ FROM auth_policies WHERE id = ?", (policy_id,))
    primary = normalized_policy(load_json(row["primary_"]), {})[0] if row is not None else None
    reason = None
    if primary is None:
        if not (to_token or to_cert):   # upstream: its foreign key's answer
            raise NotFound("authPolicy", policy_id)
        # upstream's reason is misleading (the id was given, it names nothing)
        reason = f"the auth policy must be specified if enroll to {'token' if to_token else 'cert'} is enabled"
    elif to_token and not primary["extJwt"]["allowed"]:
        reason = "primary external jwt authentication on auth policy is disabled"
    elif to_cert and not primary["cert"]["allowed"]:
        reason = "primary certificate authentication on auth policy is disabled"
    if reason is not None:
        raise CouldNotValidate("enrollAuthPolicyId", reason, policy_id)


def prepare_signer(ctx: Ctx, values: dict, existing: dict | None) -> None:
    check_name(values)
    full = existing is None or ctx.route.method == "PUT"
    # a blank audience or auth URL is no value (null); a kid or client id is kept as sent, "" too
    # (what ZAC's signer form sends for an empty field): v1.3.3 and v2.0.3 answer both so
    for key in ("cert_pem", "jwks_endpoint", "external_auth_url", "audience"):
        if key in values:
            values[key] = blank(values[key])
    if "issuer" in values and blank(values["issuer"]) is None:
        raise CouldNotValidate("issuer", "issuer is required", values["issuer"])
    if "claims_property" in values or full:
        values["claims_property"] = blank(values.get("claims_property")) or "sub"
    if full:
        values["use_external_id"] = bool(values.get("use_external_id"))
        values["target_token"] = values.get("target_token") or "ACCESS"
    cert = values["cert_pem"] if "cert_pem" in values else (existing or {}).get("cert_pem")
    jwks = values["jwks_endpoint"] if "jwks_endpoint" in values else (existing or {}).get("jwks_endpoint")
    if cert is None and jwks is None:
        raise bad_request("certPem", "jwksEndpoint or certPem is required", None)
    if cert is not None and jwks is not None:
        raise bad_request("jwksEndpoint", "only one of jwksEndpoint or certPem may be defined", jwks)
    if "cert_pem" in values or full:
        values.update(_cert_columns(cert))
    _enroll_defaults(values, full)
    _check_enroll_policy(ctx, values, existing)


def _cert_columns(cert_pem: str | None) -> dict:
    if cert_pem is None:
        return {"fingerprint": None, "common_name": "", "not_before": None, "not_after": None}
    try:
        certs = pki.load_certs(cert_pem)
    except Exception:
        certs = []
    if len(certs) != 1:
        raise ApiError("INVALID_CERT_PEM")
    info = pki.cert_info(certs[0])
    return {"fingerprint": info["fingerprint"], "common_name": info["cn"] or "",
            "not_before": clock.fmt(info["not_before"]), "not_after": clock.fmt(info["not_after"])}


def render_signer(ctx: Ctx, row: dict, out: dict) -> None:
    out["notBefore"] = row["not_before"] or ZERO_TIME
    out["notAfter"] = row["not_after"] or ZERO_TIME
    for key in ("enrollToCertEnabled", "enrollToTokenEnabled", "enrollAttributeClaimsSelector",
                "enrollNameClaimsSelector", "enrollAuthPolicyId"):
        if not out.get(key):
            out.pop(key, None)  # upstream's omitempty: false and "" are left out
    # unset audience, clientId, externalAuthUrl, fingerprint, kid and scopes are null, as
    # upstream answers them (its spec marks them required; its clients read null)


def before_delete_signer(ctx: Ctx, row: dict) -> None:
    ids = ctx.store.column(
        "SELECT id FROM auth_policies p WHERE EXISTS (SELECT 1 FROM json_each(p.primary_, '$.extJwt.allowedSigners')"
        " WHERE value = ?1) OR json_extract(p.secondary, '$.requireExtJwtSigner') = ?1 ORDER BY id", (row["id"],))
    if ids:
        raise ReferencedEntity("primary.extJwt.allowedSigners", "externalJwtSigner", "authPolicy", ids)


EXT_JWT_SIGNERS = Resource(
    name="external-jwt-signers", entity="externalJwtSigner", table="external_jwt_signers",
    permission="external-jwt-signer",
    fields=(
        NAME,
        Field("certPem", nullable=True),
        Field("jwksEndpoint", nullable=True),
        Field("kid", nullable=True),       # "" kept: upstream stores what was sent
        Field("issuer"),
        Field("audience", nullable=True, empty_null=True),
        Field("enabled", "bool"),
        Field("claimsProperty"),
        Field("useExternalId", "bool"),
        Field("externalAuthUrl", nullable=True, empty_null=True),
        Field("clientId", nullable=True),  # "" kept, as kid
        # a set as upstream keeps it (a bucket's keys): sorted, no duplicates, as v1.3.3 and v2.0.3 answer
        Field("scopes", "set", nullable=True),
        Field("targetToken"),  # OpenZiti 2.0's field: the v2 CLI's signer list reads it unguarded
        Field("fingerprint", nullable=True, empty_null=True),
        Field("commonName"),
        Field("notBefore", "datetime", nullable=True),
        Field("notAfter", "datetime", nullable=True),
        Field("enrollToCertEnabled", "bool"),
        Field("enrollToTokenEnabled", "bool"),
        Field("enrollNameClaimsSelector"),
        Field("enrollAttributeClaimsSelector"),
        Field("enrollAuthPolicyId"),
    ),
    create=ExternalJwtSignerCreate,
    filters=("name", "fingerprint", "kid", "issuer", "certPem", "commonName", "notAfter", "notBefore", "enabled",
             "claimsProperty", "useExternalId", "audience", "clientId", "scopes", "targetToken",
             "enrollToCertEnabled", "enrollToTokenEnabled", "enrollAttributeClaimsSelector",
             "enrollNameClaimsSelector", "enrollAuthPolicyId"),
    # upstream's scopes symbol is a plain string one (set functions on it are refused)
    extra_symbols={"scopes": Symbol("string", "t.scopes")},
    prepare=prepare_signer, render=render_signer, before_delete=before_delete_signer,
)


@op("GET", "/external-jwt-signers", apis=("client",), auth="public", op_id="listExternalJwtSigners",
    tag="external-jwt-signers", query=("limit", "offset", "filter"))
async def list_client_signers(ctx: Ctx):
    """The client API's view: enabled signers only, just what a login UI needs."""
    return crud.list_response(ctx, EXT_JWT_SIGNERS, "t.enabled = 1", render_row=_client_signer)


def _client_signer(ctx: Ctx, r: dict) -> dict:
    item = env.base(r, "external-jwt-signers")
    item.update(name=r["name"], externalAuthUrl=r["external_auth_url"],
                scopes=crud.Raw(r["scopes"]) if r["scopes"] else None)
    if r["client_id"] is not None:
        item["clientId"] = r["client_id"]
    if r["audience"] is not None:
        item["audience"] = r["audience"]
    if r["enroll_to_cert_enabled"]:   # upstream's omitempty: a false flag is left out
        item["enrollToCertEnabled"] = True
    if r["enroll_to_token_enabled"]:
        item["enrollToTokenEnabled"] = True
    item["targetToken"] = r["target_token"] or "ACCESS"
    return item


# ================================================================ identity sub-lists
@op("GET", "/identities/{id}/authenticators", op_id="getIdentityAuthenticators", tag="identities",
    query=("limit", "offset", "filter"), perm=("authenticator", "read"))
async def identity_authenticators(ctx: Ctx):
    return crud.child_list(ctx, IDENTITIES, AUTHENTICATORS, "identity_id")


# ================================================================ controllers
# the APIs a client learns of from /controllers (upstream's client API keeps these two)
CLIENT_API_ADDRESSES = ("edge-client", "edge-oidc")


def render_controller(ctx: Ctx, row: dict, out: dict) -> None:
    """Upstream's two views of a controller: the management API shows every API address and the
    control-channel address ("" while ziti-lite runs without one: upstream always has it), the
    client API its own and the OIDC provider's, and no control-channel address."""
    if ctx.api == "management":
        out["ctrlAddress"] = row["ctrl_address"] or ""
    else:
        out.pop("ctrlAddress", None)
        addresses = msgspec.json.decode(row["api_addresses"] or "{}")
        out["apiAddresses"] = {k: v for k, v in addresses.items() if k in CLIENT_API_ADDRESSES}


# ziti-lite itself is the one row (written at every start: ``bootstrap._list_self``)
CONTROLLERS = Resource(
    name="controllers", entity="controller",
    fields=(
        NAME,
        Field("ctrlAddress", nullable=True),
        Field("certPem"),
        Field("fingerprint"),
        Field("isOnline", "bool"),
        Field("lastJoinedAt", "datetime"),
        Field("apiAddresses", "map"),
    ),
    # OpenZiti 2.0: the management list needs admin_readonly (the entity, "controller", is none
    # an identity can hold); the client list is for any session (v1.3.3: any session on both)
    ops=("list",), apis=("management", "client"), client_auth={"list": "session"}, permission="controller",
    filters=("name", "ctrlAddress", "certPem", "fingerprint", "isOnline", "lastJoinedAt", "isPreferredLeader"),
    # a filter may name it; no item has it (upstream leaves false out; ziti-lite is no raft member)
    extra_symbols={"isPreferredLeader": Symbol("bool", "(0 = 1)")},
    render=render_controller,
)

RESOURCES = (AUTH_POLICIES, EXT_JWT_SIGNERS, CONTROLLERS)
