"""The relationship lists of the management API: which entities a policy selects, which
policies select an entity, identity<->service (Dial/Bind), identity<->edge router and
service<->edge router through policies, and the plain foreign-key lists (a service's configs
and terminators, a config's services, a config type's configs).

Each is the related resource's ordinary list (``filter``, ``limit``, ``offset``, sort, meta)
restricted by a condition on its rows; an unknown parent id gives an empty list, as upstream.
"""

from __future__ import annotations

from ..api import crud
from ..api import render as rendering
from ..api.context import Ctx
from ..api.ops import op
from ..api.resource import Resource
from ..errors import CouldNotValidate, NotFound
from ..policy.model import (
    IDENTITY_ROUTERS,
    IDENTITY_SERVICES,
    ROUTER_IDENTITIES,
    ROUTER_SERVICES,
    SERVICE_IDENTITIES,
    SERVICE_ROUTERS,
)
from ..resources.identities import IDENTITIES
from ..resources.policies import EDGE_ROUTER_POLICIES, SERVICE_EDGE_ROUTER_POLICIES, SERVICE_POLICIES
from ..resources.posture import POSTURE_CHECKS
from ..resources.routers import EDGE_ROUTERS, TERMINATORS
from ..resources.services import CONFIGS, SERVICES

LIST_QUERY = ("limit", "offset", "filter")

# every resource a relationship list shows
_RESOURCES = {r.name: r for r in (IDENTITIES, SERVICES, CONFIGS, EDGE_ROUTERS, TERMINATORS, POSTURE_CHECKS,
                                  SERVICE_POLICIES, EDGE_ROUTER_POLICIES, SERVICE_EDGE_ROUTER_POLICIES)}


def resource(name: str) -> Resource:
    res = _RESOURCES.get(name)
    if res is None:
        raise NotFound(message=f"{name} are not available")
    return res


def related_list(ctx: Ctx, target: str, where: str, params: list):
    res = resource(target)
    if res.name != "services":
        return crud.list_response(ctx, res, where, params)

    def service(ctx: Ctx, row: dict) -> dict:
        out = rendering.render(ctx, res, row)
        out["permissions"] = None  # upstream renders these without an identity context
        out["config"] = None
        return out

    return crud.list_response(ctx, res, where, params, render_row=service)


def policy_type(ctx: Ctx) -> str | None:
    value = ctx.q("policyType")
    if value is None or value == "":
        return None
    if value.lower() not in ("dial", "bind"):
        raise CouldNotValidate("policyType", "policyType must be one of [dial bind]", value)
    return value.capitalize()


def _typed(template: str, alias: str, ctx: Ctx, id: str) -> tuple[str, list]:
    t = policy_type(ctx)
    if t is None:
        return template.format(""), [id]
    return template.format(f" AND {alias}.type = ?"), [id, t]


@op("GET", "/identities/{id}/services", op_id="listIdentityServices", tag="identities",
    query=("filter", "policyType", "limit", "offset"), perm=("service", "read"))
async def identity_services(ctx: Ctx):
    where, params = _typed(IDENTITY_SERVICES, "i", ctx, ctx.params["id"])
    return related_list(ctx, "services", where, params)


@op("GET", "/services/{id}/identities", op_id="listServiceIdentities", tag="services",
    query=("limit", "offset", "filter", "policyType"), perm=("identity", "read"))
async def service_identities(ctx: Ctx):
    where, params = _typed(SERVICE_IDENTITIES, "i", ctx, ctx.params["id"])
    return related_list(ctx, "identities", where, params)


