"""A segment trie from (api, path) to the handlers of each method.

Starlette's router tries every route's regex in turn; with ~250 operations that scan costs as
much as a point read, so ziti-lite resolves a path in one walk of a trie (a dict per segment).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..permissions import Need

if TYPE_CHECKING:
    from .context import Ctx

# who may call a route (app.Controller.authorize): anyone; any valid API session, even one that
# still owes a secondary factor (MFA, ext-jwt); a complete session; a complete session whose
# identity is an admin or holds a permission that covers the route's ``perm`` (permissions.py)
AuthLevel = Literal["public", "partial", "session", "admin"]
AUTH_LEVELS: tuple[AuthLevel, ...] = get_args(AuthLevel)
APIS = ("management", "client", "fabric")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@dataclass(eq=False)
class Route:
    api: str                          # "management" | "client" | "fabric"
    method: str
    path: str                         # template relative to the API base, e.g. /identities/{id}
    handler: Callable[[Ctx], Awaitable[Any]]
    auth: AuthLevel = "admin"
    op_id: str = ""
    tag: str = ""
    body: Any = None                  # msgspec Struct type, or a media type string
    response: Any = None              # schema name for the spec
    status: int = 200
    query: tuple[str, ...] = ()       # documented query parameters
    resource: Any = None
    # what the route needs at level "admin" (OpenZiti 2.0's permission model): (entity, action),
    # allowed by isAdmin, admin_readonly for reads, the entity or the entity.action permission;
    # None: admins only (the default, so an undeclared route stays closed)
    perm: Need = None

    def __post_init__(self) -> None:
        # checked when the route is declared (at import), never first at request time: an unknown
        # level must not silently give a route some other protection
        if self.auth not in AUTH_LEVELS:
            raise ValueError(f"{self.method} {self.path}: auth level {self.auth!r} is not one of {AUTH_LEVELS}")
        if self.api not in APIS:
            raise ValueError(f"{self.method} {self.path}: api {self.api!r} is not one of {APIS}")
        if self.method not in METHODS:
            raise ValueError(f"{self.path}: method {self.method!r} is not one of {METHODS}")
        if self.perm is not None and self.auth != "admin":
            raise ValueError(f"{self.method} {self.path}: a permission ({self.perm}) needs the admin level")


@dataclass(eq=False)
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    param: _Node | None = None
    param_name: str = ""
    methods: dict[str, Route] = field(default_factory=dict)


class Router:
    def __init__(self) -> None:
        self.roots: dict[str, _Node] = {}
        self.routes: list[Route] = []

    def add(self, route: Route) -> Route:
        node = self.roots.setdefault(route.api, _Node())
        for seg in _split(route.path):
            if seg.startswith("{") and seg.endswith("}"):
                if node.param is None:
                    node.param = _Node()
                    node.param_name = seg[1:-1]
                assert node.param_name == seg[1:-1], f"conflicting params at {route.path}"
                node = node.param
            else:
                node = node.children.setdefault(seg, _Node())
        assert route.method not in node.methods, f"duplicate {route.method} {route.api} {route.path}"
        node.methods[route.method] = route
        self.routes.append(route)
        return route

    def match(self, api: str, path: str) -> tuple[dict[str, Route] | None, dict[str, str]]:
        node = self.roots.get(api)
        params: dict[str, str] = {}
        if node is None:
            return None, params
        for seg in _split(path):
            nxt = node.children.get(seg)
            if nxt is None:
                if node.param is None or not seg:
                    return None, params
                params[node.param_name] = seg
                nxt = node.param
            node = nxt
        return (node.methods or None), params


def _split(path: str) -> list[str]:
    path = path.strip("/")
    return path.split("/") if path else []
