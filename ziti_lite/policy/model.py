"""What the policy engine works on: the entity sides a policy can select, and the three policy
kinds with the membership table of each of their sides.

A *side* is a kind of entity that role lists select (identities, services, edge routers,
posture checks). A *policy kind* (service / edge router / service edge router policies) has
two or three role lists, each selecting one side; the entities selected are stored in that
side's membership table (``link``), one row per (policy, entity).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Side:
    name: str            # identity | service | router | posture-check (policy_roles.side)
    table: str           # the entities' table
    scope: str           # condition its rows meet ("" = every row)
    entity_type: str     # upstream's store name, used in messages
    resource: str        # the crud resource whose writes change it

    def where(self, alias: str = "") -> str:
        if not self.scope:
            return "1"
        return self.scope if not alias else self.scope.replace("t.", f"{alias}.")


IDENTITY = Side("identity", "identities", "", "identities", "identities")
SERVICE = Side("service", "services", "", "services", "services")
ROUTER = Side("router", "routers", "t.is_edge = 1", "routers", "edge-routers")
POSTURE_CHECK = Side("posture-check", "posture_checks", "", "postureChecks", "posture-checks")
SIDES = {s.name: s for s in (IDENTITY, SERVICE, ROUTER, POSTURE_CHECK)}


@dataclass(frozen=True)
class Link:
    """One role list of a policy kind and the table holding the entities it selects."""
    roles: str           # policy column holding the role list, e.g. identity_roles
    wire: str            # its wire name, e.g. identityRoles
    side: Side
    table: str           # membership table
    column: str          # entity column of the membership table
    typed: bool = False  # rows carry the policy's type (service policies)


@dataclass(frozen=True)
class Kind:
    name: str            # sp | erp | serp (policy_roles.kind)
    table: str
    resource: str
    entity: str
    links: tuple[Link, ...]

    def link(self, side: str) -> Link | None:
        for ln in self.links:
            if ln.side.name == side:
                return ln
        return None


SP = Kind(
    "sp",
    "service_policies",
    "service-policies",
    "servicePolicy",
    (
        Link("identity_roles", "identityRoles", IDENTITY, "service_policy_identities", "identity_id", True),
        Link("service_roles", "serviceRoles", SERVICE, "service_policy_services", "service_id", True),
        Link(
            "posture_check_roles",
            "postureCheckRoles",
            POSTURE_CHECK,
            "service_policy_posture_checks",
            "posture_check_id",
        ),
    ),
)
ERP = Kind(
    "erp",
    "edge_router_policies",
    "edge-router-policies",
    "edgeRouterPolicy",
    (
        Link("identity_roles", "identityRoles", IDENTITY, "edge_router_policy_identities", "identity_id"),
        Link("edge_router_roles", "edgeRouterRoles", ROUTER, "edge_router_policy_routers", "router_id"),
    ),
)
SERP = Kind(
    "serp",
    "service_edge_router_policies",
    "service-edge-router-policies",
    "serviceEdgeRouterPolicy",
    (
        Link("service_roles", "serviceRoles", SERVICE, "service_edge_router_policy_services", "service_id"),
        Link("edge_router_roles", "edgeRouterRoles", ROUTER, "service_edge_router_policy_routers", "router_id"),
    ),
)
KINDS = {k.name: k for k in (SP, ERP, SERP)}


# ---------------------------------------------------------------- joins across the membership tables
# identity <-> service through service policies, optionally of one type
IDENTITY_SERVICES = ("t.id IN (SELECT s.service_id FROM service_policy_identities i"
                     " JOIN service_policy_services s ON s.policy_id = i.policy_id WHERE i.identity_id = ?{})")
SERVICE_IDENTITIES = ("t.id IN (SELECT i.identity_id FROM service_policy_services s"
                      " JOIN service_policy_identities i ON i.policy_id = s.policy_id WHERE s.service_id = ?{})")


def identity_router_ids(identity: str = "?") -> str:
    """The one identity -> router query: the ids of the routers the edge router policies of the
    identity (an SQL expression, a parameter by default) select. Used by the relationship lists,
    the caller's edge routers and a service's routers (client API), policy advice and the edge
    router's dial check; a caller may add ``AND r.router_id = ...`` to its WHERE clause."""
    return ("SELECT r.router_id FROM edge_router_policy_identities i"
            f" JOIN edge_router_policy_routers r ON r.policy_id = i.policy_id WHERE i.identity_id = {identity}")


def service_router_ids(service: str = "?") -> str:
    """The ids of the routers the service edge router policies of the service select (as above)."""
    return ("SELECT r.router_id FROM service_edge_router_policy_services s"
            f" JOIN service_edge_router_policy_routers r ON r.policy_id = s.policy_id WHERE s.service_id = {service}")


IDENTITY_ROUTERS = f"t.id IN ({identity_router_ids()})"
ROUTER_IDENTITIES = ("t.id IN (SELECT i.identity_id FROM edge_router_policy_routers r"
                     " JOIN edge_router_policy_identities i ON i.policy_id = r.policy_id WHERE r.router_id = ?)")
SERVICE_ROUTERS = f"t.id IN ({service_router_ids()})"
ROUTER_SERVICES = ("t.id IN (SELECT s.service_id FROM service_edge_router_policy_routers r"
                   " JOIN service_edge_router_policy_services s ON s.policy_id = r.policy_id WHERE r.router_id = ?)")
