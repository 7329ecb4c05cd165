"""Sessions: an API session's right to dial or bind one service.

``POST /sessions`` checks, in upstream's order: the service is visible to the identity (404),
the identity has the requested permission (400, field ``ServiceId``), the posture checks of at
least one policy of that type pass (409 ``INVALID_POSTURE``; the failure is recorded for
``/identities/{id}/failed-service-requests``), and an edge router is shared by the identity's
edge router policies and the service's service edge router policies (400
``NO_EDGE_ROUTERS_AVAILABLE``). There is at most one session per (API session, service, type):
asking again returns it. Sessions go with their API session (logout, delete, expiry), their
service and their identity (foreign keys), and when posture stops passing.

``GET /sessions``, ``GET/DELETE /sessions/{id}`` answer on both APIs: an admin sees every
session, an identity its own (anyone else's is 404).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

import msgspec

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import BOTH, op
from ..api.resource import Field, Resource
from ..auth import service_tokens
from ..auth.sessions import AuthController
from ..db.filters import Symbol
from ..errors import ApiError, CouldNotValidate, NotFound, go_text
from ..policy import access, posture_checks, session_posture
from ..policy.posture_checks import PolicyController
from ..resources.common import Body, Tags
from ..resources.identities import IDENTITIES
from ..resources.policies import SERVICE_POLICIES
from ..resources.services import SERVICES
from ..routing import presence


class SessionCreate(Body):
    service_id: str | None = None
    type: Literal["Dial", "Bind"] | None = None
    tags: Tags | None = None


SESSIONS = Resource(
    name="sessions", entity="session", table="sessions", ops=(),
    fields=(Field("token"), Field("type"), Field("apiSessionId", column="api_session_id"),
            Field("serviceId", column="service_id"), Field("identityId", column="identity_id")),
    filters=("token", "apiSession", "service", "type"),
    extra_symbols={"apiSession": Symbol("string", "t.api_session_id"), "service": Symbol("string", "t.service_id")},
)

_counter = [0]
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _b36(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _B36[r] + out
    return out.rjust(width, "0")[-width:]


def new_cuid() -> str:
    """A collision-resistant id in the style of upstream's cuids (``c`` + time + counter + random)."""
    _counter[0] = (_counter[0] + 1) % 36 ** 4
    rand = int.from_bytes(os.urandom(8), "big")
    return "c" + _b36(int(time.time() * 1000), 8) + _b36(_counter[0], 4) + _b36(os.getpid(), 4) + _b36(rand, 8)


class ClientController(AuthController, PolicyController, presence.StatesController, Protocol):
    """The controller as the client API's modules see it (see ``lifecycle.contexts.LifecycleController``)."""
    periodic: list[Callable[[Any], object]]
    service_change_memory: dict[str, str]
    service_override_sigs: dict[str, str]


def _posture_error(ctx: Ctx, service: dict, kind: str, result: session_posture.PostureResult) -> ApiError:
    subject = posture_checks.Subject(ctx.ctl, ctx.identity_id, ctx.api_session.id)
    # kept for GET /identities/{id}/failed-service-requests (client/posture.py)
    posture_checks.state(ctx.ctl, ctx.identity_id).failures.append({
        "when": clock.stamp(), "apiSessionId": ctx.api_session.id, "serviceId": service["id"],
        "serviceName": service["name"], "sessionType": kind,
        "policyFailures": [{"policyId": pid, "policyName": name,
                            "checks": [posture_checks.failure(c, subject) for c in checks]}
                           for pid, (name, checks) in result.failed.items()]})
    ids = list(result.failed)
    return ApiError("INVALID_POSTURE", cause={
        "message": f"Failed to pass posture checks for service policies: {go_text(ids)}",
        "data": {pid: [{"id": c["id"], "typeId": c["type_id"], "isPassing": False} for c in checks]
                 for pid, (_, checks) in result.failed.items()}})


def sweep(ctl: ClientController) -> None:
    """Periodic: MFA posture times out with the clock, not with a request."""
    session_posture.revoke_failing(ctl)


