"""Edge routers, routers (transit), transit routers and terminators.

Every router lives in the one ``routers`` table (one name namespace); ``/edge-routers`` is the
``is_edge = 1`` slice of it, ``/routers`` and ``/transit-routers`` (upstream's deprecated alias,
same handlers) show every row. Creating a router also creates its enrollment (``erott`` for edge
routers, ``trott`` for transit routers) whose JWT the detail shows until the router enrolls.

Other families react to router writes with ``crud.listen``: ``crud.listen(EDGE_ROUTERS)`` is
where the Router identity of a tunneler-enabled edge router is kept in step (values carry
``is_tunneler_enabled``). A router deleted through any of the three collections notifies the
listeners of ``ROUTERS`` and, for an edge router, those of ``EDGE_ROUTERS`` too.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

import msgspec

from ..api import crud
from ..api import envelope as env
from ..api.ops import op
from ..api.resource import Field, Ref, Resource
from ..auth.enrollments import new_enrollment
from ..db.filters import Symbol
from ..errors import ApiError, CouldNotValidate, NotFound
from ..routing import presence
from .common import (
    NAME,
    ROLE_ATTRIBUTES,
    Attributes,
    Body,
    Cost,
    Precedence,
    Tags,
    check_attributes,
    check_name,
    exists,
)
from .services import SERVICES

if TYPE_CHECKING:
    from ..api.context import Ctx

# a never-connected router: what upstream shows without a control channel
VERSION_INFO = {"version": "", "revision": "", "buildDate": "", "os": "", "arch": ""}


# ---------------------------------------------------------------- shared router behaviour
# OpenZiti 2.0's control-channel listeners of a router: address -> the channel groups it serves
CtrlChanListeners = dict[str, list[str]]


def _v2_fields(values: dict) -> None:
    """A write's OpenZiti 2.0 fields: ``configs`` is taken (a list of strings) and dropped, as
    upstream v2.0.3 does (unknown ids unchecked, nothing stored, the detail's ``configs`` null);
    ``ctrlChanListeners`` is stored as given (a PUT without it clears it, a PATCH of ``{}``
    too; a PATCH's null changes nothing, as any PATCH's null)."""
    values.pop("configs", None)


def render_v2_fields(row: dict, out: dict) -> None:
    """``ctrlChanListeners`` only when there are some (upstream leaves an empty map out)."""
    if row["ctrl_chan_listeners"] in (None, "{}", "null"):
        out.pop("ctrlChanListeners", None)


def _defaults(values: dict, defaults: dict) -> None:
    """Create/PUT: an absent (or null) optional field takes its zero value."""
    for key, default in defaults.items():
        if key in values and values[key] is None:
            values[key] = default() if callable(default) else default


def _enrollment_fields(store, column: str, router_id: str, out: dict) -> None:
    """The router's outstanding enrollment, rendered while the router is unverified."""
    e = store.one(f"SELECT token, jwt, expires_at, created_at FROM enrollments WHERE {column} = ?"
                  " ORDER BY created_at, id LIMIT 1", (router_id,))
    if e is not None:
        out["enrollmentToken"] = e["token"]
        out["enrollmentJwt"] = e["jwt"]
        out["enrollmentCreatedAt"] = e["created_at"]
        out["enrollmentExpiresAt"] = e["expires_at"]


def delete_terminators(ctx: Ctx, column: str, id: str) -> None:
    """Delete the terminators of one router or service, telling terminator listeners."""
    assert column in ("router_id", "service_id")
    for row in ctx.store.all(f"SELECT * FROM terminators WHERE {column} = ?", (id,)):
        ctx.store.execute("DELETE FROM terminators WHERE id = ?", (row["id"],))
        crud.changed(ctx, TERMINATORS, row["id"], row, None)


def before_delete_router(ctx: Ctx, row: dict) -> None:
    delete_terminators(ctx, "router_id", row["id"])
    ctx.store.execute("DELETE FROM enrollments WHERE edge_router_id = ? OR transit_router_id = ?",
                      (row["id"], row["id"]))


def _router_written(own: str):
    """after_write of one router collection: the enrollment of a new router, and on delete the
    listeners of the other collections that showed the row."""
    def hook(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
        if before is None and values is not None:
            if own == "edge-routers":
                new_enrollment(ctx, "erott", edge_router_id=id)
            else:
                new_enrollment(ctx, "trott", transit_router_id=id)
        elif values is None and before is not None:  # a delete
            targets = [ROUTERS] + ([EDGE_ROUTERS] if before["is_edge"] else [])
            for res in targets:
                if res.name != own:
                    for fn in crud.LISTENERS.get(res, ()):
                        fn(ctx, id, before, None)
    return hook


# ---------------------------------------------------------------- edge routers
class EdgeRouterCreate(Body):
    name: str
    is_tunneler_enabled: bool = False
    cost: Cost | None = None
    no_traversal: bool | None = None
    disabled: bool | None = None
    role_attributes: Attributes | None = None
    app_data: Tags | None = None
    tags: Tags | None = None
    ctrl_chan_listeners: CtrlChanListeners | None = None
    configs: list[str] | None = None


EDGE_DEFAULTS = {"cost": 0, "no_traversal": False, "disabled": False, "is_tunneler_enabled": False,
                 "role_attributes": list, "app_data": dict}


def prepare_edge_router(ctx: Ctx, values: dict, existing: dict | None) -> None:
    _v2_fields(values)
    check_name(values)
    check_attributes(values)
    _defaults(values, EDGE_DEFAULTS)


def render_edge_router(ctx: Ctx, row: dict, out: dict) -> None:
    live = presence.state(ctx.ctl, row["id"])   # the embedded router, or a real one, while it runs
    out["isOnline"] = bool(live.get("isOnline"))
    out["hostname"] = live.get("hostname", "")
    out["supportedProtocols"] = dict(live.get("supportedProtocols") or {})
    out["syncStatus"] = live.get("syncStatus", "SYNC_UNKNOWN")
    out["versionInfo"] = dict(live.get("versionInfo") or VERSION_INFO)
    render_v2_fields(row, out)
    if not row["fingerprint"]:
        out.pop("fingerprint", None)  # omitempty upstream
    if not row["is_verified"]:
        _enrollment_fields(ctx.store, "edge_router_id", row["id"], out)


# the outstanding enrollment of an unverified router (``_enrollment_fields``)
_ENROLLMENT_FIELDS = (Field("enrollmentToken"), Field("enrollmentJwt"), Field("enrollmentCreatedAt", "datetime"),
                      Field("enrollmentExpiresAt", "datetime"))
_ROUTER_FIELDS = (
    NAME,
    Field("fingerprint", nullable=True, empty_null=True),  # an unenrolled router's: null, as upstream
    Field("cost", "int"),
    Field("noTraversal", "bool"),
    Field("disabled", "bool"),
)
_CERT_FIELDS = (
    Field("unverifiedFingerprint", nullable=True),
    Field("unverifiedCertPem", nullable=True),
)
# OpenZiti 2.0's: the control-channel listeners a write set, the network interfaces the router
# reported (``ctrl/`` stores them, in the API's shape), and ``configs``, always null
_V2_FIELDS = (
    Field("ctrlChanListeners", "json", nullable=True),
    Field("interfaces", "json", empty_null=True),
)
_V2_CONSTANTS = {"configs": None}

EDGE_ROUTERS = Resource(
    name="edge-routers", entity="edgeRouter", table="routers", permission="router",
    fields=(
        *_ROUTER_FIELDS,
        ROLE_ATTRIBUTES,
        Field("isTunnelerEnabled", "bool"),
        Field("isVerified", "bool"),
        Field("appData", "map"),
        Field("certPem", nullable=True),
        *_CERT_FIELDS,
        *_V2_FIELDS,
    ),
    constants=_V2_CONSTANTS,
    create=EdgeRouterCreate,
    links=("edge-router-policies",),
    computed=(Field("isOnline", "bool"), Field("hostname"), Field("supportedProtocols", "map"), Field("syncStatus"),
              Field("versionInfo", "json"), *_ENROLLMENT_FIELDS),
    scope="t.is_edge = 1", scope_values={"is_edge": 1},
    # upstream's edge router store: its router store's symbols, then its own
    filters=("name", "fingerprint", "cost", "noTraversal", "disabled", "roleAttributes", "isVerified",
             "isTunnelerEnabled", "connected", "online"),
    # live state: only the embedded router is ever online (db/store.py's zl_router_online)
    extra_symbols={name: Symbol("bool", "zl_router_online(t.id)") for name in ("connected", "online")},
    prepare=prepare_edge_router, render=render_edge_router,
    before_delete=before_delete_router, after_write=_router_written("edge-routers"),
)


@op("POST", "/edge-routers/{id}/re-enroll", op_id="reEnrollEdgeRouter", tag="edge-routers", perm=("router", "update"))
async def re_enroll_edge_router(ctx: Ctx):
    """Forget the router's certificate and issue a fresh erott enrollment."""
    id = ctx.params["id"]
    with ctx.store.write():
        before = crud.get_row(ctx.store, EDGE_ROUTERS, id)
        ctx.store.execute("DELETE FROM enrollments WHERE edge_router_id = ?", (id,))
        new_enrollment(ctx, "erott", edge_router_id=id)
        values = {"fingerprint": None, "cert_pem": None, "is_verified": False}
        crud.write_row(ctx.store, EDGE_ROUTERS, id, values)
        crud.changed(ctx, EDGE_ROUTERS, id, before, values)
    return env.empty()


# ---------------------------------------------------------------- routers / transit routers
class RouterCreate(Body):
    name: str
    cost: Cost | None = None
    no_traversal: bool | None = None
    disabled: bool | None = None
    tags: Tags | None = None
    ctrl_chan_listeners: CtrlChanListeners | None = None
    configs: list[str] | None = None


def prepare_router(ctx: Ctx, values: dict, existing: dict | None) -> None:
    if existing is not None and existing["is_edge"]:
        raise ApiError("CAN_NOT_UPDATE_ROUTER")
    _v2_fields(values)
    check_name(values)
    if existing is None:
        values["disabled"] = False  # upstream's router create ignores disabled
    _defaults(values, {"cost": 0, "no_traversal": False, "disabled": False})


def render_router(ctx: Ctx, row: dict, out: dict) -> None:
    out["isOnline"] = presence.is_online(ctx.ctl, row["id"])
    render_v2_fields(row, out)
    if row["is_edge"]:
        # no transit sub-record: upstream reports the edge router as verified, no enrollment
        out["isVerified"] = True
        out["unverifiedFingerprint"] = None
        out["unverifiedCertPem"] = None
    elif not row["is_verified"]:
        _enrollment_fields(ctx.store, "transit_router_id", row["id"], out)


def _router_resource(name: str, entity: str, patch: type | None = None) -> Resource:
    return Resource(
        name=name, entity=entity, table="routers", permission="router",
        fields=(*_ROUTER_FIELDS, Field("isVerified", "bool"), *_CERT_FIELDS, *_V2_FIELDS),
        constants=_V2_CONSTANTS,
        computed=(Field("isOnline", "bool"), *_ENROLLMENT_FIELDS),
        create=RouterCreate, patch=patch,
        filters=("name", "fingerprint", "cost", "noTraversal", "disabled"),
        prepare=prepare_router, render=render_router,
        before_delete=before_delete_router, after_write=_router_written(name),
    )


ROUTERS = _router_resource("routers", "router")
TRANSIT_ROUTERS = _router_resource("transit-routers", "transitRouter", patch=ROUTERS.patch)


# ---------------------------------------------------------------- terminators
class TerminatorCreate(Body):
    service_id: str = msgspec.field(name="service")
    router_id: str = msgspec.field(name="router")
    binding: str
    address: str
    instance_id: str | None = msgspec.field(default=None, name="identity")
    instance_secret: str | None = msgspec.field(default=None, name="identitySecret")
    cost: Cost | None = None
    precedence: Precedence | None = None
    tags: Tags | None = None


class TerminatorUpdate(Body):
    service_id: str = msgspec.field(name="service")
    router_id: str = msgspec.field(name="router")
    binding: str
    address: str
    cost: Cost | None = None
    precedence: Precedence | None = None
    tags: Tags | None = None


def prepare_terminator(ctx: Ctx, values: dict, existing: dict | None) -> None:
    store = ctx.store
    if existing is None:
        if not exists(store, "services", values["service_id"]):
            raise NotFound("service", values["service_id"])
        values["instance_id"] = values.get("instance_id") or ""
        secret = values.get("instance_secret")
        if secret is not None:
            try:
                base64.b64decode(secret, validate=True)
            except (binascii.Error, ValueError):
                raise CouldNotValidate("identitySecret", "identitySecret in body must be of type byte", "") from None
    else:
        values.pop("service_id", None)  # a terminator's service never changes (as upstream)
    if "router_id" in values and not exists(store, "routers", values["router_id"]):
        raise NotFound("router", values["router_id"])
    if "address" in values and not values["address"]:
        raise CouldNotValidate("address", "address is required", values["address"])
    if values.get("binding") == "":
        address = values.get("address", existing["address"] if existing else "")
        values["binding"] = "udp" if address.startswith("udp:") else "transport"
    _defaults(values, {"cost": 0, "precedence": "default"})


TERMINATORS = Resource(
    name="terminators", entity="terminator", permission="terminator",
    fields=(
        Field("serviceId"),
        Field("routerId"),
        Field("binding"),
        Field("address"),
        Field("identity", column="instance_id"),
        Field("cost", "int"),
        Field("precedence"),
        Field("instanceSecret", output=False),
        Field("hostId", output=False),
    ),
    create=TerminatorCreate, update=TerminatorUpdate,
    refs=(Ref("service", "service_id", "services"), Ref("router", "router_id", "transit-routers", "routers")),
    constants={"dynamicCost": 0},
    filters=("binding", "address", "instanceId", "hostId", "sourceCtrl", "service", "router", "service.name",
             "router.name"),
    extra_symbols={
        # the controller that created it, in an HA cluster; ziti-lite is one controller: none
        "sourceCtrl": Symbol("string", "NULL"),
        "instanceId": Symbol("string", "t.instance_id"),
        "service": Symbol("string", "t.service_id"),
        "router": Symbol("string", "t.router_id"),
        "service.name": Symbol("string", "(SELECT s.name FROM services s WHERE s.id = t.service_id)"),
        "router.name": Symbol("string", "(SELECT r.name FROM routers r WHERE r.id = t.router_id)"),
    },
    protect_system=True,
    prepare=prepare_terminator,
)


@crud.listen(SERVICES)
def _service_deleted(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    """A deleted service takes its terminators with it (the foreign key cascades as well)."""
    if values is None:
        delete_terminators(ctx, "service_id", id)


RESOURCES = (EDGE_ROUTERS, ROUTERS, TRANSIT_ROUTERS, TERMINATORS)