# (parent collection, sub-collection, operation id, listed resource, condition on its rows)
SIMPLE = (
    ("identities", "service-policies", "listIdentityServicePolicies", "service-policies",
     "t.id IN (SELECT policy_id FROM service_policy_identities WHERE identity_id = ?)"),
    ("identities", "edge-router-policies", "listIdentitysEdgeRouterPolicies", "edge-router-policies",
     "t.id IN (SELECT policy_id FROM edge_router_policy_identities WHERE identity_id = ?)"),
    ("identities", "edge-routers", "listIdentityEdgeRouters", "edge-routers", IDENTITY_ROUTERS),
    ("services", "service-policies", "listServiceServicePolicies", "service-policies",
     "t.id IN (SELECT policy_id FROM service_policy_services WHERE service_id = ?)"),
    ("services", "service-edge-router-policies", "listServiceServiceEdgeRouterPolicies", "service-edge-router-policies",
     "t.id IN (SELECT policy_id FROM service_edge_router_policy_services WHERE service_id = ?)"),
    ("services", "edge-routers", "listServiceEdgeRouters", "edge-routers", SERVICE_ROUTERS),
    ("services", "configs", "listServiceConfig", "configs",
     "t.id IN (SELECT config_id FROM service_configs WHERE service_id = ?)"),
    ("services", "terminators", "listServiceTerminators", "terminators", "t.service_id = ?"),
    ("edge-routers", "edge-router-policies", "listEdgeRouterEdgeRouterPolicies", "edge-router-policies",
     "t.id IN (SELECT policy_id FROM edge_router_policy_routers WHERE router_id = ?)"),
    ("edge-routers", "service-edge-router-policies", "listEdgeRouterServiceEdgeRouterPolicies",
     "service-edge-router-policies",
     "t.id IN (SELECT policy_id FROM service_edge_router_policy_routers WHERE router_id = ?)"),
    ("edge-routers", "identities", "listEdgeRouterIdentities", "identities", ROUTER_IDENTITIES),
    ("edge-routers", "services", "listEdgeRouterServices", "services", ROUTER_SERVICES),
    ("service-policies", "identities", "listServicePolicyIdentities", "identities",
     "t.id IN (SELECT identity_id FROM service_policy_identities WHERE policy_id = ?)"),
    ("service-policies", "services", "listServicePolicyServices", "services",
     "t.id IN (SELECT service_id FROM service_policy_services WHERE policy_id = ?)"),
    ("service-policies", "posture-checks", "listServicePolicyPostureChecks", "posture-checks",
     "t.id IN (SELECT posture_check_id FROM service_policy_posture_checks WHERE policy_id = ?)"),
    ("edge-router-policies", "identities", "listEdgeRouterPolicyIdentities", "identities",
     "t.id IN (SELECT identity_id FROM edge_router_policy_identities WHERE policy_id = ?)"),
    ("edge-router-policies", "edge-routers", "listEdgeRouterPolicyEdgeRouters", "edge-routers",
     "t.id IN (SELECT router_id FROM edge_router_policy_routers WHERE policy_id = ?)"),
    ("service-edge-router-policies", "services", "listServiceEdgeRouterPolicyServices", "services",
     "t.id IN (SELECT service_id FROM service_edge_router_policy_services WHERE policy_id = ?)"),
    ("service-edge-router-policies", "edge-routers", "listServiceEdgeRouterPolicyEdgeRouters", "edge-routers",
     "t.id IN (SELECT router_id FROM service_edge_router_policy_routers WHERE policy_id = ?)"),
    ("configs", "services", "listConfigServices", "services",
     "t.id IN (SELECT service_id FROM service_configs WHERE config_id = ?)"),
    ("config-types", "configs", "listConfigsForConfigType", "configs", "t.config_type_id = ?"),
)


def _register(parent: str, sub: str, op_id: str, target: str, where: str) -> None:
    async def handler(ctx: Ctx):
        return related_list(ctx, target, where, [ctx.params["id"]])
    handler.__name__ = op_id
    # a list through another entity needs read on the entity it lists (as upstream)
    op("GET", f"/{parent}/{{id}}/{sub}", op_id=op_id, tag=parent, query=LIST_QUERY,
       perm=resource(target).need("list"))(handler)


for _row in SIMPLE:
    _register(*_row)
