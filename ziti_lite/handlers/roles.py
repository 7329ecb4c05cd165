"""Role attributes as lists: ``roleFilter``/``roleSemantic`` on the lists of identities, services,
edge routers and posture checks, and the four ``/…-role-attributes`` endpoints (the distinct
attributes in use, filtered with a ZitiQL query whose only symbol is ``id``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import zitiql
from ..api import crud
from ..api import envelope as env
from ..api.ops import op
from ..db import filters as fq
from ..errors import ApiError, InvalidFilter, generic_cause
from ..policy import evaluate
from ..policy.model import SIDES, Side
from ..resources.policies import SIDE_RESOURCES

if TYPE_CHECKING:
    from ..api.context import Ctx

# ------------------------------------------------------------------ roleFilter


def _role_filter(side: Side):
    def condition(ctx: Ctx):
        values = ctx.qlist("roleFilter")
        if not values:
            return None
        return evaluate.role_filter_sql(side, values, ctx.q("roleSemantic"))
    return condition


for _side in SIDES.values():
    crud.list_condition(SIDE_RESOURCES[_side.name])(_role_filter(_side))


# ------------------------------------------------------------------ role attribute lists
SYMBOLS = {"id": fq.Symbol("string", "t.id")}
ATTRIBUTES = "(SELECT DISTINCT attribute AS id FROM entity_role_attributes WHERE kind = ?)"


def attribute_list(ctx: Ctx, side: Side):
    text = ctx.q("filter")
    try:
        query = zitiql.parse(text) if text and text.strip() else zitiql.Query(None, (), None, None)
        compiled = fq.compile_query(query, SYMBOLS, "t.id")
    except (zitiql.ParseError, fq.FilterError) as e:
        raise InvalidFilter(str(e)) from None
    except fq.SortError as e:
        raise ApiError("INVALID_SORT_IDENTIFIER", cause=generic_cause(str(e))) from None
    limit = compiled.limit if compiled.limit is not None and compiled.limit >= 0 else -1
    offset = max(compiled.skip or 0, 0)
    params = [side.name, *compiled.params]
    total = ctx.store.value(f"SELECT count(*) FROM {ATTRIBUTES} t WHERE {compiled.where}", params)
    data = ctx.store.column(
        f"SELECT t.id FROM {ATTRIBUTES} t WHERE {compiled.where} ORDER BY {compiled.order_by} LIMIT ? OFFSET ?",
        [*params, limit, offset])
    meta = {"filterableFields": ["id"],
            "pagination": {"limit": fq.UNLIMITED_META if limit < 0 else limit, "offset": offset, "totalCount": total}}
    return env.ok(data, meta)


@op("GET", "/identity-role-attributes", op_id="listIdentityRoleAttributes", tag="role-attributes",
    query=("filter",), perm=("identity", "read"))
async def identity_role_attributes(ctx: Ctx):
    return attribute_list(ctx, SIDES["identity"])


@op("GET", "/service-role-attributes", op_id="listServiceRoleAttributes", tag="role-attributes",
    query=("filter",), perm=("service", "read"))
async def service_role_attributes(ctx: Ctx):
    return attribute_list(ctx, SIDES["service"])


@op("GET", "/edge-router-role-attributes", op_id="listEdgeRouterRoleAttributes", tag="role-attributes",
    query=("filter",), perm=("router", "read"))
async def edge_router_role_attributes(ctx: Ctx):
    return attribute_list(ctx, SIDES["router"])


@op("GET", "/posture-check-role-attributes", op_id="listPostureCheckRoleAttributes", tag="role-attributes",
    query=("filter",), perm=("posture-check", "read"))
async def posture_check_role_attributes(ctx: Ctx):
    return attribute_list(ctx, SIDES["posture-check"])
