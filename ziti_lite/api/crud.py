"""The six generic handlers that serve every Resource, and the row mapper they share.

Values travel as dicts keyed by column name: a body struct's attribute names are the column
names (its wire names are their camelCase), so ``struct -> values -> row`` needs no table of
renames. JSON-valued columns are passed through to the wire as ``msgspec.Raw``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias, TypeVar

import apsw
import msgspec
from msgspec import UNSET

from .. import clock, zitiql
from ..db import filters as fq
from ..db import search
from ..errors import ApiError, CouldNotValidate, InvalidFilter, NotFound, generic_cause
from ..ids import new_id
from . import envelope as env
from .context import Ctx
from .render import render, render_rows
from .resource import AfterWrite, Render, Resource, Row

_jenc = msgspec.json.Encoder()
Raw = msgspec.Raw

# resource -> functions called as fn(ctx, id, before_row, values) after every create, update,
# patch and delete of that resource, inside its transaction (before is None on create, values is
# None on delete). Other families subscribe here to keep derived data in step. Keyed by the
# Resource object: a collection that shows the rows of another (``/routers`` and
# ``/edge-routers``) notifies the other's listeners itself (resources/routers.py).
Listener: TypeAlias = AfterWrite
LISTENERS: dict[Resource, list[Listener]] = {}
L = TypeVar("L", bound=Listener)


def listen(resource: Resource) -> Callable[[L], L]:
    def deco(fn: L) -> L:
        LISTENERS.setdefault(resource, []).append(fn)
        return fn
    return deco


# functions called as fn(ctx, resource, id, before_row, values) after the listeners of every
# resource's writes, in the same transaction (the event stream and the audit trail read them)
AnyListener: TypeAlias = Callable[[Ctx, Resource, str, Row | None, Row | None], None]
ANY_LISTENERS: list[AnyListener] = []
A = TypeVar("A", bound=AnyListener)


def listen_all(fn: A) -> A:
    ANY_LISTENERS.append(fn)
    return fn


# resource -> fn(ctx, rows) called before a list page of that resource is rendered, so that the
# page's rows are rendered from one query for the whole page instead of one per row: it returns
# the render hook of this page's rows (one that reads what it fetched; None: the resource's own).
# What it fetched belongs to the page: the resource's own render hook must still work alone.
Prefetcher: TypeAlias = Callable[[Ctx, list[Row]], Render | None]
PREFETCH: dict[Resource, Prefetcher] = {}
P = TypeVar("P", bound=Prefetcher)


def prefetch(resource: Resource) -> Callable[[P], P]:
    def deco(fn: P) -> P:
        PREFETCH[resource] = fn
        return fn
    return deco


# parent resource -> (child resource, its column naming the parent): rows that the parent's
# delete takes with it (the schema's ON DELETE CASCADE). The generic delete removes them first,
# each reported to the listeners of every resource (an entityChange ``deleted`` of its own, as
# upstream's stores report their children); registered where the child is declared, in the
# order of their ``rank`` (not of module loading, which other imports may change).
CASCADES: dict[Resource, list[tuple[Resource, str]]] = {}
_CASCADE_RANKS: dict[tuple[Resource, Resource], int] = {}


def cascades(parent: Resource, child: Resource, column: str, rank: int = 0) -> None:
    _CASCADE_RANKS[(parent, child)] = rank
    children = CASCADES.setdefault(parent, [])
    children.append((child, column))
    children.sort(key=lambda c: _CASCADE_RANKS[(parent, c[0])])   # stable: equal ranks keep their order


def _delete_children(ctx: Ctx, res: Resource, id: str) -> None:
    for child, column in CASCADES.get(res, ()):
        rows = ctx.store.all(f"SELECT * FROM {child.table} WHERE {column} = ?", (id,))
        if not rows:
            continue
        ctx.store.execute(f"DELETE FROM {child.table} WHERE {column} = ?", (id,))
        for row in rows:
            for every in ANY_LISTENERS:
                every(ctx, child, row["id"], row, None)


def changed(ctx: Ctx, res: Resource, id: str, before: Row | None, values: Row | None) -> None:
    if res.after_write:
        res.after_write(ctx, id, before, values)
    for fn in LISTENERS.get(res, ()):
        fn(ctx, id, before, values)
    for every in ANY_LISTENERS:
        every(ctx, res, id, before, values)


# ------------------------------------------------------------------ values <-> rows
def struct_values(obj: Any, patch: bool = False) -> dict[str, Any]:
    """Column values from a decoded body; for PATCH only the keys the client really sent."""
    out = {}
    for name in obj.__struct_fields__:
        v = getattr(obj, name)
        if patch and (v is UNSET or v is None):
            continue
        if v is UNSET:
            v = None
        if isinstance(v, msgspec.Struct):
            v = msgspec.to_builtins(v)
        elif isinstance(v, list) and v and isinstance(v[0], msgspec.Struct):
            v = msgspec.to_builtins(v)
        out[name] = v
    if patch and out.get("tags") == {}:
        del out["tags"]  # upstream: an empty map in a PATCH changes nothing
    return out


def to_sql(res: Resource, column: str, value: Any) -> Any:
    if column in res.sorted_columns and isinstance(value, list):
        value = sorted(dict.fromkeys(value))
    if column == "tags" or column in res.json_columns:
        return _jenc.encode(value if value is not None else ({} if column == "tags" else None)).decode()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):  # SQLite (and upstream) ints are int64
        f = res.by_column.get(column)
        raise CouldNotValidate(f.name if f else column, "value out of range of a 64-bit integer", value)
    return value


# ------------------------------------------------------------------ store helpers
def get_row(store, res: Resource, id: str) -> dict:
    row = store.one(f"SELECT * FROM {res.table} t WHERE t.id = ?" + (f" AND ({res.scope})" if res.scope else ""), (id,))
    if row is None:
        raise NotFound(res.entity, id)
    return row


def insert(store, res: Resource, values: dict, id: str | None = None) -> str:
    now = clock.stamp()
    cols = {"id": id or new_id(), "created_at": now, "updated_at": now}
    cols.update(res.scope_values)
    for k, v in values.items():
        if k == "tags" or k in res.by_column or k == "is_system":
            cols[k] = to_sql(res, k, v)
    if "tags" not in cols:
        cols["tags"] = "{}"
    sql = f"INSERT INTO {res.table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    _run_unique(store, res, sql, list(cols.values()), values)
    return cols["id"]


def write_row(store, res: Resource, id: str, values: dict) -> None:
    cols = {k: to_sql(res, k, v) for k, v in values.items() if k == "tags" or k in res.by_column}
    cols["updated_at"] = clock.stamp()
    sets = ", ".join(f"{k} = ?" for k in cols)
    _run_unique(store, res, f"UPDATE {res.table} SET {sets} WHERE id = ?", [*cols.values(), id], values)


def _run_unique(store, res: Resource, sql: str, params: list, values: dict) -> None:
    try:
        store.execute(sql, params)
    except apsw.ConstraintError as e:
        text = str(e)
        if "UNIQUE" in text:
            column = text.rsplit(".", 1)[-1].strip()
            f = res.by_column.get(column)
            name = f.name if f else column
            value = values.get(column)
            if name == "name":
                raise CouldNotValidate("name", "name must be unique", value) from None
            raise CouldNotValidate(
                name, f"duplicate value '{value}' in unique index on {res.name} store", value
            ) from None
        if "FOREIGN KEY" in text:
            raise ApiError("REFERENCED_ENTITY_NOT_FOUND", cause=generic_cause(text)) from None
        raise


# ------------------------------------------------------------------ listing
# above this many matches, a page of an indexed search walks the sort order and tests membership
# in the index answer (stops after the page) instead of sorting every match
SEARCH_PROBE_ABOVE = 2000


def page(
    ctx: Ctx,
    res: Resource,
    where: str = "1",
    params: Iterable = (),
    symbols=None,
    filter_text: str | None = None,
    table: str | None = None,
) -> tuple[list[dict], int, int, int]:
    """Rows of one page of ``res`` under the request's filter/sort/limit/offset, and the meta numbers."""
    syms = symbols or res.symbols
    if table and table != res.table:  # the search indexes follow the rows of res.table only
        syms = {k: dataclasses.replace(v, search="") if v.search else v for k, v in syms.items()}
    compiled, limit, offset = compile_request(ctx, syms, filter_text)
    # only the conditions that constrain: a bare ``count(*)`` uses SQLite's b-tree count
    # (11 µs at 100k rows) where ``WHERE 1`` scans an index (0.9 ms)
    parts = [f"({c})" for c in (where, res.scope, compiled.where) if c and c != "1"]
    cond = " AND ".join(parts) or "1"
    all_params = [*params, *compiled.params]
    tbl = table or res.table
    if compiled.count is not None and cond == f"({compiled.where})" and tbl == res.table:
        total = ctx.store.count(*compiled.count)  # one indexed search and nothing else: count in the index
    else:
        total = ctx.store.count(f"SELECT count(*) FROM {tbl} t" + (f" WHERE {cond}" if parts else ""), all_params)
    if total > SEARCH_PROBE_ABOVE and compiled.count is not None:
        cond = search.probe_variant(cond)  # many matches: walk the sort order instead
    order = compiled.order_by
    if offset > 0:
        # deep pages: skip through the ids alone (a covering index for the default and indexed
        # sorts) and fetch only the page's rows; OFFSET over whole rows reads every skipped row
        rows = ctx.store.all(
            f"SELECT t.* FROM {tbl} t WHERE t.id IN (SELECT t.id FROM {tbl} t WHERE {cond}"
            f" ORDER BY {order} LIMIT ? OFFSET ?) ORDER BY {order}",
            [*all_params, limit, offset],
        )
    else:
        rows = ctx.store.all(f"SELECT t.* FROM {tbl} t WHERE {cond} ORDER BY {order} LIMIT ?", [*all_params, limit])
    return rows, (fq.UNLIMITED_META if limit < 0 else limit), offset, total


