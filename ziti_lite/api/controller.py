"""The controller as the request machinery sees it: ``Ctx.ctl``'s type, in the layer of ``Ctx``.

``Ctx.ctl`` used to be annotated as ``app.Controller``, which put every module that names
``Ctx`` into one loop of type-only imports with the top of the package. ``ApiController``
names the same attributes from here: those whose types live in this layer or below with their
types, the live objects of higher layers (the event bus, the routers, the OIDC provider, posture
state) as ``Any``; a module that uses one of those types the controller with its own folder's
Protocol (``EventsController``, ``presence.PresenceController``, ...), which mypy checks where
the controller is passed. ``app.Controller`` is checked against this Protocol where it builds a
``Ctx``.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..backup.schedule import Snapshotter
    from ..config import Settings
    from ..db.checkpoint import Checkpointer
    from ..db.store import Generation, Store
    from ..permissions import Need
    from .context import Ctx
    from .router import AuthLevel, Router


class ApiController(Protocol):
    settings: Settings
    store: Store
    activity: dict[str, str]
    state: dict[str, str]
    instance_id: str
    router: Router
    jobs: dict[str, Any]
    checkpointer: Checkpointer | None
    snapshots: Snapshotter | None
    ssl_context: ssl.SSLContext | None
    edge_ssl_context: ssl.SSLContext | None
    edge_sock: socket.socket | None
    router_states: dict[str, dict]
    router_lines: dict[str, str]
    ctrl_ssl_context: ssl.SSLContext | None
    ctrl_sock: socket.socket | None
    periodic: list[Callable[[Any], object]]
    session_rows: tuple[Generation, dict[str, Any]] | None
    extjwt_keys: dict[str, Any]
    oidc_verified: dict[str, dict]
    service_change_memory: dict[str, str]
    service_override_sigs: dict[str, str]
    traces: dict[str, dict]
    tls_contexts: list[ssl.SSLContext]
    cert_renewals: dict[str, int]
    # the live objects of higher layers: typed by the Protocols of the modules that use them
    edge_router: Any        # edge.router.EdgeRouter | None
    ctrl_server: Any        # ctrl.server.CtrlServer | None
    events: Any             # events.bus.Bus
    oidc: Any               # oidc.provider.Provider | None
    posture_states: dict[str, Any]   # identity id -> policy.posture_checks.PostureState

    async def authorize(self, ctx: Ctx, level: AuthLevel, need: Need = None) -> None: ...

    def __hash__(self) -> int: ...   # per-controller caches (functools.lru_cache) key on it
