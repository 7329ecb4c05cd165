"""Router presence: which routers are online, what they carry, read and written in one place.

Two kinds of router come and go: the embedded router (``edge/``) and real routers over the
control channel (``ctrl/``). Each publishes its state here when it comes online (``online``)
and withdraws it when it goes (``offline``): the API's live state (``Controller.router_states``:
``isOnline``, hostname, protocols, version) and the database's ``online_routers`` set (the
``isOnline`` filter and terminator events read it). The router event itself is the caller's
(``events/reports.py`` sits above this layer).

Whatever the API shows of routers (an identity's ``hasEdgeRouterConnection``, a session's route
path, the fabric API's links, circuits and listeners) is read through the functions below, so
the resources, the client API and the fabric API never reach into either router's objects; the
Protocols name what they read of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..db.store import Store


class Embedded(Protocol):
    """The embedded router as presence reads it (``edge.router.EdgeRouter``)."""
    @property
    def router_id(self) -> str: ...

    def has_connection(self, identity_id: str) -> bool: ...

    def carries(self, session_id: str) -> bool: ...


class RouterLine(Protocol):
    """A real router's accepted channel (``ctrl.channel.RouterChannel``)."""
    @property
    def name(self) -> str: ...

    @property
    def listeners(self) -> list[dict]: ...


class LinkTable(Protocol):
    @property
    def table(self) -> Mapping[str, Any]: ...


class CircuitTable(Protocol):
    @property
    def live(self) -> Mapping[str, Any]: ...

    def carrying(self, session_id: str) -> list[str]: ...


class RealRouters(Protocol):
    """The control channel as presence reads it (``ctrl.server.CtrlServer``)."""
    @property
    def routers(self) -> Mapping[str, RouterLine]: ...

    @property
    def links(self) -> LinkTable: ...

    @property
    def circuits(self) -> CircuitTable: ...

    def has_connection(self, identity_id: str) -> bool: ...


class StatesController(Protocol):
    """What a router publishes its presence into (the controller, or the embedded router's
    thread's view of it, ``edge.thread.RouterSide``)."""
    router_states: dict[str, dict]
    store: Store


class PresenceController(StatesController, Protocol):
    """The controller as presence's readers see it (see ``lifecycle.contexts.LifecycleController``)."""
    @property
    def edge_router(self) -> Embedded | None: ...

    @property
    def ctrl_server(self) -> RealRouters | None: ...


# ---------------------------------------------------------------- writes (the routers)
def online(ctl: StatesController, router_id: str, state: dict) -> None:
    """A router came online with this live state (``isOnline``, hostname, protocols, version)."""
    ctl.router_states[router_id] = state
    ctl.store.online_routers.add(router_id)


def offline(ctl: StatesController, router_id: str) -> None:
    """A router went away (closed, timed out, stopped, replaced)."""
    ctl.router_states.pop(router_id, None)
    ctl.store.online_routers.discard(router_id)


# ---------------------------------------------------------------- reads (the API)
def state(ctl: StatesController, router_id: str) -> dict:
    """The live state of an online router, ``{}`` for any other."""
    return ctl.router_states.get(router_id) or {}


def is_online(ctl: StatesController, router_id: str) -> bool:
    return bool(state(ctl, router_id).get("isOnline"))


def has_connection(ctl: PresenceController, identity_id: str) -> bool:
    """Whether an SDK of the identity is connected to the embedded router or an online real router."""
    router, real = ctl.edge_router, ctl.ctrl_server
    return ((router is not None and router.has_connection(identity_id))
            or (real is not None and real.has_connection(identity_id)))


def route_path(ctl: PresenceController, session_id: str) -> list[str]:
    """Router ids of a session's live circuits: the embedded router, when one runs under it, and
    the real routers whose circuits run under it."""
    router, real = ctl.edge_router, ctl.ctrl_server
    path = [router.router_id] if router is not None and router.carries(session_id) else []
    if real is not None:
        path += real.circuits.carrying(session_id)
    return path


def listeners(ctl: PresenceController, router_id: str) -> list[dict]:
    """The link listeners a connected real router declared in its hello."""
    real = ctl.ctrl_server
    line = real.routers.get(router_id) if real is not None else None
    return list(line.listeners) if line is not None else []


def line_name(ctl: PresenceController, router_id: str) -> str | None:
    """The name a connected real router had when it said hello (it may have been deleted since)."""
    real = ctl.ctrl_server
    line = real.routers.get(router_id) if real is not None else None
    return line.name if line is not None else None


def links(ctl: PresenceController) -> Mapping[str, Any]:
    """The control channel's link table (link id -> ``ctrl.links.Link``)."""
    real = ctl.ctrl_server
    return real.links.table if real is not None else {}


def circuits(ctl: PresenceController) -> Mapping[str, Any]:
    """The control channel's live circuits (circuit id -> ``ctrl.circuits.Circuit``)."""
    real = ctl.ctrl_server
    return real.circuits.live if real is not None else {}