def compile_request(ctx: Ctx, symbols: fq.Symbols, filter_text: str | None = None) -> tuple[fq.Compiled, int, int]:
    """The request's filter (or ``filter_text``) and sort compiled over ``symbols`` (a table
    aliased ``t``), and its effective limit and offset, or upstream's 400 for each kind of
    mistake."""
    text = ctx.q("filter") if filter_text is None else filter_text
    sort_param = False
    try:
        query = zitiql.parse(text) if text and text.strip() else zitiql.Query(None, (), None, None)
        sort_param = not query.sort and bool(ctx.q("sort"))
        if sort_param:
            try:
                query = _with_sort(query, ctx.q("sort") or "")
            except zitiql.ParseError as e:
                raise ApiError("INVALID_SORT_IDENTIFIER", cause=generic_cause(str(e)))
        compiled = fq.compile_query(query, symbols)
        limit, offset = fq.paging(compiled.skip, compiled.limit, ctx.q("limit"), ctx.q("offset"))
    except (zitiql.ParseError, fq.FilterError) as e:
        raise InvalidFilter(str(e)) from None
    except fq.SortError as e:
        if not sort_param:  # a sort inside the filter is part of the filter, as upstream reports it
            raise InvalidFilter(str(e)) from None
        raise ApiError("INVALID_SORT_IDENTIFIER", cause=generic_cause(str(e))) from None
    except fq.PagingError:
        # list operations declare limit/offset, so upstream's parameter binding answers first
        name = "limit" if _bad_int(ctx.q("limit")) else "offset"
        value = ctx.q(name)
        raise CouldNotValidate(name, f'{name} in query must be of type int64: "{value}"', value) from None
    return compiled, limit, offset


