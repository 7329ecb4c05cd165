"""The embedded router as an entity of the network, and the policies a new network starts with.

The router is an edge router row like any other (policies select it, the API lists it), made on
the first start with the router on and found again by the id kept in the ``controller`` table.
It is verified from birth (it needs no enrollment: it is this process) and carries the role
attribute ``public``. A new database also gets the two policies ``ziti edge quickstart``
creates, so that a fresh network carries traffic without further setup; a user may delete them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .. import clock
from ..ids import new_id
from ..pki.ca import fingerprint
from ..policy import links
from ..policy.model import KINDS, SIDES

if TYPE_CHECKING:
    from .controller import EdgeController

STATE_KEY = "edge_router_id"

DEFAULT_POLICIES = (
    ("erp", "all-endpoints-public-routers", {"identity_roles": ["#all"], "edge_router_roles": ["#public"]}),
    ("serp", "all-routers-all-services", {"service_roles": ["#all"], "edge_router_roles": ["#all"]}),
)


def _insert(store, table: str, row: dict) -> None:
    store.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def seed_policies(store) -> None:
    """The quickstart's default policies (new databases only; inside the bootstrap write)."""
    now = clock.stamp()
    for kind, name, roles in DEFAULT_POLICIES:
        k = KINDS[kind]
        pid = new_id()
        _insert(store, k.table, {"id": pid, "created_at": now, "updated_at": now, "name": name, "semantic": "AnyOf",
                                 **{col: json.dumps(v) for col, v in roles.items()}})
        links.policy_written(store, k, pid, None)


def ensure_router(ctl: EdgeController, name: str) -> str:
    """The embedded router's id: found by the stored id, renamed to ``name`` if that changed,
    created (verified, attribute ``public``) when missing."""
    store = ctl.store
    cert_fp = fingerprint(ctl.state["server_cert"])
    with store.write():
        rid = store.value("SELECT value FROM controller WHERE key = ?", (STATE_KEY,))
        row = store.one("SELECT id, name FROM routers WHERE id = ? AND is_edge = 1", (rid,)) if rid else None
        now = clock.stamp()
        if row is None:
            taken = store.one("SELECT id, is_edge FROM routers WHERE name = ?", (name,))
            if taken is not None:
                raise RuntimeError(f"a router named {name!r} already exists; choose another with --router-name")
            rid = new_id()
            _insert(store, "routers", {
                "id": rid, "created_at": now, "updated_at": now, "name": name, "is_edge": 1, "is_verified": 1,
                "fingerprint": cert_fp, "role_attributes": json.dumps(["public"]), "app_data": "{}"})
            store.execute("INSERT INTO controller (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE"
                          " SET value = excluded.value", (STATE_KEY, rid))
            links.entity_written(store, SIDES["router"], rid, None)
        elif row["name"] != name:
            if store.value("SELECT 1 FROM routers WHERE name = ? AND id != ?", (name, rid)):
                raise RuntimeError(f"a router named {name!r} already exists; choose another with --router-name")
            store.execute("UPDATE routers SET name = ?, updated_at = ? WHERE id = ?", (name, now, rid))
        store.execute("UPDATE routers SET fingerprint = ? WHERE id = ? AND fingerprint IS NOT ?",
                      (cert_fp, rid, cert_fp))
    return rid
