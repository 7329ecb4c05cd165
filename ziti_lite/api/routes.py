"""The route table: every Resource's generic operations plus the hand-written ones."""

from __future__ import annotations

import functools
import importlib

from . import crud
from .ops import OPS
from .router import Route

# modules holding @op handlers; importing them registers their operations
SPECIAL_MODULES = (
    "ziti_lite.api.informational",
    "ziti_lite.api.authentication",
    "ziti_lite.api.database",
    "ziti_lite.resources.identities",
    "ziti_lite.api.mfa",
    "ziti_lite.api.enrollment",
    "ziti_lite.auth.extjwt",
    "ziti_lite.policy.relations",
    "ziti_lite.policy.advice",
    "ziti_lite.policy.roles",
    "ziti_lite.policy.service_configs",
    "ziti_lite.client.services",
    "ziti_lite.client.sessions",
    "ziti_lite.client.caller",
    "ziti_lite.client.posture",
    "ziti_lite.client.changes",
)
OPTIONAL_MODULES: tuple[str, ...] = ()


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
                             res.level(opname), op_id, res.name, body,
                             None, status, ("limit", "offset", "filter") if opname == "list" else (), res))
    return out


def mount_all(ctl) -> None:
    from ..resources import registry
    for name in SPECIAL_MODULES + OPTIONAL_MODULES:
        importlib.import_module(name)
    for res in registry():
        for r in resource_routes(res):
            ctl.router.add(r)
    for r in OPS:
        ctl.router.add(r)
