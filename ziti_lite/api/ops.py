"""Registration of hand-written operations: ``@op("GET", "/summary")`` next to the handler."""

from __future__ import annotations

from typing import Any

from .router import Route

OPS: list[Route] = []


def op(method: str, path: str, *, apis: tuple[str, ...] = ("management",), auth: str = "admin",
       op_id: str = "", body: Any = None, status: int = 200, tag: str = "", response: Any = None,
       query: tuple[str, ...] = ()):
    def deco(fn):
        for api in apis:
            OPS.append(Route(api, method, path, fn, auth, op_id or fn.__name__, tag, body, response, status, query))
        return fn
    return deco


BOTH = ("management", "client")
