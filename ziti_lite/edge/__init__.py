"""The embedded edge router (``ziti-lite serve --edge-port``): its channels, dial path and relay,
and its entity in the network (the wire format, checks and strategy it shares with the control
channel are in ``channel/`` and ``routing/``). ``start``/``stop`` run in the app lifespan;
the router runs on a thread and loop of its own (``thread.py``) unless the database is not a file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import reports
from ..routing import presence
from .entity import ensure_router
from .router import EdgeRouter
from .thread import RouterThread, can_run_apart

if TYPE_CHECKING:
    from .controller import EdgeController


async def start(ctl: EdgeController) -> EdgeRouter | None:
    """Start the router when the settings ask for it and TLS is configured (a real server)."""
    s = ctl.settings
    if (not s.edge_port and ctl.edge_sock is None) or ctl.edge_ssl_context is None:
        return None
    rid = ensure_router(ctl, s.router_name)
    context = ctl.edge_ssl_context

    def make(side: EdgeController) -> EdgeRouter:
        return EdgeRouter(side, rid, s.router_name, s.host, s.edge_port, s.public_host, context)
    try:
        if can_run_apart(ctl):
            apart = RouterThread()
            router = await apart.start(ctl, make)
            router.apart = apart
        else:
            router = make(ctl)
            await router.start(sock=ctl.edge_sock)
    except OSError as e:
        raise SystemExit(f"ziti-lite: the edge router cannot listen on {s.host}:{s.edge_port}: {e.strerror or e}"
                         " (choose another --edge-port, or 0 for no router)") from None
    ctl.edge_router = router
    presence.online(ctl, rid, router.state())
    reports.router_online(ctl.events, rid, True)
    return router


async def stop(ctl: EdgeController) -> None:
    router = ctl.edge_router
    if router is None:
        return
    if router.apart is not None:
        await router.apart.stop(router)
    else:
        await router.stop()
    presence.offline(ctl, router.router_id)
    reports.router_online(ctl.events, router.router_id, False)
    ctl.edge_router = None
