"""Third-party CAs (CRUD only) and enrollments (list, detail, create, refresh, delete).

CA verification, the CA JWT and the enroll flows live elsewhere and build on the ``cas`` and
``enrollments`` rows kept here.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Literal

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api import render as rendering
from ..api.ops import op
from ..api.resource import Field, Ref, Resource, Row, derive_patch
from ..auth.certs import server_keypair
from ..auth.enrollments import new_enrollment
from ..db.filters import Symbol
from ..errors import ApiError, CouldNotValidate, NotFound, field_cause
from ..ids import new_id, new_token
from ..pki import ca as pki
from ..pki import claims, tokens
from .auth import bad_request, blank, load_json, merge_leaves
from .common import NAME, Body, Tags, check_name, exists, non_admin_caller, refuse_for_admin
from .identities import IDENTITIES

if TYPE_CHECKING:
    from ..api.context import Ctx

# ================================================================ CAs
Location = Literal["COMMON_NAME", "SAN_URI", "SAN_EMAIL"]
Matcher = Literal["ALL", "PREFIX", "SUFFIX", "SCHEME"]
Parser = Literal["NONE", "SPLIT"]
DEFAULT_NAME_FORMAT = "[caName]-[commonName]"
CLAIM_DEFAULTS = {"index": 0, "location": "", "matcher": "", "matcherCriteria": "", "parser": "", "parserCriteria": ""}


class ExternalIdClaim(Body):
    index: int | None = None
    location: Location | None = None
    matcher: Matcher | None = None
    matcher_criteria: str | None = None
    parser: Parser | None = None
    parser_criteria: str | None = None


class CaCreate(Body):
    name: str
    cert_pem: str
    is_auto_ca_enrollment_enabled: bool
    is_ott_ca_enrollment_enabled: bool
    is_auth_enabled: bool
    identity_roles: list[str] | None
    identity_name_format: str | None = None
    external_id_claim: ExternalIdClaim | None = None
    tags: Tags | None = None


class CaUpdate(Body):
    name: str
    is_auto_ca_enrollment_enabled: bool
    is_ott_ca_enrollment_enabled: bool
    is_auth_enabled: bool
    identity_roles: list[str] | None
    identity_name_format: str
    external_id_claim: ExternalIdClaim | None = None
    tags: Tags | None = None


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


def prepare_ca(ctx: Ctx, values: dict, existing: dict | None) -> None:
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
        values["identity_name_format"] = blank(values.get("identity_name_format")) or DEFAULT_NAME_FORMAT
    if "external_id_claim" in values:
        claim = values["external_id_claim"]
        if claim is not None:
            base = (load_json(existing["external_id_claim"]) or {}) if patch and existing is not None else {}
            sent = claim
            claim = merge_leaves(merge_leaves(CLAIM_DEFAULTS, base), claim)
            # OpenZiti 2.0 checks the claim it will store (a patch's only when it sets a leaf: older
            # CLIs send an empty one with every update); v1.3.3 refused only SCHEME off SAN_URI
            wrong = claims.problem(claim) if not patch or any(v is not None for v in sent.values()) else None
            if wrong:
                raise bad_request(*wrong)
        values["external_id_claim"] = claim


def _ca_cert(store, pem: str) -> dict:
    try:
        certs = pki.load_certs(pem)
    except Exception as e:
        raise CouldNotValidate("certPem", f"could not parse the certificate PEM: {e}", pem) from None
    if not certs:
        raise CouldNotValidate("certPem", "at least one leaf certificate must be supplied", pem)
    if not pki.is_ca(certs[0]):
        raise ApiError("CERTIFICATE_IS_NOT_CA")
    fp = pki.fingerprint(certs[0])
    other = store.value("SELECT id FROM cas WHERE fingerprint = ?", (fp,))
    if other:
        raise CouldNotValidate("certPem", f"certificate already used as CA {other}", pem)
    return {"fingerprint": fp, "cert_pem": pem}


def ca_state_links(id: str, row: dict) -> dict:
    """A CA's links that depend on its state, in its detail and in every reference to it (an
    ottca enrollment's ``ca``), as upstream's link factory gives them."""
    out = {}
    if not row["is_verified"]:
        out["verify"] = {"href": f"./cas/{id}/verify"}
    if row["is_auto_ca_enrollment_enabled"]:
        out["jwt"] = {"href": f"./cas/{id}/jwt"}
    return out


env.STATE_LINKS["cas"] = (("is_verified", "is_auto_ca_enrollment_enabled"), ca_state_links)


def render_ca(ctx: Ctx, row: dict, out: dict) -> None:
    for name, link in ca_state_links(row["id"], row).items():
        rendering.add_link(out, name, link["href"])
    claim = load_json(row["external_id_claim"]) if row["external_id_claim"] else None
    if claim:
        out["externalIdClaim"] = merge_leaves(CLAIM_DEFAULTS, claim)
    else:
        out.pop("externalIdClaim", None)


def before_delete_ca(ctx: Ctx, row: dict) -> None:
    store, id = ctx.store, row["id"]
    store.execute("DELETE FROM enrollments WHERE ca_id = ? AND method = 'ottca'", (id,))
    store.execute("DELETE FROM api_sessions WHERE authenticator_id IN"
                  " (SELECT id FROM authenticators WHERE ca_id = ? AND method = 'cert')", (id,))
    store.execute("DELETE FROM authenticators WHERE ca_id = ? AND method = 'cert'", (id,))


CAS = Resource(
    name="cas", entity="ca", permission="ca",
    fields=(
        NAME,
        Field("certPem"),
        Field("fingerprint"),
        Field("isVerified", "bool"),
        Field("verificationToken"),
        Field("isAutoCaEnrollmentEnabled", "bool"),
        Field("isOttCaEnrollmentEnabled", "bool"),
        Field("isAuthEnabled", "bool"),
        Field("identityRoles", "set"),
        Field("identityNameFormat"),
        Field("externalIdClaim", "json", nullable=True),
    ),
    create=CaCreate, update=CaUpdate, patch=derive_patch(CaUpdate, default=None),
    filters=("name", "fingerprint", "isVerified", "verificationToken", "isAutoCaEnrollmentEnabled",
             "isOttCaEnrollmentEnabled", "isAuthEnabled"),
    prepare=prepare_ca, render=render_ca, before_delete=before_delete_ca,
)


# ================================================================ enrollments
def render_enrollment(ctx: Ctx, row: dict, out: dict) -> None:
    for k in [k for k, v in out.items() if v is None or v == ""]:
        del out[k]  # omitempty upstream: an enrollment shows only what its method uses


# upstream v2.0.3's words for every refusal of an admin identity's enrollment to a non-admin
NOT_FOR_ADMINS = "non-admins may not manage enrollments for admin identities"


def guard_admin_enrollment(ctx: Ctx, row: Row) -> None:
    """An enrollment carries the token that enrolls as its identity: a caller that is no admin
    may not read or delete an admin identity's (401, as upstream v2.0.3)."""
    refuse_for_admin(ctx, row["identity_id"], NOT_FOR_ADMINS)


