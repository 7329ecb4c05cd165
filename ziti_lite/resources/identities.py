"""Identities, identity types, authenticators and API sessions."""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from .. import clock, permissions
from ..api import crud
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import op
from ..api.resource import Field, Ref, Render, Resource, Row
from ..auth import passwords, sessions
from ..auth.certs import prepare_cert_authenticator  # certificate checks live with the PKI
from ..auth.enrollments import create_for_identity  # the enrollment module owns JWTs and tokens
from ..db.filters import Symbol
from ..errors import ApiError, CouldNotValidate, NotFound, Unauthorized, generic_cause
from ..routing import presence
from .common import (
    NAME,
    ROLE_ATTRIBUTES,
    Attributes,
    Body,
    Cost,
    Tags,
    check_attributes,
    check_name,
    exists,
    name_of,
    non_admin_caller,
    refuse_for_admin,
)

IdentityTypeName = Literal["User", "Device", "Service", "Router", "Default"]
Username = Annotated[str, Meta(min_length=4, max_length=100)]
Password = Annotated[str, Meta(min_length=5, max_length=100)]
# OpenZiti 2.0's permission names; checked in prepare_identity (upstream's error), listed in the spec
Permission = Annotated[str, Meta(extra_json_schema={"enum": list(permissions.ALLOWED)})]


class IdentityEnrollment(Body):
    ott: bool | None = None
    ottca: str | None = None
    updb: str | None = None


class IdentityUpdate(Body):
    name: str
    type: IdentityTypeName
    is_admin: bool
    role_attributes: Attributes | None = None
    auth_policy_id: str | None = None
    external_id: str | None = None
    app_data: Tags | None = None
    default_hosting_cost: Cost = 0
    default_hosting_precedence: str = "default"
    service_hosting_costs: dict[str, Cost] | None = None
    service_hosting_precedences: dict[str, str] | None = None
    tags: Tags | None = None
    permissions: list[Permission] | None = None


class IdentityCreate(IdentityUpdate):
    enrollment: IdentityEnrollment | None = None


PRECEDENCES = ("default", "required", "failed")


def _disabled(row: dict) -> bool:
    return bool(row.get("disabled_at")) and (not row.get("disabled_until") or row["disabled_until"] > clock.stamp())




def _identity_type(ctx: Ctx, values: dict, existing: dict | None) -> None:
    """The stored type and a router identity's name, as upstream's writes keep them.

    A create is of type Default whatever the body names (routers' identities are made with their
    routers); a PATCH never writes the type (upstream's field checker names it otherwise); a PUT
    may not make an identity a Router one nor change a Router one's type; nothing renames a
    router's identity (its router's name is the source).
    """
    t = values.pop("type", None)
    if existing is None:
        if t is not None:
            values["type_id"] = "Default"
        return
    router = existing["type_id"] == "Router"
    if router and "name" in values and values["name"] != existing["name"]:
        raise CouldNotValidate("name", "may not change name of router identities", values["name"])
    if t is None or ctx.route.method == "PATCH":
        return
    new = "Router" if t == "Router" else "Default"
    if router and new != "Router":
        raise CouldNotValidate("typeId", "may not change type of router identities", new)
    if not router and new == "Router":
        raise CouldNotValidate("typeId", "may not change type to router", new)
    values["type_id"] = new


def prepare_identity(ctx: Ctx, values: dict, existing: dict | None) -> None:
    store = ctx.store
    check_name(values)
    check_attributes(values)
    _identity_type(ctx, values, existing)
    if "auth_policy_id" in values or existing is None:
        ap = values.get("auth_policy_id") or "default"
        if not exists(store, "auth_policies", ap):
            raise NotFound("authPolicy", ap)
        values["auth_policy_id"] = ap
    if "external_id" in values or existing is None:
        ext = values.get("external_id")
        values["external_id"] = ext.strip() if ext and ext.strip() else None
    for key in ("service_hosting_costs", "service_hosting_precedences"):
        m = values.get(key)
        if m is None:
            if key in values or existing is None:
                values[key] = {}
            continue
        for sid in m:
            if not exists(store, "services", sid):
                raise NotFound("service", sid)
        if key == "service_hosting_precedences":
            values[key] = {k: (v if v in PRECEDENCES else "default") for k, v in m.items()}
    p = values.get("default_hosting_precedence")
    if p is not None and p not in PRECEDENCES:  # refused, as upstream's body validation does
        raise CouldNotValidate("defaultHostingPrecedence",
                               "defaultHostingPrecedence in body should be one of [default required failed]", p)
    for key in ("app_data", "role_attributes", "tags"):
        if key in values and values[key] is None:
            values[key] = [] if key == "role_attributes" else {}
    check_permissions(ctx, values, existing)
    # ``enrollment`` (no column) stays in the values, for after_identity of the same write