def ensure_sweeper(ctl: ClientController) -> None:
    if sweep not in ctl.periodic:
        ctl.periodic.append(sweep)


# ------------------------------------------------------------------ rendering
def edge_router(ctl: ClientController, row: dict) -> dict:
    """A router as sessions and the client's service edge routers show it."""
    live = presence.state(ctl, row["id"])
    protocols = live.get("supportedProtocols") or {}
    return {"name": row["name"], "hostname": live.get("hostname", ""), "supportedProtocols": protocols,
            "urls": protocols, "syncStatus": live.get("syncStatus", "SYNC_UNKNOWN"),
            "isOnline": bool(live.get("isOnline")), "cost": row["cost"], "noTraversal": bool(row["no_traversal"]),
            "disabled": bool(row["disabled"])}


def render(ctx: Ctx, row: dict, management: bool = True, routers: list[dict] | None = None) -> dict:
    store = ctx.store
    if routers is None:
        routers = access.routers(store, row["identity_id"], row["service_id"])
    out = {
        **env.base(row, "sessions", ("route-path",)),
        "apiSessionId": row["api_session_id"],
        # upstream names no API session in the reference (name "", left out)
        "apiSession": _without_name(env.entity_ref("api-sessions", "api-sessions", row["api_session_id"], None)),
        "serviceId": row["service_id"],
        "service": env.entity_ref("services", "services", row["service_id"],
                                  store.value("SELECT name FROM services WHERE id = ?", (row["service_id"],))),
        "identityId": row["identity_id"], "type": row["type"], "token": row["token"],
        "edgeRouters": [edge_router(ctx.ctl, r) for r in routers] or None,
    }
    if management:
        policies = json.loads(row["service_policies"] or "[]")
        names: dict[str, str] = (
            {r["id"]: r["name"] for r in store.all(
                "SELECT id, name FROM service_policies WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(policies),))}
            if policies
            else {}
        )
        out["servicePolicies"] = [
            env.entity_ref("service-policies", "service-policies", p, names.get(p)) for p in policies
        ]
    return out


def _without_name(ref: dict | None) -> dict | None:
    if ref is not None:
        del ref["name"]
    return ref


# the management API's session operations are an operator's (OpenZiti 2.0: ``ops``); the client
# API's are the caller's own sessions
OPS_READ = ("ops", "read")


def _own(ctx: Ctx) -> tuple[str, list]:
    if ctx.api == "management" or ctx.api_session.is_admin:
        return "1", []
    return "t.identity_id = ?", [ctx.identity_id]


def _get(ctx: Ctx, id: str) -> dict:
    where, params = _own(ctx)
    row = ctx.store.one(f"SELECT * FROM sessions t WHERE t.id = ? AND {where}", [id, *params])
    if row is None:
        raise NotFound("session", id)
    return row


# ------------------------------------------------------------------ operations
@op(
    "POST",
    "/sessions",
    apis=("client",),
    auth="session",
    op_id="createSession",
    body=SessionCreate,
    status=201,
    tag="sessions",
)
async def create_session(ctx: Ctx):
    body = await ctx.json(SessionCreate)
    kind = body.type or "Dial"
    service_id = body.service_id or ""
    store, sess = ctx.store, ctx.api_session
    ensure_sweeper(ctx.ctl)
    existing = store.one(
        "SELECT * FROM sessions WHERE api_session_id = ? AND service_id = ? AND type = ?", (sess.id, service_id, kind)
    )
    if existing is not None:
        return env.ok(render(ctx, existing, management=False), status=201)
    service = store.one("SELECT id, name FROM services WHERE id = ?", (service_id,))
    if service is None or not access.visible(ctx, service_id):
        raise NotFound("service", service_id)
    kinds = {p["type"] for p in access.policies(store, sess.identity_id, [service_id])}
    if kind not in kinds:
        raise CouldNotValidate("ServiceId", "service not found", service_id)
    result = session_posture.evaluate(ctx.ctl, sess.identity_id, sess.id, service_id, kind)
    if not result.passed:
        raise _posture_error(ctx, service, kind, result)
    routers = access.routers(store, sess.identity_id, service_id)
    if not routers:
        raise ApiError("NO_EDGE_ROUTERS_AVAILABLE")
    now = clock.stamp()
    tags = msgspec.json.encode(body.tags or {}).decode()
    sid = new_cuid()
    token = service_tokens.new(ctx.ctl, session_id=sid, api_session_id=sess.id, identity_id=sess.identity_id,
                                service_id=service_id, kind=kind, legacy=sess.bearer is None)
    with store.write():
        store.execute(
            "INSERT OR IGNORE INTO sessions (id, created_at, updated_at, tags, token, api_session_id, identity_id,"
            " service_id, type, service_policies) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                sid,
                now,
                now,
                tags,
                token,
                sess.id,
                sess.identity_id,
                service_id,
                kind,
                json.dumps(result.passing),
            ),
        )
        row = store.one(
            "SELECT * FROM sessions WHERE api_session_id = ? AND service_id = ? AND type = ?",
            (sess.id, service_id, kind),
        )
    if row is None:  # the API session went away meanwhile
        raise NotFound("apiSession", sess.id)
    return env.ok(render(ctx, row, management=False, routers=routers), status=201)


@op(
    "GET",
    "/sessions",
    apis=BOTH,
    auth="session",
    op_id="listSessions",
    tag="sessions",
    query=("limit", "offset", "filter"),
    perm=OPS_READ,
)
async def list_sessions(ctx: Ctx):
    where, params = _own(ctx)
    return crud.list_response(ctx, SESSIONS, where, params, render_row=render)


@op("GET", "/sessions/{id}", apis=BOTH, auth="session", op_id="detailSession", tag="sessions", perm=OPS_READ)
async def detail_session(ctx: Ctx):
    return env.ok(render(ctx, _get(ctx, ctx.params["id"])))


@op("DELETE", "/sessions/{id}", apis=BOTH, auth="session", op_id="deleteSession", tag="sessions",
    perm=("ops", "delete"))
async def delete_session(ctx: Ctx):
    with ctx.store.write():
        row = _get(ctx, ctx.params["id"])
        ctx.store.execute("DELETE FROM sessions WHERE id = ?", (row["id"],))
    return env.empty()


@op("GET", "/sessions/{id}/route-path", op_id="detailSessionRoutePath", tag="sessions", perm=OPS_READ)
async def session_route_path(ctx: Ctx):
    row = _get(ctx, ctx.params["id"])
    return env.ok({"routePath": presence.route_path(ctx.ctl, row["id"])})


# ------------------------------------------------------------------ access lost
# Upstream deletes a session as soon as no service policy of its type grants its identity its
# service any more; its router then answers the session "Invalid Session" and the SDK asks for
# a new one. Membership tables are up to date when these listeners run (policy/links.py's run
# first, in the same transaction).
_UNGRANTED = (
    "DELETE FROM sessions WHERE {scope} AND NOT EXISTS ("
    " SELECT 1 FROM service_policy_identities i JOIN service_policy_services s"
    " ON s.policy_id = i.policy_id AND s.service_id = sessions.service_id"
    " WHERE i.identity_id = sessions.identity_id AND i.type = sessions.type)"
)


def drop_ungranted(store, scope: str, params: tuple) -> None:
    store.execute(_UNGRANTED.format(scope=scope), params)


@crud.listen(SERVICE_POLICIES)
def _policy_changed(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    if before is not None:   # a new policy only grants
        drop_ungranted(ctx.store, "type = ?", (before["type"],))


@crud.listen(IDENTITIES)
def _identity_changed(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    if before is not None and values is not None and "role_attributes" in values:  # deletes cascade
        drop_ungranted(ctx.store, "identity_id = ?", (id,))


@crud.listen(SERVICES)
def _service_changed(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    if before is not None and values is not None and "role_attributes" in values:
        drop_ungranted(ctx.store, "service_id = ?", (id,))