ENROLLMENTS = Resource(
    name="enrollments", entity="enrollment", permission="enrollment",
    fields=(
        Field("method"),
        Field("token"),
        Field("expiresAt", "datetime"),
        Field("jwt"),
        Field("identityId"),
        Field("edgeRouterId"),
        Field("transitRouterId"),
        Field("caId", column="ca_id"),
        Field("username", output=False),  # kept for completion; upstream's detail does not show it
    ),
    ops=("list", "detail", "delete"),
    refs=(Ref("identity", "identity_id", "identities"), Ref("edgeRouter", "edge_router_id", "edge-routers", "routers"),
          Ref("transitRouter", "transit_router_id", "transit-routers", "routers"), Ref("ca", "ca_id", "cas")),
    filters=("token", "identity", "edgeRouter", "transitRouter", "caId"),
    extra_symbols={"identity": Symbol("string", "t.identity_id"),
                   "edgeRouter": Symbol("string", "t.edge_router_id"),
                   "transitRouter": Symbol("string", "t.transit_router_id")},
    render=render_enrollment, before_read=guard_admin_enrollment, before_delete=guard_admin_enrollment,
)


@crud.list_condition(ENROLLMENTS)
def _no_admin_enrollments(ctx: Ctx) -> tuple[str, list] | None:
    """``/enrollments`` lists no admin identity's enrollment to a caller that is no admin (as
    upstream v2.0.3 adds ``not (identity.isAdmin = true)``); router enrollments stay listed."""
    if not non_admin_caller(ctx):
        return None
    return ("t.identity_id IS NULL OR t.identity_id NOT IN"
            " (SELECT id FROM identities WHERE is_admin OR is_default_admin)", [])


class EnrollmentCreate(Body):
    method: Literal["ott", "ottca", "updb"]
    expires_at: dt.datetime
    identity_id: str
    ca_id: str | None = None
    username: str | None = None


class EnrollmentRefresh(Body):
    expires_at: dt.datetime