def check_permissions(ctx: Ctx, values: dict, existing: dict | None) -> None:
    """``permissions``: known names only (upstream's body validation: the first unknown one named
    with its index, every allowed name listed), and the admin protection rules: a caller that is
    not an admin may not create an admin or an identity with permissions, change ``isAdmin`` or
    ``permissions``, or change an admin identity (401, as upstream)."""
    perms = values.get("permissions")
    if perms is None:
        if "permissions" in values or existing is None:
            values["permissions"] = perms = []
    else:
        bad = permissions.unknown(perms)
        if bad is not None:
            field = f"permissions.{bad[0]}"
            raise CouldNotValidate(field, f"{field} in body should be one of [{' '.join(permissions.ALLOWED)}]",
                                   bad[1])
    session = ctx.session
    if session is None or session.is_admin or ctx.api != "management":
        return   # in-process writes (bootstrap, enrollment, import as the default admin) and admins
    if existing is None:
        if perms:
            raise not_for_non_admins("non-admins may not create users with permissions")
        if values.get("is_admin"):
            raise not_for_non_admins("non-admins may not create admin users")
        return
    if existing["is_admin"] or existing["is_default_admin"]:
        raise not_for_non_admins("non-admins may not modify admin identities")
    if ctx.request.method == "PUT":
        raise not_for_non_admins("non-admins may not use the PUT method, use PATCH instead")
    for column, name in (("permissions", "permissions"), ("is_admin", "isAdmin")):
        if column in values:   # sent at all, whatever its value (upstream: the field is in the PATCH)
            raise not_for_non_admins(f"non-admins may not modify the identity field '{name}'")


def not_for_non_admins(reason: str) -> ApiError:
    """Upstream's refusal of what only an admin may do to identities: 401 UNAUTHORIZED with the reason."""
    return Unauthorized(reason)


