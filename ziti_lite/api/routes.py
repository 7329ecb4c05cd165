"""The generic routes of a Resource: list, create, detail, update, patch, delete as it declares them.

The whole route table (these for every resource, plus the ``@op`` ones) is ``wiring.load()``'s.
"""

from __future__ import annotations

import functools

from . import crud
from .router import Route


def camel_title(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.replace("-", " ").replace("_", " ").split())


def resource_routes(res) -> list[Route]:
    plural, single = camel_title(res.name), camel_title(res.entity)
    shapes = {
        "list": ("GET", f"/{res.name}", f"list{plural}", None, 200),
        "create": ("POST", f"/{res.name}", f"create{single}", res.create, 201),
        "detail": ("GET", f"/{res.name}/{{id}}", f"detail{single}", None, 200),
        "update": ("PUT", f"/{res.name}/{{id}}", f"update{single}", res.update, 200),
        "patch": ("PATCH", f"/{res.name}/{{id}}", f"patch{single}", res.patch, 200),
        "delete": ("DELETE", f"/{res.name}/{{id}}", f"delete{single}", None, 200),
    }
    out = []
    for opname in res.ops:
        method, path, op_id, body, status = shapes[opname]
        for api in res.apis:
            out.append(Route(api, method, path, functools.partial(crud.HANDLERS[opname], res),
                             res.level(opname, api), op_id, res.name, body,
                             None, status, ("limit", "offset", "filter") if opname == "list" else (), res,
                             res.need(opname, api)))
    return out