def _bad_int(text: str | None) -> bool:
    try:
        fq._param_int(text, "")
        return False
    except fq.PagingError:
        return True


def _with_sort(query, sort_text: str):
    sorted_q = zitiql.parse("sort by " + sort_text)
    return zitiql.Query(query.predicate, sorted_q.sort, query.skip, query.limit)


def list_response(
    ctx: Ctx,
    res: Resource,
    where: str = "1",
    params: Iterable = (),
    render_row: Callable[[Ctx, dict], dict] | None = None,
    prefetch: Prefetcher | None = None,
    **kw: Any,
) -> env.JSON:
    """The list page of ``res`` (paging, filter, sort, totalCount) under an extra condition,
    each row rendered as its detail or by ``render_row`` (a page with a shape of its own);
    ``prefetch`` (default: the resource's registered one) sees the page's rows first and may
    give the render hook of the page's rows."""
    rows, limit, offset, total = page(ctx, res, where, params, **kw)
    pre = PREFETCH.get(res) if prefetch is None else prefetch
    hook = pre(ctx, rows) if pre is not None and rows else None
    if render_row is None:
        data = render_rows(ctx, res, rows, hook)
    else:
        data = [render_row(ctx, r) for r in rows]
    return env.listing(data, limit, offset, total, res.filterable)


