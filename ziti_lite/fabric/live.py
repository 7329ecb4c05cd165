"""Links and circuits as the fabric API shows them: the control channel's live tables.

``ctrl/links.py`` keeps the link table and ``ctrl/circuits.py`` the live circuits, in memory;
nothing of them is in SQLite. A list request still gets ZitiQL filters, sorting and paging with
upstream's symbols (those of its in-memory stores): the page's candidates are handed to SQLite as
one JSON array (``json_each``) and the same compiler (``db/filters.py``) that serves the stored
collections picks, orders and counts them; the page is rendered from the live objects. With the
control channel off both lists are empty, and a detail is 404.

Circuits of the embedded router (SDK to SDK on ziti-lite's own router) are not listed: it keeps
no circuit records, only connections.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import op
from ..db import filters as fq
from ..db.filters import Symbol
from ..errors import NotFound
from ..routing import presence
from .common import FABRIC, names, ref

_enc = msgspec.json.Encoder()

Getter = Callable[[Any], Any]


def _symbols(table: dict[str, tuple[str, Getter]]) -> dict[str, Symbol]:
    return {name: Symbol(kind, f"t.{_column(i, name)}") for i, (name, (kind, _)) in enumerate(table.items())}


def _column(i: int, name: str) -> str:
    """The candidate column of a symbol: ``id`` (the compiler's last sort key) or ``c<i>``."""
    return "id" if name == "id" else f"c{i}"


_USED = re.compile(r"\bt\.(id|c[0-9]+)\b")
DEFAULT_ORDER = "t.id ASC"


def live_page(ctx: Ctx, table: dict[str, tuple[str, Getter]], objs: list) -> tuple[list, int, int, int]:
    """One page of ``objs`` under the request's filter, sort and paging over the public symbols of
    ``table`` (name -> (kind, getter); ``id`` first), and (limit, offset, total) for the meta.
    Only the columns the query names are computed and handed to SQLite; a list with neither a
    filter nor a sort is paged in Python."""
    symbols = _symbols(table)
    compiled, limit, offset = crud.compile_request(ctx, symbols)
    stop = None if limit < 0 else offset + limit
    meta_limit = fq.UNLIMITED_META if limit < 0 else limit
    if compiled.where == "1" and compiled.order_by == DEFAULT_ORDER:
        ordered = sorted(objs, key=lambda o: o.id)
        return ordered[offset:stop], meta_limit, offset, len(objs)
    used = set(_USED.findall(compiled.where + " " + compiled.order_by)) | {"id"}
    getters = [(_column(i, name), get) for i, (name, (_, get)) in enumerate(table.items())
               if _column(i, name) in used]
    columns = ", ".join(f"json_extract(value, '$[{i}]') AS {col}" for i, (col, _) in enumerate(getters))
    data = _enc.encode([[get(o) for _, get in getters] for o in objs]).decode()
    live = f"WITH live AS (SELECT {columns} FROM json_each(?)) "
    cond = compiled.where
    total = ctx.store.value(live + f"SELECT count(*) FROM live t WHERE {cond}", [data, *compiled.params])
    ids = [r["id"] for r in ctx.store.all(
        live + f"SELECT t.id FROM live t WHERE {cond} ORDER BY {compiled.order_by} LIMIT ? OFFSET ?",
        [data, *compiled.params, limit, offset])]
    by_id = {o.id: o for o in objs}
    return [by_id[i] for i in ids], meta_limit, offset, total


def _listing(ctx: Ctx, table: dict[str, tuple[str, Getter]], objs: Mapping[str, Any],
             render: Callable[[Ctx, list], list[dict]]) -> env.JSON:
    page, limit, offset, total = live_page(ctx, table, list(objs.values()))
    return env.listing(render(ctx, page), limit, offset, total, None)   # no filterableFields, as upstream


def _detail(ctx: Ctx, kind: str, objs: Mapping[str, Any], render: Callable[[Ctx, list], list[dict]]) -> env.JSON:
    """The detail of the live object the path names (404 when it is gone)."""
    obj = objs.get(ctx.params["id"])
    if obj is None:
        raise NotFound(kind, ctx.params["id"])
    return env.ok(render(ctx, [obj])[0])


@functools.lru_cache(maxsize=1 << 16)   # a circuit's stamp, once: lists sorted or filtered by createdAt
def _stamp(t: float) -> str:
    return clock.fmt(dt.datetime.fromtimestamp(t, dt.UTC)) or ""


# ---------------------------------------------------------------- links
def _links(ctx: Ctx) -> Mapping[str, Any]:
    return presence.links(ctx.ctl)


# upstream's symbols of its in-memory link store: name -> (kind, value of a Link)
LINK_SYMBOLS: dict[str, tuple[str, Getter]] = {
    "id": ("string", lambda x: x.id), "protocol": ("string", lambda x: x.protocol),
    "dialAddress": ("string", lambda x: x.dial_address), "sourceRouter": ("string", lambda x: x.src),
    "destRouter": ("string", lambda x: x.dst), "cost": ("int", lambda x: x.cost),
    "staticCost": ("int", lambda x: x.static_cost), "destLatency": ("int", lambda x: x.dst_latency),
    "sourceLatency": ("int", lambda x: x.src_latency), "state": ("string", lambda x: x.state),
    "iteration": ("int", lambda x: x.iteration),
}


def render_links(ctx: Ctx, links: list) -> list[dict]:
    routers = names(ctx.store, "routers", [x for link in links for x in (link.src, link.dst)])
    for link in links:      # a router deleted while its link stands: its channel still knows the name
        for rid in (link.src, link.dst):
            name = presence.line_name(ctx.ctl, rid) if rid not in routers else None
            if name is not None:
                routers[rid] = name
    return [{"id": link.id, "protocol": link.protocol, "state": link.state, "iteration": link.iteration,
             "staticCost": link.static_cost, "cost": link.cost, "down": False,   # a down link leaves the table
             "sourceLatency": link.src_latency, "destLatency": link.dst_latency,
             "sourceRouter": ref("routers", link.src, routers.get(link.src, "")),
             "destRouter": ref("routers", link.dst, routers.get(link.dst, ""))} for link in links]


@op("GET", "/links", apis=FABRIC, op_id="listLinks", tag="links", query=("limit", "offset", "filter"),
    perm=("ops", "read"))
async def list_links(ctx: Ctx):
    return _listing(ctx, LINK_SYMBOLS, _links(ctx), render_links)


@op("GET", "/links/{id}", apis=FABRIC, op_id="detailLink", tag="links", perm=("ops", "read"))
async def detail_link(ctx: Ctx):
    return _detail(ctx, "link", _links(ctx), render_links)


# ---------------------------------------------------------------- circuits
def _circuits(ctx: Ctx) -> Mapping[str, Any]:
    return presence.circuits(ctx.ctl)


# upstream's symbols of its in-memory circuit store: name -> (kind, value of a Circuit)
CIRCUIT_SYMBOLS: dict[str, tuple[str, Getter]] = {
    "id": ("string", lambda c: c.id), "clientId": ("string", lambda c: c.client_id),
    "service": ("string", lambda c: c.service_id), "terminator": ("string", lambda c: c.terminator_id),
    "createdAt": ("datetime", lambda c: _stamp(c.created)), "updatedAt": ("datetime", lambda c: _stamp(c.created)),
}


def render_circuits(ctx: Ctx, circuits: list) -> list[dict]:
    routers = names(ctx.store, "routers", [r for c in circuits for r in c.path])
    services = names(ctx.store, "services", [c.service_id for c in circuits])
    out = []
    for c in circuits:
        created = _stamp(c.created)
        detail: dict[str, Any] = {
            "id": c.id, "createdAt": created, "updatedAt": created, "tags": dict(c.tags),
            "_links": {"self": {"href": f"./circuits/{c.id}"},
                       "terminators": {"href": f"./circuits/{c.id}/terminators"},
                       "services": {"href": f"./circuits/{c.id}/services"}},
            "path": {"nodes": [ref("routers", r, routers.get(r, "")) for r in c.path],
                     "links": [ref("links", lid, lid) for lid in c.links] or None},
            # a service deleted under a live circuit, as upstream names it
            "service": ref("services", c.service_id, services.get(c.service_id, "<deleted>")),
            "terminator": ref("terminators", c.terminator_id, c.terminator_id),
        }
        if c.client_id:
            detail["clientId"] = c.client_id
        out.append(detail)
    return out


@op("GET", "/circuits", apis=FABRIC, op_id="listCircuits", tag="circuits", query=("limit", "offset", "filter"),
    perm=("ops", "read"))
async def list_circuits(ctx: Ctx):
    return _listing(ctx, CIRCUIT_SYMBOLS, _circuits(ctx), render_circuits)


@op("GET", "/circuits/{id}", apis=FABRIC, op_id="detailCircuit", tag="circuits", perm=("ops", "read"))
async def detail_circuit(ctx: Ctx):
    return _detail(ctx, "circuit", _circuits(ctx), render_circuits)