def _utc(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


@op("POST", "/enrollments", op_id="createEnrollment", body=EnrollmentCreate, status=201, tag="enrollments",
    perm=("enrollment", "create"))
async def create_enrollment(ctx: Ctx):
    body = await ctx.json(EnrollmentCreate)
    expires = _utc(body.expires_at)
    store = ctx.store
    with store.write():
        if not exists(store, "identities", body.identity_id):
            raise bad_request("identityId", "identity not found", body.identity_id)
        # an enrollment is a new credential of its identity: an admin's is for admins to make
        refuse_for_admin(ctx, body.identity_id, NOT_FOR_ADMINS)
        if expires <= clock.now():
            # the value as upstream's %v of the time writes it
            raise bad_request("expiresAt", "expiresAt must be in the future", clock.go_string(expires))
        if body.method == "ottca" and (body.ca_id is None or not exists(store, "cas", body.ca_id)):
            raise bad_request("caId", "ca not found", body.ca_id)
        if body.method == "updb" and not body.username:
            raise bad_request("username", "username not provided", body.username)
        if store.value("SELECT 1 FROM enrollments WHERE identity_id = ? AND method = ?",
                       (body.identity_id, body.method)):
            raise ApiError("ENROLLMENT_EXISTS",
                           cause=field_cause("method", "enrollment of same method exists", body.method))
        id = new_enrollment(ctx, body.method, identity_id=body.identity_id, expires_at=expires,
                            ca_id=body.ca_id if body.method == "ottca" else None,
                            username=body.username if body.method == "updb" else None)
        crud.changed(ctx, ENROLLMENTS, id, None, {"method": body.method})   # entityChange, audit row
    return env.created(id, f"./enrollments/{id}")


@op("POST", "/enrollments/{id}/refresh", op_id="refreshEnrollment", body=EnrollmentRefresh, tag="enrollments",
    perm=("enrollment", "update"))
async def refresh_enrollment(ctx: Ctx):
    id = ctx.params["id"]
    body = await ctx.json(EnrollmentRefresh)  # the body is validated before the id is looked up, as upstream
    expires = _utc(body.expires_at)
    if expires <= clock.now():
        raise CouldNotValidate("expiresAt", "must be after the current date and time", clock.fmt(expires))
    with ctx.store.write():
        row = ctx.store.one("SELECT * FROM enrollments WHERE id = ?", (id,))
        if row is None:
            raise NotFound()  # upstream's refresh answers 404 without a cause
        refuse_for_admin(ctx, row["identity_id"], NOT_FOR_ADMINS)
        token = new_token()  # a new token first, then the JWT that carries it
        subject = row["identity_id"] or row["edge_router_id"] or row["transit_router_id"]
        jwt = tokens.enrollment_jwt(server=server_keypair(ctx.ctl), issuer=ctx.ctl.settings.base_url,
                                    subject=subject, token=token, method=row["method"], expires_at=expires)
        ctx.store.execute("UPDATE enrollments SET token = ?, jwt = ?, expires_at = ?, updated_at = ? WHERE id = ?",
                          (token, jwt, clock.fmt(expires), clock.stamp(), id))
        crud.changed(ctx, ENROLLMENTS, id, row, {"token": token, "jwt": jwt, "expires_at": clock.fmt(expires)})
    return env.empty()


@op("GET", "/identities/{id}/enrollments", op_id="getIdentityEnrollments", tag="identities",
    query=("limit", "offset", "filter"), perm=("enrollment", "read"))
async def identity_enrollments(ctx: Ctx):
    id = ctx.params["id"]
    parent = crud.get_row(ctx.store, IDENTITIES, id)
    if (parent["is_admin"] or parent["is_default_admin"]) and non_admin_caller(ctx):
        # an admin's enrollments stay out of a non-admin's lists here too, as /enrollments keeps
        # them (beyond upstream v2.0.3, which lists them here with their tokens)
        return crud.list_response(ctx, ENROLLMENTS, "0", [])
    return crud.list_response(ctx, ENROLLMENTS, "t.identity_id = ?", [id])


RESOURCES = (CAS, ENROLLMENTS)


@crud.listen(IDENTITIES)
def _identity_enrollment(ctx: Ctx, id: str, before: Row | None, values: Row | None) -> None:
    """The enrollment an identity create made (its ``enrollment`` object, written by the
    identity's after-write hook just before) is an entity change of its own, as upstream's
    store reports it: an entityChange ``created`` of type ``enrollments`` in the same
    transaction (the request's audit row stays the identity's)."""
    if before is not None or not values or not values.get("enrollment"):
        return
    for row in ctx.store.all("SELECT id, method FROM enrollments WHERE identity_id = ?", (id,)):
        crud.changed(ctx, ENROLLMENTS, row["id"], None, {"method": row["method"]})

# an identity's enrollments go with it (and report their own deletion)
crud.cascades(IDENTITIES, ENROLLMENTS, "identity_id", rank=2)
