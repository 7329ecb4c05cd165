"""How a Resource's rows become their wire objects: the generated renderer of each Resource
(``_renderer``: its fields, ``_links`` as JSON text, checked against the plain
``_reference_render`` by ``tests/test_hot_path.py``), the render hooks, and a list page's rows.
Out of ``crud.py``, which keeps the handlers, the registries and the row mapper.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import msgspec

from . import envelope as env
from .context import Ctx
from .resource import Render, Resource

_jenc = msgspec.json.Encoder()
Raw = msgspec.Raw


_PLAIN, _BOOL, _RAW, _PLAIN_NULL, _RAW_NULL = 0, 1, 2, 3, 4
_EMPTY_JSON = ("[]", "{}", '""', "null")


def _render_plan(res: Resource) -> tuple:
    """(wire name, column, conversion) of each output field, worked out once per Resource."""
    plan = res.__dict__.get("_render_plan")
    if plan is None or plan[0] is not res.fields:
        conv = {"bool": _BOOL, "json": _RAW, "set": _RAW, "map": _RAW}
        nulls = {_PLAIN: _PLAIN_NULL, _RAW: _RAW_NULL}

        def of(f) -> int:
            c = conv.get(f.kind, _PLAIN)
            return nulls.get(c, c) if f.empty_null else c
        plan = res.__dict__["_render_plan"] = (
            res.fields, tuple((f.name, f.column, of(f)) for f in res.fields if f.output))
    return plan[1]


def render_fields(res: Resource, row: dict) -> dict:
    """The detail of a row from the Resource's declarations alone (base fields, links, fields)."""
    out = env.base(row, res.name, res.links)
    get = row.get
    for name, column, conv in _render_plan(res):
        v = get(column)
        if conv == _BOOL:
            v = bool(v)
        elif conv == _RAW and v is not None:
            v = Raw(v)
        elif conv == _RAW_NULL:
            v = None if v is None or v in _EMPTY_JSON else Raw(v)
        elif conv == _PLAIN_NULL and v == "":
            v = None
        out[name] = v
    return out


def _renderer(res: Resource):
    """``render_fields`` and the row links unrolled for one Resource: a function with one dict
    display, generated from its (trusted, static) declarations; a list page calls it for every
    row and it runs in ~60 % of the loop's time. ``_links`` leaves as JSON text made by one
    ``join`` (eleven small dicts a row for the encoder otherwise) whenever the ids in it need
    no escaping, which the ids this controller makes never do (:func:`add_link` for a hook that
    adds one). Checked against the reference loop before it is used."""
    cached = res.__dict__.get("_renderer")
    if cached is not None and cached[0] is res.fields and cached[1] is res.links and cached[2] is res.row_links:
        return cached[3]
    prefix = f"./{res.name}/"
    template = ",".join([f'{{"self":{{"href":"{prefix}%s"}}'] +
                        [f'"{sub}":{{"href":"{prefix}%s/{sub}"}}' for sub in res.links])
    lines = ["def _render(row):", "    get = row.get", "    id = row['id']",
             "    if id.isalnum() or _safe(id):",
             "        text = id.join(_T)"]
    ns: dict[str, Any] = {"Raw": Raw, "_E": _EMPTY_JSON, "_T": template.split("%s"), "_safe": _safe_id,
                          "_slow": functools.partial(_reference_render, res)}
    for i, (link, column, target) in enumerate(res.row_links):
        ns[f"_R{i}"] = f',"{link}":{{"href":"./{target}/%s"}}'
        lines += [f"        if v := get({column!r}):",
                  "            if not _safe(v):",
                  "                return _slow(row)",
                  f"            text += _R{i} % v"]
    lines += ["        links = Raw(text + '}')",
              "    else:",
              "        return _slow(row)",
              "    return {",
              "        'id': id, 'createdAt': row['created_at'], 'updatedAt': row['updated_at'],",
              "        'tags': Raw(row['tags']), '_links': links,"]
    for name, column, conv in _render_plan(res):
        expr = (f"bool(get({column!r}))" if conv == _BOOL else
                f"(None if (v := get({column!r})) is None else Raw(v))" if conv == _RAW else
                f"(None if (v := get({column!r})) is None or v in _E else Raw(v))" if conv == _RAW_NULL else
                f"(None if (v := get({column!r})) == '' else v)" if conv == _PLAIN_NULL else f"get({column!r})")
        lines.append(f"        {name!r}: {expr},")
    lines.append("    }")
    exec("\n".join(lines), ns)  # noqa: S102 - source built from the Resource's own declarations
    fn = ns["_render"]
    sample: dict[str, Any] = {"id": "id0", "created_at": "c", "updated_at": "u", "tags": "{}"}
    for f in res.fields:
        sample[f.column] = 1 if f.kind in ("bool", "int") else ("[]" if f.kind in ("json", "set", "map") else "v")
    for _, column, _ in res.row_links:
        sample[column] = "ref0"
    if _jenc.encode(fn(sample)) != _jenc.encode(_reference_render(res, sample)):
        fn = functools.partial(_reference_render, res)  # never expected; the loop stays the reference
    res.__dict__["_renderer"] = (res.fields, res.links, res.row_links, fn)
    return fn


_SAFE_ID = re.compile(r"[A-Za-z0-9._~:@!$&'()*+,;=-]*")


def _safe_id(text: Any) -> bool:
    """Whether ``text`` can stand in a JSON string (and a link) as it is."""
    return isinstance(text, str) and (text.isalnum() or _SAFE_ID.fullmatch(text) is not None)


def _reference_render(res: Resource, row: dict) -> dict:
    """The reference: ``render_fields`` and the row links, one dict per link."""
    out = render_fields(res, row)
    for link, column, target in res.row_links:
        if row.get(column):
            out["_links"][link] = {"href": f"./{target}/{row[column]}"}
    return out


def add_link(out: dict, name: str, href: str) -> None:
    """Add a link to a rendered detail whose ``_links`` may be JSON text (see ``_renderer``)."""
    links = out["_links"]
    if isinstance(links, Raw):
        links = out["_links"] = _decode_links(links)
    links[name] = {"href": href}


_decode_links = msgspec.json.Decoder(dict).decode


def render_declared(ctx: Ctx, res: Resource, row: dict) -> dict:
    """The detail of a row from its declarations (fields, references, constants), without the
    resource's render hook (what it computes for the caller)."""
    return render_rows(ctx, res, [row], declared_only=True)[0]


def render(ctx: Ctx, res: Resource, row: dict, hook: Render | None = None) -> dict:
    """The detail of a row: its declarations, then ``hook`` (a list page's, from its prefetcher)
    or the resource's render hook."""
    return render_rows(ctx, res, [row], hook)[0]


def render_rows(ctx: Ctx, res: Resource, rows: list[dict], hook: Render | None = None,
                declared_only: bool = False) -> list[dict]:
    """``render`` of every row of a page (``declared_only``: ``render_declared``), with what is
    the same for all of them looked up once."""
    fn = _renderer(res)
    hook = None if declared_only else (hook or res.render)
    refs, constants, store = res.refs, res.constants, ctx.store
    out = []
    for row in rows:
        d = fn(row)
        for ref in refs:
            d[ref.name] = ref.render(store, row)
        if constants:
            d.update(constants)
        if hook is not None:
            hook(ctx, row, d)
        out.append(d)
    return out
