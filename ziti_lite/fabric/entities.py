"""Routers, services and terminators as the fabric API shows them (``/fabric/v1``).

The rows are the edge API's (one ``routers`` table for edge and transit routers, ``services``,
``terminators``); the fabric shows fewer fields under its own names and symbols: a router's
``connected``, ``listenerAddresses`` (its link listeners) and ``versionInfo`` come from the live
state the control channel and the embedded router publish (``Controller.router_states``), a
terminator's ``hostId``, ``instanceId`` and references name the router and the service.
The ``Resource`` declarations below drive the filters, sorting, paging and base fields through
``crud.page``; they are not in any ``RESOURCES`` list, so they add no generic routes.
"""

from __future__ import annotations

from ..api import crud
from ..api import envelope as env
from ..api import render as rendering
from ..api.context import Ctx
from ..api.ops import op
from ..api.resource import Field, Resource
from ..db.filters import Symbol
from ..routing import presence
from .common import FABRIC, names, ref

ROUTERS = Resource(
    name="routers", entity="router", table="routers", ops=(),
    fields=(Field("name"), Field("fingerprint", nullable=True), Field("cost", "int"), Field("noTraversal", "bool"),
            Field("disabled", "bool"),
            # OpenZiti 2.0's (resources/routers.py): left out when none; reported ones, null when none
            Field("ctrlChanListeners", "json", nullable=True), Field("interfaces", "json", empty_null=True)),
    links=("terminators",),
    computed=(Field("connected", "bool"), Field("listenerAddresses", "json"), Field("versionInfo", "json")),
    # online: a real router after its ClientHello, the embedded router while it runs
    extra_symbols={"connected": Symbol("bool", "zl_router_online(t.id)")},
    filters=("name", "fingerprint", "cost", "noTraversal", "disabled", "connected"),
)

SERVICES = Resource(
    name="services", entity="service", table="services", ops=(),
    fields=(Field("name"), Field("terminatorStrategy")),
    links=("terminators",),
    filters=("name", "terminatorStrategy"),
)

TERMINATORS = Resource(
    name="terminators", entity="terminator", table="terminators", ops=(),
    fields=(
        Field("serviceId"),
        Field("routerId"),
        Field("binding"),
        Field("address"),
        Field("instanceId"),
        Field("cost", "int"),
        Field("precedence"),
        Field("hostId"),
    ),
    computed=(Field("service", "json"), Field("router", "json"), Field("dynamicCost", "int")),
    extra_symbols={
        "service": Symbol("string", "t.service_id"),
        "router": Symbol("string", "t.router_id"),
        "service.name": Symbol("string", "(SELECT s.name FROM services s WHERE s.id = t.service_id)"),
        "router.name": Symbol("string", "(SELECT r.name FROM routers r WHERE r.id = t.router_id)"),
    },
    filters=("binding", "address", "instanceId", "hostId", "service", "router", "service.name", "router.name"),
)


# ---------------------------------------------------------------- rendering
def render_router(ctx: Ctx, row: dict) -> dict:
    out = rendering.render_fields(ROUTERS, row)
    if row["ctrl_chan_listeners"] in (None, "{}", "null"):
        out.pop("ctrlChanListeners", None)
    live = presence.state(ctx.ctl, row["id"])
    connected = bool(live.get("isOnline"))
    out["connected"] = connected
    out["listenerAddresses"] = _listeners(ctx, row["id"]) if connected else None
    if connected and live.get("versionInfo"):
        out["versionInfo"] = {k: v for k, v in live["versionInfo"].items() if v}   # omitempty upstream
    return out


def _listeners(ctx: Ctx, router_id: str) -> list[dict] | None:
    """The link listeners a connected real router declared in its hello; None (null) without any."""
    listeners = [{"address": x.get("address", ""), "protocol": x.get("protocol", "")}
                 for x in presence.listeners(ctx.ctl, router_id)]
    return listeners or None


def render_service(ctx: Ctx, row: dict) -> dict:
    return rendering.render_fields(SERVICES, row)


def _terminator_renderer(ctx: Ctx, rows: list[dict]):
    """A renderer for terminator rows whose router and service names are read once for them all."""
    routers = names(ctx.store, "routers", (r["router_id"] for r in rows))
    services = names(ctx.store, "services", (r["service_id"] for r in rows))

    def render(row: dict) -> dict:
        out = rendering.render_fields(TERMINATORS, row)
        out["service"] = ref("services", row["service_id"], services.get(row["service_id"], ""))
        out["router"] = ref("routers", row["router_id"], routers.get(row["router_id"], ""))
        out["dynamicCost"] = 0      # no dynamic (strategy) costs are kept
        return out
    return render


# ---------------------------------------------------------------- handlers
def _list(ctx: Ctx, res: Resource, where: str = "1", params: tuple = ()) -> env.JSON:
    rows, limit, offset, total = crud.page(ctx, res, where, params)
    if res is TERMINATORS:
        render = _terminator_renderer(ctx, rows)
        data = [render(r) for r in rows]
    elif res is ROUTERS:
        data = [render_router(ctx, r) for r in rows]
    else:
        data = [render_service(ctx, r) for r in rows]
    return env.listing(data, limit, offset, total, res.filterable)


@op("GET", "/routers", apis=FABRIC, op_id="listRouters", tag="routers", query=("limit", "offset", "filter"))
async def list_routers(ctx: Ctx):
    return _list(ctx, ROUTERS)


@op("GET", "/routers/{id}", apis=FABRIC, op_id="detailRouter", tag="routers")
async def detail_router(ctx: Ctx):
    return env.ok(render_router(ctx, crud.get_row(ctx.store, ROUTERS, ctx.params["id"])))


@op("GET", "/routers/{id}/terminators", apis=FABRIC, op_id="listRouterTerminators", tag="routers",
    query=("limit", "offset", "filter"))
async def list_router_terminators(ctx: Ctx):
    crud.get_row(ctx.store, ROUTERS, ctx.params["id"])      # 404 for an unknown router
    return _list(ctx, TERMINATORS, "t.router_id = ?", (ctx.params["id"],))


@op("GET", "/services", apis=FABRIC, op_id="listServices", tag="services", query=("limit", "offset", "filter"))
async def list_services(ctx: Ctx):
    return _list(ctx, SERVICES)


@op("GET", "/services/{id}", apis=FABRIC, op_id="detailService", tag="services")
async def detail_service(ctx: Ctx):
    return env.ok(render_service(ctx, crud.get_row(ctx.store, SERVICES, ctx.params["id"])))


@op("GET", "/services/{id}/terminators", apis=FABRIC, op_id="listServiceTerminators", tag="services",
    query=("limit", "offset", "filter"))
async def list_service_terminators(ctx: Ctx):
    crud.get_row(ctx.store, SERVICES, ctx.params["id"])
    return _list(ctx, TERMINATORS, "t.service_id = ?", (ctx.params["id"],))


@op("GET", "/terminators", apis=FABRIC, op_id="listTerminators", tag="terminators",
    query=("limit", "offset", "filter"))
async def list_terminators(ctx: Ctx):
    return _list(ctx, TERMINATORS)


@op("GET", "/terminators/{id}", apis=FABRIC, op_id="detailTerminator", tag="terminators")
async def detail_terminator(ctx: Ctx):
    row = crud.get_row(ctx.store, TERMINATORS, ctx.params["id"])
    return env.ok(_terminator_renderer(ctx, [row])(row))
