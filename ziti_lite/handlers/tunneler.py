"""Tunneler-enabled edge routers, as upstream: turning ``isTunnelerEnabled`` on gives the router
an identity of type ``Router`` (same id, same name) and a system edge router policy (id = the
router's id, ``edge-router-<id>-system``, AnyOf, ``@<id>`` on both sides); turning it off or
deleting the router removes both; renaming the router renames its identity."""

from __future__ import annotations

from ..api import crud
from ..api.context import Ctx
from ..errors import CouldNotValidate
from ..policy import links
from ..policy.model import ERP
from ..resources.identities import IDENTITIES
from ..resources.policies import EDGE_ROUTER_POLICIES


def policy_name(router_id: str) -> str:
    return f"edge-router-{router_id}-system"


def enable(ctx: Ctx, router_id: str, name: str) -> None:
    store = ctx.store
    row = store.one("SELECT type_id FROM identities WHERE id = ?", (router_id,))
    if row is None:
        values = {"name": name, "type_id": "Router", "is_admin": False, "role_attributes": []}
        crud.insert(store, IDENTITIES, values, id=router_id)
        pending = ctx.pending_enrollment
        ctx.pending_enrollment = None  # a router's identity is never enrolled on its own
        try:
            crud.changed(ctx, IDENTITIES, router_id, None, values)
        finally:
            ctx.pending_enrollment = pending
    elif row["type_id"] != "Router":
        raise CouldNotValidate("id", "an identity with the router's id exists", router_id)
    if store.value("SELECT 1 FROM edge_router_policies WHERE id = ?", (router_id,)) is None:
        ref = ["@" + router_id]
        values = {
            "name": policy_name(router_id),
            "semantic": "AnyOf",
            "identity_roles": ref,
            "edge_router_roles": ref,
            "is_system": 1,
        }
        crud.insert(store, EDGE_ROUTER_POLICIES, values, id=router_id)
        links.policy_written(store, ERP, router_id, None)


def disable(ctx: Ctx, router_id: str) -> None:
    store = ctx.store
    if store.value("SELECT 1 FROM edge_router_policies WHERE id = ? AND is_system = 1", (router_id,)):
        store.execute("DELETE FROM edge_router_policies WHERE id = ?", (router_id,))
        links.policy_written(store, ERP, router_id, None)
    row = store.one("SELECT * FROM identities WHERE id = ? AND type_id = 'Router'", (router_id,))
    if row is not None:
        store.execute("DELETE FROM identities WHERE id = ?", (router_id,))
        crud.changed(ctx, IDENTITIES, router_id, row, None)


def _on_edge_router(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    was = bool(before and before.get("is_tunneler_enabled"))
    if values is None:
        if was or ctx.store.value("SELECT 1 FROM identities WHERE id = ? AND type_id = 'Router'", (id,)):
            disable(ctx, id)
        return
    row = ctx.store.one("SELECT name, is_tunneler_enabled FROM routers WHERE id = ?", (id,))
    if row is None:
        return
    now = bool(row["is_tunneler_enabled"])
    if now and not was:
        enable(ctx, id, row["name"])
    elif was and not now:
        disable(ctx, id)
    elif now and before is not None and before.get("name") != row["name"]:
        if ctx.store.value("SELECT 1 FROM identities WHERE id = ? AND type_id = 'Router'", (id,)):
            crud.write_row(ctx.store, IDENTITIES, id, {"name": row["name"]})


crud.listen("edge-routers")(_on_edge_router)  # deletes through /routers notify this too