def child_list(ctx: Ctx, parent: Resource, res: Resource, column: str) -> env.JSON:
    """The list page of the ``res`` rows whose ``column`` holds the id of the ``parent`` entity
    in the path (404 when there is no such parent)."""
    id = ctx.params["id"]
    get_row(ctx.store, parent, id)
    return list_response(ctx, res, f"t.{column} = ?", [id])


# resource -> fns(ctx) each returning None or (where, params): conditions the request adds to
# that resource's list (e.g. roleFilter on identities), AND-ed in registration order and applied
# before filter and paging.
ListCondition: TypeAlias = Callable[[Ctx], tuple[str, list[Any]] | None]
LIST_CONDITIONS: dict[Resource, list[ListCondition]] = {}
C = TypeVar("C", bound=ListCondition)


def list_condition(resource: Resource) -> Callable[[C], C]:
    """Register fn as a list condition of the resource; several registrations are AND-ed."""

    def deco(fn: C) -> C:
        LIST_CONDITIONS.setdefault(resource, []).append(fn)
        return fn

    return deco


def list_conditions(ctx: Ctx, res: Resource) -> tuple[str, list] | None:
    """The list conditions of ``res`` for this request, AND-ed; None when none applies."""
    parts = [c for c in (fn(ctx) for fn in LIST_CONDITIONS.get(res, ())) if c is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({w})" for w, _ in parts), [p for _, ps in parts for p in ps]


# ------------------------------------------------------------------ the six handlers
async def list_(res: Resource, ctx: Ctx):
    extra = list_conditions(ctx, res)
    if extra is not None:
        return list_response(ctx, res, extra[0], extra[1])
    return list_response(ctx, res)


async def detail(res: Resource, ctx: Ctx):
    row = get_row(ctx.store, res, ctx.params["id"])
    if res.before_read:
        res.before_read(ctx, row)
    return env.ok(render(ctx, res, row))


async def create(res: Resource, ctx: Ctx):
    assert res.create is not None  # routes.py mounts create only with a create struct
    body: Any = await ctx.json(res.create)
    values = struct_values(body)
    with ctx.store.write():
        if res.prepare:
            res.prepare(ctx, values, None)
        id = insert(ctx.store, res, values, values.pop("id", None) if "id" in values and values["id"] else None)
        changed(ctx, res, id, None, values)
    return env.created(id, f"./{res.name}/{id}")


async def update(res: Resource, ctx: Ctx):
    return await _change(res, ctx, res.update, patch=False)


async def patch(res: Resource, ctx: Ctx):
    return await _change(res, ctx, res.patch, patch=True)


async def _change(res: Resource, ctx: Ctx, struct: type | None, patch: bool):
    assert struct is not None  # routes.py mounts update and patch only with an update struct
    id = ctx.params["id"]
    # as upstream: the body's schema is checked while binding the request (400 even for an
    # unknown id), the id looked up by the handler (404), then the values validated (400)
    body: Any = await ctx.json(struct)
    get_row(ctx.store, res, id)
    values = struct_values(body, patch=patch)
    if not patch and "tags" in values and values["tags"] is None:
        values["tags"] = {}
    with ctx.store.write():
        existing = get_row(ctx.store, res, id)
        if existing.get("is_system") and res.protect_system:
            raise ApiError(
                "ENTITY_CAN_NOT_BE_UPDATED",
                cause=generic_cause(f"cannot update system {res.entity}"),
            )
        if res.prepare:
            res.prepare(ctx, values, existing)
        write_row(ctx.store, res, id, values)
        changed(ctx, res, id, existing, values)
    return env.empty()


async def delete(res: Resource, ctx: Ctx):
    id = ctx.params["id"]
    with ctx.store.write():
        row = get_row(ctx.store, res, id)
        if row.get("is_system") and res.protect_system:
            raise ApiError(
                "ENTITY_CAN_NOT_BE_DELETED",
                cause=generic_cause(f"cannot delete system {res.entity}"),
            )
        if res.before_delete:
            res.before_delete(ctx, row)
        _delete_children(ctx, res, id)
        ctx.store.execute(f"DELETE FROM {res.table} WHERE id = ?", (id,))
        changed(ctx, res, id, row, None)
    return env.empty()


HANDLERS = {"list": list_, "detail": detail, "create": create, "update": update, "patch": patch, "delete": delete}
