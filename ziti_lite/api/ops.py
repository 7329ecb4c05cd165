"""Registration of hand-written operations: ``@op("GET", "/summary")`` next to the handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .router import AuthLevel, Route

OPS: list[Route] = []
Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


def op(method: str, path: str, *, apis: tuple[str, ...] = ("management",), auth: AuthLevel = "admin",
       op_id: str = "", body: Any = None, status: int = 200, tag: str = "", response: Any = None,
       query: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
    """Declare ``fn(ctx) -> Response`` as the handler of ``method path`` on each of ``apis``
    (the route is made, and its auth level checked, right here; ``wiring.load`` mounts it)."""
    def deco(fn: Handler) -> Handler:
        for api in apis:
            OPS.append(Route(api, method, path, fn, auth, op_id or fn.__name__, tag, body, response, status, query))
        return fn
    return deco


BOTH = ("management", "client")


# functions called as fn(ctx, response) after every POST, PUT, PATCH and DELETE that answered with
# a 2xx, once its handler has returned (its writes committed): the audit trail's seam
AFTER_CHANGE: list[Callable[[Any, Any], None]] = []


def after_change(fn: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    AFTER_CHANGE.append(fn)
    return fn


# WebSocket paths (outside the two APIs) -> fn(ctl, scope, receive, send), an ASGI WebSocket
# application (``/fabric/v1/ws-api``: events/wsapi.py)
WEBSOCKETS: dict[str, Callable[..., Awaitable[None]]] = {}


def websocket(path: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        WEBSOCKETS[path] = fn
        return fn
    return deco
