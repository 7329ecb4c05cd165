"""Registration of hand-written operations: ``@op("GET", "/summary")`` next to the handler."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..errors import CouldNotValidate
from ..permissions import Need
from .context import Ctx
from .router import AuthLevel, Route

if TYPE_CHECKING:
    from .controller import ApiController

OPS: list[Route] = []
Handler = TypeVar("Handler", bound=Callable[[Ctx], Awaitable[Any]])


def op(method: str, path: str, *, apis: tuple[str, ...] = ("management",), auth: AuthLevel = "admin",
       op_id: str = "", body: Any = None, status: int = 200, tag: str = "", response: Any = None,
       query: tuple[str, ...] = (), perm: Need = None) -> Callable[[Handler], Handler]:
    """Declare ``fn(ctx) -> Response`` as the handler of ``method path`` on each of ``apis``
    (the route is made, and its auth level checked, right here; ``wiring.load`` mounts it).

    ``perm`` is the (entity, action) the operation needs (``permissions.py``); without it an
    admin-level route is for admins only. On the management and fabric APIs a route that names a
    permission is at the admin level whatever ``auth`` says (an operation shared with the client
    API, such as ``/sessions``, is the caller's own there and an operator's here)."""
    def deco(fn: Handler) -> Handler:
        for api in apis:
            level: AuthLevel = "admin" if perm is not None and api != "client" else auth
            OPS.append(Route(api, method, path, fn, level, op_id or fn.__name__, tag, body, response, status, query,
                             perm=perm if level == "admin" else None))
        return fn
    return deco


BOTH = ("management", "client")


def not_implemented(method: str, path: str, *, apis: tuple[str, ...], auth: AuthLevel, op_id: str, name: str,
                    tag: str, body: Any = None, body_name: str = "", query: tuple[str, ...] = ()) -> None:
    """Declare an operation upstream's spec has and its controller does not implement: after the
    caller's session is checked (``auth``) and the body decoded as the spec's ``body`` struct (a
    refusal is the usual 400; no body at all names the spec's ``body_name``), it answers 501 with
    go-swagger's message naming ``name`` (``package.OperationId``) as a bare JSON string, not an
    envelope, as upstream's API does."""
    message = f'"operation {name} has not yet been implemented"'.encode()

    async def handler(ctx: Ctx) -> Response:
        if isinstance(body, type):
            if body_name and not (await ctx.body()).strip():
                # upstream's binding says so with HTTP 602 (a bug: a client waits for a 4xx)
                raise CouldNotValidate(body_name, f"{body_name} in body is required", "")
            await ctx.json(body)
        return Response(message, status_code=501, media_type="application/json")
    handler.__name__ = handler.__qualname__ = op_id
    handler.__module__ = _caller_module()
    op(method, path, apis=apis, auth=auth, op_id=op_id, tag=tag, body=body, query=query)(handler)


def _caller_module() -> str:
    """The module that declared a generated handler (``ziti-lite routes`` names it; the wiring
    test checks it is listed)."""
    return sys._getframe(2).f_globals.get("__name__", __name__)


# functions called as fn(ctx, response) after every POST, PUT, PATCH and DELETE that answered with
# a 2xx, once its handler has returned (its writes committed): the audit trail's seam
AfterChange: TypeAlias = Callable[[Ctx, Response], None]
AFTER_CHANGE: list[AfterChange] = []
F = TypeVar("F", bound=AfterChange)


def after_change(fn: F) -> F:
    AFTER_CHANGE.append(fn)
    return fn


# WebSocket paths (outside the two APIs) -> fn(ctl, scope, receive, send), an ASGI WebSocket
# application (``/fabric/v1/ws-api``: events/wsapi.py)
WebSocketApp: TypeAlias = Callable[["ApiController", Scope, Receive, Send], Awaitable[None]]
WEBSOCKETS: dict[str, WebSocketApp] = {}
W = TypeVar("W", bound=WebSocketApp)


def websocket(path: str) -> Callable[[W], W]:
    def deco(fn: W) -> W:
        WEBSOCKETS[path] = fn
        return fn
    return deco
