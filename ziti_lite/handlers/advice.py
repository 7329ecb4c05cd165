"""``GET /identities/{id}/policy-advice/{serviceId}``: may this identity dial or bind this
service, and through which edge routers.

Wire quirk kept from upstream: false booleans and zero counts are omitted, and
``commonRouters`` is ``null`` when the identity and the service share no edge router.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..api import envelope as env
from ..api.ops import op
from ..errors import NotFound
from ..policy.model import identity_router_ids, service_router_ids
from ..routing import presence

if TYPE_CHECKING:
    from ..api.context import Ctx

IDENTITY_LINKS = ("edge-router-policies", "edge-routers", "service-policies", "services", "posture-data",
                  "failed-service-requests", "authenticators", "enrollments", "service-configs")
SERVICE_LINKS = ("service-edge-router-policies", "service-policies", "terminators", "configs")


def ref(collection: str, id: str, name: str, subs: tuple[str, ...]) -> dict:
    return {"_links": env.links(collection, id, subs), "entity": collection, "id": id, "name": name}


def permissions(store, identity_id: str, service_id: str) -> set[str]:
    """The policy types ('Dial', 'Bind') of the service policies linking identity and service."""
    return set(store.column(
        "SELECT DISTINCT i.type FROM service_policy_identities i"
        " JOIN service_policy_services s ON s.policy_id = i.policy_id AND s.service_id = ?"
        " WHERE i.identity_id = ?", (service_id, identity_id)))


def identity_routers(store, identity_id: str) -> list[str]:
    return store.column(f"SELECT DISTINCT router_id FROM ({identity_router_ids()})", (identity_id,))


def service_routers(store, service_id: str) -> list[str]:
    return store.column(f"SELECT DISTINCT router_id FROM ({service_router_ids()})", (service_id,))


def _online(ctx: Ctx, router_id: str) -> bool:
    return presence.is_online(ctx.ctl, router_id)


@op("GET", "/identities/{id}/policy-advice/{serviceId}", op_id="getIdentityPolicyAdvice", tag="identities",
    perm=("service", "read"))
async def policy_advice(ctx: Ctx):
    store = ctx.store
    identity_id, service_id = ctx.params["id"], ctx.params["serviceId"]
    identity = store.one("SELECT id, name, auth_policy_id FROM identities WHERE id = ?", (identity_id,))
    if identity is None:
        raise NotFound("identity", identity_id)
    service = store.one("SELECT id, name FROM services WHERE id = ?", (service_id,))
    if service is None:
        raise NotFound("service", service_id)
    perms = permissions(store, identity_id, service_id)
    by_identity = identity_routers(store, identity_id)
    by_service = service_routers(store, service_id)
    shared = set(by_identity).intersection(by_service)
    common = None
    if shared:
        common = []
        for r in store.all(
            "SELECT id, name FROM routers WHERE id IN (SELECT value FROM json_each(?)) ORDER BY name, id",
            (env.encode(sorted(shared)).decode(),),
        ):
            item = ref("edge-routers", r["id"], r["name"], ("edge-router-policies",))
            item["isOnline"] = _online(ctx, r["id"])
            common.append(item)
    identity_ref = ref("identities", identity_id, identity["name"], IDENTITY_LINKS)
    identity_ref["_links"]["auth-policies"] = {"href": f"./auth-policies/{identity['auth_policy_id']}"}
    out = {
        "identityId": identity_id,
        "identity": identity_ref,
        "serviceId": service_id,
        "service": ref("services", service_id, service["name"], SERVICE_LINKS),
        "isBindAllowed": "Bind" in perms,
        "isDialAllowed": "Dial" in perms,
        "identityRouterCount": len(by_identity),
        "serviceRouterCount": len(by_service),
    }
    out = {k: v for k, v in out.items() if v}  # upstream's omitempty
    out["commonRouters"] = common
    return env.ok_without_meta(out)
