"""What an identity may reach, as joins over the policy engine's membership tables.

* services it may dial or bind: its service policies joined with their services
  (``policy.model.IDENTITY_SERVICES``);
* the service policies linking it to given services, with their posture checks;
* edge routers for it and one service: routers of its edge router policies that are also
  routers of the service's service edge router policies.
"""

from __future__ import annotations

import json

from ..api.context import Ctx
from .model import IDENTITY_ROUTERS, IDENTITY_SERVICES, SERVICE_ROUTERS

# condition on services ``t``: the identity (one parameter) may dial or bind it
VISIBLE = IDENTITY_SERVICES.format("")

POLICIES_SQL = (
    "SELECT s.service_id AS service_id, p.id AS policy_id, p.type AS type, p.name AS name"
    " FROM service_policy_identities i"
    " JOIN service_policy_services s ON s.policy_id = i.policy_id"
    " JOIN service_policies p ON p.id = i.policy_id"
    " WHERE i.identity_id = ? AND s.service_id IN (SELECT value FROM json_each(?))"
    " ORDER BY p.id")

CHECKS_SQL = (
    "SELECT pc.policy_id AS policy_id, c.* FROM service_policy_posture_checks pc"
    " JOIN posture_checks c ON c.id = pc.posture_check_id"
    " WHERE pc.policy_id IN (SELECT value FROM json_each(?)) ORDER BY c.id")

# edge routers for (identity, service): is_edge routers in both router sets
# the columns a session's or a service's edge router list shows (client.sessions.edge_router): a
# router row also holds its certificates, which cost a third of the query to read
ROUTERS_SQL = (
    "SELECT t.id, t.name, t.cost, t.no_traversal, t.disabled FROM routers t WHERE t.is_edge = 1"
    f" AND {IDENTITY_ROUTERS} AND {SERVICE_ROUTERS}"
    " ORDER BY t.name, t.id LIMIT ?")

MAX_SESSION_ROUTERS = 25


def may_access(store, identity_id: str, service_id: str) -> bool:
    return store.value(
        "SELECT 1 FROM service_policy_identities i JOIN service_policy_services s"
        " ON s.policy_id = i.policy_id AND s.service_id = ? WHERE i.identity_id = ? LIMIT 1",
        (service_id, identity_id)) is not None


def sees_every_service(ctx: Ctx) -> bool:
    """Whether the caller's identity is an admin (``isAdmin``): upstream shows such an identity
    every service; a default admin demoted to ``isAdmin: false`` keeps its management access but
    sees services through policies only."""
    return bool(ctx.api_session.is_admin and ctx.store.value(
        "SELECT is_admin FROM identities WHERE id = ?", (ctx.api_session.identity_id,)))


def visible(ctx: Ctx, service_id: str) -> bool:
    """Whether the caller sees the service at all: admins see every service."""
    if sees_every_service(ctx):
        return ctx.store.value("SELECT 1 FROM services WHERE id = ?", (service_id,)) is not None
    return may_access(ctx.store, ctx.api_session.identity_id, service_id)


def has_posture_checks(store) -> bool:
    return store.value("SELECT EXISTS (SELECT 1 FROM posture_checks)") == 1


def policies(store, identity_id: str, service_ids: list[str]) -> list[dict]:
    """Service policies linking the identity to each of the services (one row per pair)."""
    if not service_ids:
        return []
    return store.all(POLICIES_SQL, (identity_id, json.dumps(service_ids)))


def policy_checks(store, policy_ids) -> dict[str, list[dict]]:
    """The posture checks of each policy (policies without checks are absent)."""
    out: dict[str, list[dict]] = {}
    ids = sorted(set(policy_ids))
    if ids:
        for row in store.all(CHECKS_SQL, (json.dumps(ids),)):
            out.setdefault(row["policy_id"], []).append(row)
    return out


def routers(store, identity_id: str, service_id: str, limit: int = MAX_SESSION_ROUTERS) -> list[dict]:
    return store.all(ROUTERS_SQL, (identity_id, service_id, limit))
