"""The client API's services: what the caller may dial or bind.

``GET /services`` lists the services the caller's service policies grant (an admin: every
service), each with its ``permissions``, ``config`` merged for the requested config types and
``postureQueries`` (``resources.service_view``); filter, sort and paging as on every list.
``GET /services/{id}`` is 404 for a service the caller cannot see; ``/edge-routers`` and
``/terminators`` of a visible service are the routers a session would get and its terminators.
The three writes answer 501 on this API, as upstream.
"""

from __future__ import annotations

from ..api import crud
from ..api import envelope as env
from ..api import render as rendering
from ..api.context import Ctx
from ..api.ops import not_implemented, op
from ..api.router import AuthLevel
from ..errors import NotFound, Unauthorized
from ..policy import access
from ..resources import service_view
from ..resources.routers import TERMINATORS
from ..resources.services import SERVICES
from . import changes
from .sessions import edge_router

CLIENT = ("client",)


def _visible_or_404(ctx: Ctx, service_id: str) -> dict:
    row = ctx.store.one("SELECT * FROM services WHERE id = ?", (service_id,))
    if row is None or not access.visible(ctx, service_id):
        raise NotFound("service", service_id)
    return row


@op("GET", "/services", apis=CLIENT, auth="session", op_id="listServices", tag="services",
    query=("limit", "offset", "filter", "configTypes", "roleFilter", "roleSemantic"))
async def list_services(ctx: Ctx):
    res = SERVICES
    if access.sees_every_service(ctx):
        where, params = "1", []
    else:
        where, params = access.VISIBLE, [ctx.identity_id]
    page = crud.list_response(ctx, res, where, params)  # the services' prefetcher: service_view.prefetch
    changes.observe_overrides(ctx.ctl, ctx.identity_id)
    return page


@op("GET", "/services/{id}", apis=CLIENT, auth="session", op_id="detailService", tag="services")
async def detail_service(ctx: Ctx):
    row = _visible_or_404(ctx, ctx.params["id"])
    return env.ok(rendering.render(ctx, SERVICES, row))


# upstream's client API declares these operations but does not implement them:
# (method, operationId, path, auth level, go-swagger's name of the operation)
_NOT_IMPLEMENTED: tuple[tuple[str, str, str, AuthLevel, str], ...] = (
    ("PUT", "updateService", "/services/{id}", "session", "service.UpdateService"),
    ("PATCH", "patchService", "/services/{id}", "session", "service.PatchService"),
    ("DELETE", "deleteService", "/services/{id}", "session", "service.DeleteService"),
    ("POST", "enrollmentChallenge", "/enroll/challenge", "public", "enroll.EnrollmentChallenge"),
    ("GET", "enrollmentJwks", "/enroll/jwks", "public", "enroll.GetEnrollmentJwks"),
)
for _method, _op_id, _path, _auth, _name in _NOT_IMPLEMENTED:
    not_implemented(_method, _path, apis=CLIENT, auth=_auth, op_id=_op_id, name=_name, tag=_path.split("/")[1])


@op("GET", "/services/{id}/edge-routers", apis=CLIENT, auth="session", op_id="listServiceEdgeRouters",
    tag="services", query=("limit", "offset", "filter", "session-token"))
async def service_edge_routers(ctx: Ctx):
    service_id = ctx.params["id"]
    _visible_or_404(ctx, service_id)
    token = ctx.request.headers.get("session-token")
    if token and ctx.store.value("SELECT 1 FROM sessions WHERE token = ? AND service_id = ? AND identity_id = ?",
                                 (token, service_id, ctx.identity_id)) is None:
        raise Unauthorized()
    routers = access.routers(ctx.store, ctx.identity_id, service_id)
    items = []
    for r in routers:
        item = edge_router(ctx.ctl, r)
        del item["urls"]
        items.append(item)
    return env.ok({"edgeRouters": items})


@op("GET", "/services/{id}/terminators", apis=CLIENT, auth="session", op_id="listServiceTerminators",
    tag="services", query=("limit", "offset", "filter"))
async def service_terminators(ctx: Ctx):
    service_id = ctx.params["id"]
    service = _visible_or_404(ctx, service_id)
    ref = env.entity_ref("services", "services", service_id, service["name"])

    def terminator(ctx: Ctx, r: dict) -> dict:
        return {**env.base(r, "terminators"), "serviceId": service_id, "service": ref, "routerId": r["router_id"],
                "identity": r["instance_id"]}

    return crud.list_response(ctx, TERMINATORS, "t.service_id = ?", [service_id], render_row=terminator)


service_view.install_list_condition(SERVICES)
