"""An identity's service config overrides: ``/identities/{id}/service-configs``.

An override maps (identity, service, config type) to one config, so assigning a config
replaces any earlier one of the same type for that service, and removing a pair removes the
override of that config's type (whichever config it names), as upstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..api import envelope as env
from ..api.ops import op
from ..errors import NotFound
from ..resources.common import Body
from .advice import SERVICE_LINKS, ref

if TYPE_CHECKING:
    from ..api.context import Ctx


class ServiceConfigAssign(Body):
    service_id: str
    config_id: str


def _identity(store, id: str) -> None:
    if store.value("SELECT 1 FROM identities WHERE id = ?", (id,)) is None:
        raise NotFound("identity", id)


def _config_type(store, config_id: str) -> str:
    type_id = store.value("SELECT config_type_id FROM configs WHERE id = ?", (config_id,))
    if type_id is None:
        raise NotFound("config", config_id)
    return type_id


@op("GET", "/identities/{id}/service-configs", op_id="listIdentitysServiceConfigs", tag="identities",
    perm=("identity", "read"))
async def list_service_configs(ctx: Ctx):
    id = ctx.params["id"]
    _identity(ctx.store, id)
    rows = ctx.store.all(
        "SELECT x.service_id, s.name AS service_name, x.config_id, c.name AS config_name"
        " FROM identity_service_configs x JOIN services s ON s.id = x.service_id JOIN configs c ON c.id = x.config_id"
        " WHERE x.identity_id = ? ORDER BY s.name, x.service_id, c.name", (id,))
    data = [
        {
            "serviceId": r["service_id"],
            "service": ref("services", r["service_id"], r["service_name"], SERVICE_LINKS),
            "configId": r["config_id"],
            "config": ref("configs", r["config_id"], r["config_name"], ()),
        }
        for r in rows
    ]
    # upstream lists no filterable fields here (its meta has pagination only)
    meta = {"pagination": {"limit": len(data), "offset": 0, "totalCount": len(data)}}
    return env.ok(data, meta)


@op(
    "POST",
    "/identities/{id}/service-configs",
    op_id="associateIdentitysServiceConfigs",
    tag="identities",
    body=list[ServiceConfigAssign],
    perm=("identity", "update"),
)
async def assign_service_configs(ctx: Ctx):
    id = ctx.params["id"]
    _identity(ctx.store, id)
    pairs = await ctx.json(list[ServiceConfigAssign])
    store = ctx.store
    with store.write():
        for p in pairs:
            type_id = _config_type(store, p.config_id)
            if store.value("SELECT 1 FROM services WHERE id = ?", (p.service_id,)) is None:
                raise NotFound("service", p.service_id)
            store.execute(
                "INSERT OR REPLACE INTO identity_service_configs (identity_id, service_id, config_type_id, config_id)"
                " VALUES (?, ?, ?, ?)",
                (id, p.service_id, type_id, p.config_id),
            )
    return env.empty()


@op(
    "DELETE",
    "/identities/{id}/service-configs",
    op_id="disassociateIdentitysServiceConfigs",
    tag="identities",
    body=list[ServiceConfigAssign],
    perm=("identity", "update"),
)
async def remove_service_configs(ctx: Ctx):
    id = ctx.params["id"]
    _identity(ctx.store, id)
    body = await ctx.body()
    if not body.strip():
        return env.empty()
    pairs = await ctx.json(list[ServiceConfigAssign])
    store = ctx.store
    with store.write():
        for p in pairs:
            type_id = _config_type(store, p.config_id)
            store.execute(
                "DELETE FROM identity_service_configs WHERE identity_id = ? AND service_id = ? AND config_type_id = ?",
                (id, p.service_id, type_id),
            )
    return env.empty()