def after_identity(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    enrollment = values.get("enrollment") if values is not None else None
    if before is None and enrollment:
        create_for_identity(ctx, id, enrollment)


# everything the identity detail needs beyond its own row, in one statement: one round trip
# through apsw instead of five or six per identity, and for a list page one for all its rows
# (see ``prefetch_identities``). Correlated through ``t.id`` these subqueries cost ~3.5 µs per
# identity; the same ones on bare parameters cost ~13 µs.
_EXTRA_COLUMNS = (
    "t.id, (SELECT name FROM auth_policies WHERE id = t.auth_policy_id),"
    " (SELECT json_group_object(method, CASE WHEN method = 'updb' THEN json_object('id', id, 'username', username)"
    "  ELSE json_object('id', id, 'fingerprint', fingerprint) END) FROM authenticators WHERE identity_id = t.id),"
    " (SELECT json_group_array(json_array(id, method, token, jwt, expires_at, ca_id, username) ORDER BY created_at)"
    "  FROM enrollments WHERE identity_id = t.id),"
    " EXISTS (SELECT 1 FROM api_sessions WHERE identity_id = t.id),"
    " EXISTS (SELECT 1 FROM mfa WHERE identity_id = t.id AND is_verified = 1)"
)
_EXTRAS_ONE = f"SELECT {_EXTRA_COLUMNS} FROM identities t WHERE t.id = ?"
_EXTRAS_MANY = f"SELECT {_EXTRA_COLUMNS} FROM identities t WHERE t.id IN (SELECT value FROM json_each(?))"
_decode_list = msgspec.json.Decoder(list).decode
_encode = msgspec.json.Encoder().encode


def prefetch_identities(ctx: Ctx, rows: list[Row]) -> Render:
    """Before a list page is rendered: the related rows of all its identities in one query,
    which the page's rows are rendered from."""
    page = {r[0]: r for r in ctx.store.conn.execute(_EXTRAS_MANY, (_encode([r["id"] for r in rows]).decode(),))}
    return functools.partial(render_identity, page=page)


# (collection, id, name) -> the reference as encoded JSON: a list page renders the same few
# identity types and auth policies on every row; built once they cost the encoder a copy
_REFS: dict[tuple[str, str, str | None], msgspec.Raw] = {}


def _ref(collection: str, id: str | None, name: str | None) -> msgspec.Raw | None:
    if id is None:
        return None
    key = (collection, id, name)
    ref = _REFS.get(key)
    if ref is None:
        if len(_REFS) >= 1024:   # many auth policies renamed while serving: stay bounded
            _REFS.clear()
        ref = _REFS[key] = msgspec.Raw(_encode(env.entity_ref(collection, collection, id, name)))
    return ref


def render_identity(ctx: Ctx, row: Row, out: dict, page: dict[str, Any] | None = None) -> None:
    """The identities' render hook; ``page``: what the list's prefetcher read for its rows."""
    store = ctx.store
    id = row["id"]
    extras = page.get(id) if page else None
    if extras is None:
        extras = store.conn.execute(_EXTRAS_ONE, (id,)).fetchone()
        if extras is None:  # a row that is no longer stored (rendered from a listener's `before`)
            extras = (id, name_of(store, "auth_policies", row["auth_policy_id"]), "{}", "[]", 0, 0)
    _, policy_name, authenticators, enrollment_rows, has_session, has_mfa = extras
    out["type"] = _ref("identity-types", row["type_id"], row["type_id"])
    out["authPolicy"] = _ref("auth-policies", row["auth_policy_id"], policy_name)
    # {method: {id, username | fingerprint}}, built as JSON by SQLite (one per method, as upstream)
    out["authenticators"] = crud.Raw(authenticators)
    if enrollment_rows == "[]" or ((row["is_admin"] or row["is_default_admin"]) and non_admin_caller(ctx)):
        # an admin's pending enrollments (their tokens enroll as the admin) are for admins to see,
        # as /enrollments keeps them (beyond upstream v2.0.3, which shows them here)
        out["enrollment"] = {}
    else:
        out["enrollment"] = _enrollments(store, _decode_list(enrollment_rows))
    out["disabled"] = _disabled(row)
    if row.get("disabled_at") is None:
        out.pop("disabledAt", None)
    if row.get("disabled_until") is None:
        out.pop("disabledUntil", None)
    out["hasApiSession"] = bool(has_session)
    out["isMfaEnabled"] = bool(has_mfa)
    connected = presence.has_connection(ctx.ctl, row["id"])   # the embedded router, real routers
    out["hasEdgeRouterConnection"] = connected
    out["edgeRouterConnectionStatus"] = "online" if connected else "offline"


def _enrollments(store, rows) -> dict:
    out = {}
    for e_id, method, token, jwt, expires_at, ca_id, username in rows:
        item = {"id": e_id, "jwt": jwt, "token": token, "expiresAt": expires_at}
        if method == "ottca":
            item["caId"] = ca_id
            ca = store.one("SELECT name, is_verified, is_auto_ca_enrollment_enabled FROM cas WHERE id = ?", (ca_id,))
            item["ca"] = env.entity_ref("cas", "cas", ca_id, ca["name"] if ca else None, ca)
        out[method] = item
    return out


def before_delete_identity(ctx: Ctx, row: dict) -> None:
    session = ctx.session
    if (session is not None and not session.is_admin and ctx.api == "management"
            and (row["is_admin"] or row["is_default_admin"])):
        raise not_for_non_admins("non-admin may not delete admin identities")
    if row["is_default_admin"]:
        raise ApiError("ENTITY_CAN_NOT_BE_DELETED")  # without a cause, as upstream
    if row["type_id"] == "Router" and exists(ctx.store, "routers", row["id"]):
        raise ApiError(
            "ENTITY_CAN_NOT_BE_DELETED",
            cause=generic_cause("cannot delete a router's identity while the router exists"),
        )


IDENTITY_TYPES = Resource(
    name="identity-types",
    auth={"list": "session", "detail": "session"},   # any complete session, as upstream
    entity="identityType",
    table="identity_types",
    fields=(NAME,),
    ops=("list", "detail"),
    filters=("name",),
)

IDENTITIES = Resource(
    name="identities",
    permission="identity",
    entity="identity",
    fields=(
        NAME,
        Field("typeId", column="type_id"),
        Field("isAdmin", "bool"),
        Field("isDefaultAdmin", "bool"),
        ROLE_ATTRIBUTES,
        Field("authPolicyId"),
        Field("externalId", nullable=True),
        Field("appData", "map"),
        Field("defaultHostingCost", "int"),
        Field("defaultHostingPrecedence"),
        Field("serviceHostingCosts", "map"),
        Field("serviceHostingPrecedences", "map"),
        Field("disabledAt", "datetime", nullable=True),
        Field("disabledUntil", "datetime", nullable=True),
        Field("envInfo", "json"),
        Field("sdkInfo", "json"),
        Field("permissions", "set"),   # stored sorted, without duplicates (upstream v2.0.3)
        # the interfaces its tunneler-enabled edge router reported (ctrl/), null when none (v2.0.3)
        Field("interfaces", "json", empty_null=True),
    ),
    create=IdentityCreate,
    update=IdentityUpdate,
    links=(
        "edge-router-policies",
        "edge-routers",
        "service-policies",
        "services",
        "posture-data",
        "failed-service-requests",
        "authenticators",
        "enrollments",
        "service-configs",
    ),
    row_links=(("auth-policies", "auth_policy_id", "auth-policies"),),
    computed=(Field("type", "json"), Field("authPolicy", "json"), Field("authenticators", "json"),
              Field("enrollment", "json"), Field("disabled", "bool"), Field("isMfaEnabled", "bool"),
              Field("hasApiSession", "bool"), Field("hasEdgeRouterConnection", "bool"),
              Field("edgeRouterConnectionStatus")),
    filters=("roleAttributes", "name", "externalId", "type", "authPolicyId", "isAdmin", "isDefaultAdmin"),
    extra_symbols={"type": Symbol("string", "t.type_id")},
    prepare=prepare_identity,
    render=render_identity,
    before_delete=before_delete_identity,
    after_write=after_identity,
)
crud.prefetch(IDENTITIES)(prefetch_identities)


# ---------------------------------------------------------------- disable / enable
class DisableBody(Body):
    duration_minutes: Annotated[int, Meta(le=10_000_000)]


@op("POST", "/identities/{id}/disable", op_id="disableIdentity", body=DisableBody, tag="identities",
    perm=("identity", "update"))
async def disable_identity(ctx: Ctx):
    id = ctx.params["id"]
    crud.get_row(ctx.store, IDENTITIES, id)
    body = await ctx.json(DisableBody)
    refuse_for_admin(ctx, id, "non-admins may not disable admin identities")
    now = clock.now()
    until = clock.fmt(now + dt.timedelta(minutes=body.duration_minutes)) if body.duration_minutes > 0 else None
    with ctx.store.write():
        before = crud.get_row(ctx.store, IDENTITIES, id)
        ctx.store.execute(
            "UPDATE identities SET disabled_at = ?, disabled_until = ?, updated_at = ? WHERE id = ?",
            (clock.fmt(now), until, clock.fmt(now), id),
        )
        ctx.store.execute("DELETE FROM api_sessions WHERE identity_id = ?", (id,))
        crud.changed(ctx, IDENTITIES, id, before, {"disabled_at": clock.fmt(now), "disabled_until": until})
    return env.empty()


@op("POST", "/identities/{id}/enable", op_id="enableIdentity", tag="identities", perm=("identity", "update"))
async def enable_identity(ctx: Ctx):
    id = ctx.params["id"]
    with ctx.store.write():
        before = crud.get_row(ctx.store, IDENTITIES, id)   # 404 for an unknown identity
        ctx.store.execute(
            "UPDATE identities SET disabled_at = NULL, disabled_until = NULL, failed_logins = 0,"
            " updated_at = ? WHERE id = ?",
            (clock.stamp(), id),
        )
        crud.changed(ctx, IDENTITIES, id, before, {"disabled_at": None, "disabled_until": None})
    return env.empty()


# ---------------------------------------------------------------- authenticators
class AuthenticatorCreate(Body):
    method: str
    identity_id: str
    username: Username | None = None
    password: Password | None = None
    cert_pem: str | None = None
    tags: Tags | None = None


class AuthenticatorUpdate(Body):
    username: Username
    password: Password
    tags: Tags | None = None


def prepare_authenticator(ctx: Ctx, values: dict, existing: dict | None) -> None:
    store = ctx.store
    if existing is None:
        method = values["method"]
        if method not in ("updb", "cert"):
            raise CouldNotValidate("method", "method must be updb or cert", method)
        if not exists(store, "identities", values["identity_id"]):
            raise NotFound("identity", values["identity_id"])
        if store.value(
            "SELECT 1 FROM authenticators WHERE identity_id = ? AND method = ?", (values["identity_id"], method)
        ):
            raise ApiError("MAX_AUTHENTICATOR_METHODS_REACHED")
        if method == "updb":
            if not values.get("username"):
                raise CouldNotValidate("username", "username is required", None)
            if not values.get("password"):
                raise CouldNotValidate("password", "password is required", None)
            values.pop("cert_pem", None)  # a password authenticator has no certificate
        else:
            prepare_cert_authenticator(ctx, values)
            return
    elif existing["method"] != "updb" and ("username" in values or "password" in values):
        raise ApiError(
            "CAN_NOT_UPDATE_AUTHENTICATOR", message="only updb authenticators have a username and password"
        )
    password = values.pop("password", None)
    if password is not None:
        values["password_hash"], values["salt"] = passwords.hash_password(password)


_CERT_ONLY = ("certPem", "fingerprint", "isIssuedByNetwork", "isExtendRequested", "isKeyRollRequested",
              "extendRequestedAt", "lastAuthResolvedToRoot", "lastExtendRolledKeys")
# upstream's booleans of a certificate authenticator are left out when false (omitempty)
_CERT_FLAGS = ("isIssuedByNetwork", "isExtendRequested", "isKeyRollRequested", "lastAuthResolvedToRoot",
               "lastExtendRolledKeys")


def render_authenticator(ctx: Ctx, row: dict, out: dict) -> None:
    if row["method"] == "updb":
        for k in _CERT_ONLY:
            out.pop(k, None)
        return
    out.pop("username", None)
    for k in _CERT_FLAGS:
        if not out.get(k):
            out.pop(k, None)
    if out.get("extendRequestedAt") is None:
        out.pop("extendRequestedAt", None)


def before_delete_authenticator(ctx: Ctx, row: dict) -> None:
    ctx.store.execute("DELETE FROM api_sessions WHERE authenticator_id = ?", (row["id"],))


AUTHENTICATORS = Resource(
    name="authenticators",
    permission="authenticator",   # no identity can hold it: admins, and admin_readonly for reads
    entity="authenticator",
    fields=(
        Field("identityId", column="identity_id"),
        Field("method"),
        Field("username", nullable=True),
        Field("fingerprint", nullable=True),
        Field("certPem", nullable=True),
        Field("isIssuedByNetwork", "bool"),
        # extension on request (POST /authenticators/{id}/request-extend); false ones are left out
        Field("isExtendRequested", "bool"),
        Field("isKeyRollRequested", "bool"),
        Field("extendRequestedAt", "datetime", nullable=True),
        Field("lastAuthResolvedToRoot", "bool"),
        Field("lastExtendRolledKeys", "bool"),
        Field("passwordHash", column="password_hash", output=False),
        Field("salt", output=False),
        Field("caId", column="ca_id", output=False),
    ),
    refs=(Ref("identity", "identity_id", "identities"),),
    row_links=(("identities", "identity_id", "identities"),),
    # upstream lists its password hash and salt too: ziti-lite lets no filter probe a secret
    filters=("method", "certFingerprint", "certPem", "isIssuedByNetwork", "updbUsername", "identity"),
    extra_symbols={"certFingerprint": Symbol("string", "t.fingerprint"), "updbUsername": Symbol("string", "t.username"),
                   "identity": Symbol("string", "t.identity_id")},
    create=AuthenticatorCreate,
    update=AuthenticatorUpdate,
    prepare=prepare_authenticator,
    render=render_authenticator,
    before_delete=before_delete_authenticator,
)


# ---------------------------------------------------------------- API sessions (admin view)
def render_api_session(ctx: Ctx, row: dict, out: dict) -> None:
    out["cachedLastActivityAt"] = max(row["last_activity_at"], ctx.ctl.activity.get(row["token"], ""))
    out["authQueries"] = []
    out.update(sessions.cert_flags(ctx.store, row))


API_SESSIONS = Resource(
    name="api-sessions",
    permission="ops",
    entity="apiSession",
    table="api_sessions",
    fields=(
        Field("token"),
        Field("identityId", column="identity_id"),
        Field("authenticatorId", column="authenticator_id"),
        Field("ipAddress", column="ip_address"),
        Field("configTypes", "set", empty_null=False),  # upstream answers [] here
        Field("isMfaRequired", "bool"),
        Field("isMfaComplete", "bool"),
        Field("isCertExtendable", "bool"),
        Field("lastActivityAt", "datetime"),
    ),
    ops=("list", "detail", "delete"),
    links=("sessions",),
    filters=("token", "identity", "lastActivityAt", "authenticator", "ipAddress"),
    extra_symbols={"identity": Symbol("string", "t.identity_id"),
                   "authenticator": Symbol("string", "t.authenticator_id")},
    refs=(Ref("identity", "identity_id", "identities"),),
    computed=(Field("cachedLastActivityAt", "datetime"), Field("authQueries", "json"),
              Field("isCertExtendRequested", "bool"), Field("isCertKeyRollRequested", "bool"),
              Field("improperClientCertChain", "bool")),
    render=render_api_session,
)

RESOURCES = (IDENTITY_TYPES, IDENTITIES, AUTHENTICATORS, API_SESSIONS)


# ---------------------------------------------------------------- tracing (volatile, as upstream)
class TraceSpec(Body):
    enabled: bool = False
    duration: str | None = None
    trace_id: str | None = None
    channels: list[str] | None = None


_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string such as ``10m`` or ``1h30m``."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|h|m|s)", text or "")
    if not parts or "".join(n + u for n, u in parts) != text:
        raise CouldNotValidate("duration", "invalid duration", text)
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


@op("PUT", "/identities/{id}/trace", op_id="updateIdentityTracing", body=TraceSpec, tag="identities",
    perm=("identity", "update"))
async def update_identity_tracing(ctx: Ctx):
    id = ctx.params["id"]
    crud.get_row(ctx.store, IDENTITIES, id)
    spec = await ctx.json(TraceSpec)
    # an admin's too, as upstream v2.0.3: tracing changes no credential and locks nobody out
    traces = ctx.ctl.traces
    if not spec.enabled:
        traces.pop(id, None)
        return env.ok({"enabled": False, "traceId": spec.trace_id or "", "until": None})
    seconds = parse_go_duration(spec.duration) if spec.duration else 600.0
    until = clock.fmt(clock.now() + dt.timedelta(seconds=seconds))
    trace_id = spec.trace_id or str(uuid.uuid4())  # upstream generates one when none is given
    traces[id] = {"enabled": True, "traceId": trace_id, "until": until, "channels": spec.channels or []}
    return env.ok({"enabled": True, "traceId": trace_id, "until": until})

# an identity's authenticators go with it (and report their own deletion)
crud.cascades(IDENTITIES, AUTHENTICATORS, "identity_id", rank=1)
