"""Service policies, edge router policies and service edge router policies.

The role lists are validated and normalised here (sorted, no duplicates, ``#all`` alone,
``@`` ids that exist); what each policy selects is kept by ``ziti_lite.policy.links``.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Literal

from ..api import crud
from ..api.resource import Field, Resource
from ..db.filters import Symbol
from ..errors import CouldNotValidate
from ..policy import evaluate, links
from ..policy.model import ERP, IDENTITY, POSTURE_CHECK, ROUTER, SERP, SERVICE, SIDES, SP, Kind, Link, Side
from .common import NAME, Body, Semantic, Tags, check_name
from .identities import IDENTITIES
from .posture import POSTURE_CHECKS
from .routers import EDGE_ROUTERS
from .services import SERVICES

if TYPE_CHECKING:
    from ..api.context import Ctx

Roles = list[str] | None


class ServicePolicyCreate(Body):
    name: str
    type: Literal["Dial", "Bind"]
    semantic: Semantic
    identity_roles: Roles = None
    service_roles: Roles = None
    posture_check_roles: Roles = None
    tags: Tags | None = None



class EdgeRouterPolicyCreate(Body):
    name: str
    semantic: Semantic
    identity_roles: Roles = None
    edge_router_roles: Roles = None
    tags: Tags | None = None



class ServiceEdgeRouterPolicyCreate(Body):
    name: str
    semantic: Semantic
    service_roles: Roles = None
    edge_router_roles: Roles = None
    tags: Tags | None = None



def _check_ids(store, ln: Link, roles: list[str]) -> None:
    _, ids = evaluate.split(roles)
    if not ids:
        return
    found = set(
        store.column(
            f"SELECT t.id FROM {ln.side.table} t"
            f" WHERE t.id IN (SELECT value FROM json_each(?)) AND {ln.side.where('t')}",
            (json.dumps(ids),),
        )
    )
    missing = [i for i in ids if i not in found]
    if missing:
        raise CouldNotValidate(ln.wire, f"no {ln.side.entity_type} found with the given ids", missing)


def _preparer(kind: Kind):
    def prepare(ctx: Ctx, values: dict, existing: dict | None) -> None:
        check_name(values)
        if existing is None and not values.get("semantic"):
            values["semantic"] = evaluate.ALL_OF
        for ln in kind.links:
            if ln.roles not in values and existing is not None:
                continue
            # stored sorted (byte order), as upstream's policy stores keep their role lists
            roles = sorted(evaluate.validate(ln.wire, values.get(ln.roles) or []))
            if existing is None or roles != json.loads(existing[ln.roles]):
                _check_ids(ctx.store, ln, roles)
            values[ln.roles] = roles

    return prepare


def named_roles(store, side: Side, roles: list[str]) -> list[dict]:
    """``*RolesDisplay``: ``#x`` as itself, ``@id`` as ``@<name>``; unknown ids are left out."""
    _, ids = evaluate.split(roles)
    names: dict[str, str] = {}
    if ids:
        names = dict(
            store.conn.execute(
                f"SELECT t.id, t.name FROM {side.table} t WHERE t.id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            ).fetchall()
        )
    out = []
    for r in roles:
        if r.startswith("@"):
            name = names.get(r[1:])
            if name is not None:
                out.append({"role": r, "name": "@" + name})
        else:
            out.append({"role": r, "name": r})
    return out


def _renderer(kind: Kind):
    def render(ctx: Ctx, row: dict, out: dict) -> None:
        for ln in kind.links:
            roles = json.loads(row[ln.roles])
            out[ln.wire] = roles or None  # upstream reads an empty list back as null (its Display: [])
            out[ln.wire + "Display"] = named_roles(ctx.store, ln.side, roles)
        if kind is ERP:
            out["isSystem"] = bool(row["is_system"])

    return render


def _role_fields(kind: Kind) -> tuple[Field, ...]:
    return tuple(Field(ln.wire, "set", column=ln.roles) for ln in kind.links)


def _display_fields(kind: Kind) -> tuple[Field, ...]:
    """What ``_renderer`` adds: each role list's ``*Display`` (and an edge router policy's isSystem)."""
    out = tuple(Field(ln.wire + "Display", "json") for ln in kind.links)
    return (*out, Field("isSystem", "bool")) if kind is ERP else out


def _member_symbols(kind: Kind, sides: tuple[str, ...]) -> dict[str, Symbol]:
    out = {}
    for name, side in zip(("identities", "services"), sides):
        ln = kind.link(side)
        assert ln is not None
        out[name] = Symbol("set", f"SELECT {ln.column} AS value FROM {ln.table} WHERE policy_id = t.id")
    return out


POLICY_TYPE_SQL = "CASE t.type WHEN 'Dial' THEN 1 WHEN 'Bind' THEN 2 ELSE 0 END"

SERVICE_POLICIES = Resource(
    name="service-policies",
    permission="service-policy",
    entity="servicePolicy",
    table="service_policies",
    fields=(NAME, Field("type"), Field("semantic"), *_role_fields(SP)),
    create=ServicePolicyCreate,
    links=("services", "identities", "posture-checks"),
    filters=("name", "type", "semantic", "identityRoles", "serviceRoles", "postureCheckRoles", "identities",
             "services"),
    extra_symbols={"type": Symbol("int", POLICY_TYPE_SQL), **_member_symbols(SP, ("identity", "service"))},
    prepare=_preparer(SP),
    render=_renderer(SP),
    computed=_display_fields(SP),
    after_write=links.after_policy_write(SP),
)

EDGE_ROUTER_POLICIES = Resource(
    name="edge-router-policies",
    permission="edge-router-policy",
    entity="edgeRouterPolicy",
    table="edge_router_policies",
    fields=(NAME, Field("semantic"), *_role_fields(ERP)),
    create=EdgeRouterPolicyCreate,
    links=("edge-routers", "identities"),
    filters=("name", "semantic", "identityRoles", "edgeRouterRoles"),
    protect_system=True,
    prepare=_preparer(ERP),
    render=_renderer(ERP),
    computed=_display_fields(ERP),
    after_write=links.after_policy_write(ERP),
)

SERVICE_EDGE_ROUTER_POLICIES = Resource(
    name="service-edge-router-policies",
    permission="service-edge-router-policy",
    entity="serviceEdgeRouterPolicy",
    table="service_edge_router_policies",
    fields=(NAME, Field("semantic"), *_role_fields(SERP)),
    create=ServiceEdgeRouterPolicyCreate,
    links=("edge-routers", "services"),
    filters=("name", "semantic", "serviceRoles", "edgeRouterRoles"),
    prepare=_preparer(SERP),
    render=_renderer(SERP),
    computed=_display_fields(SERP),
    after_write=links.after_policy_write(SERP),
)

RESOURCES = (SERVICE_POLICIES, EDGE_ROUTER_POLICIES, SERVICE_EDGE_ROUTER_POLICIES)

# the entities a policy side selects, as resources: what the policy engine's membership listener
# (policy/links.py) and the roleFilter list condition (handlers/roles.py) are registered on
SIDE_RESOURCES: dict[str, Resource] = {
    IDENTITY.name: IDENTITIES, SERVICE.name: SERVICES, ROUTER.name: EDGE_ROUTERS, POSTURE_CHECK.name: POSTURE_CHECKS}
assert all(SIDE_RESOURCES[s.name].name == s.resource for s in SIDES.values())

# the membership of every policy follows the writes of the entities it selects (an edge router
# deleted through /routers or /transit-routers notifies the edge routers' listeners too)
for _side in SIDES.values():
    crud.listen(SIDE_RESOURCES[_side.name])(functools.partial(links.on_entity, _side))
