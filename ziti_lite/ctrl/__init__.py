"""The control channel for real OpenZiti routers (``ziti-lite serve --ctrl-port``): routers
enrolled through the API connect here, come online, host terminators and carry circuits.
``start``/``stop`` run in the app lifespan, after the embedded router and before it stops."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..routing import presence
from .server import CtrlServer

if TYPE_CHECKING:
    from .server import CtrlController


async def start(ctl: CtrlController) -> CtrlServer | None:
    """Listen when the settings ask for it and TLS is configured (a real server)."""
    s = ctl.settings
    if (not s.ctrl_port and ctl.ctrl_sock is None) or ctl.ctrl_ssl_context is None:
        return None
    server = CtrlServer(ctl, s.host, s.ctrl_port, s.public_host, ctl.ctrl_ssl_context,
                        timeout=s.ctrl_heartbeat_timeout)
    try:
        await server.start(sock=ctl.ctrl_sock)
    except OSError as e:
        raise SystemExit(f"ziti-lite: the control channel cannot listen on {s.host}:{s.ctrl_port}:"
                         f" {e.strerror or e} (choose another --ctrl-port, or 0 for none)") from None
    ctl.ctrl_server = server
    return server


async def stop(ctl: CtrlController) -> None:
    server = ctl.ctrl_server
    if server is None:
        return
    await server.stop()
    for rid in list(server.routers):
        presence.offline(ctl, rid)
    ctl.ctrl_server = None
