"""The network interfaces a router reports (``UpdateRouterInterfaces``), kept on its row.

Why a part of its own: routers of v1.6.3 and later report their interfaces (at start, on a
change, and once a day) to a controller that names itself v1.6.3 or later in its hello, and wait
for the answer; ziti-lite names the 2.0 line it serves, so v1.6 and v2.0 routers send them. The
report replaces the router's ``interfaces`` column (a JSON list in upstream's stored form:
``name``, ``hardwareAddress``, ``mtu``, ``index``, ``flags``, ``addresses``; the API derives
``isUp`` and the other booleans from ``flags``) and is answered with a success result, as
upstream's handler does. A router that gets no answer retries every minute.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from . import messages, pb
from .messages import C
from .part import Handler, Part

if TYPE_CHECKING:  # pragma: no cover
    from ..channel.wire import Message
    from .channel import RouterChannel

log = logging.getLogger("ziti_lite.ctrl")

MAX_INTERFACES = 256   # a bound on what one report may store (a host has a handful)


def stored(report: dict) -> list[dict]:
    """The interfaces of a decoded ``RouterInterfacesUpdate`` in upstream's stored form."""
    out = []
    for i in (report.get("interfaces") or [])[:MAX_INTERFACES]:
        out.append({"name": i.get("name", ""), "hardwareAddress": i.get("hardwareAddress", ""),
                    "mtu": i.get("mtu", 0), "index": i.get("index", 0), "flags": i.get("flags", 0),
                    "addresses": list(i.get("addresses") or [])})
    return out


class Interfaces(Part):
    def handlers(self) -> dict[int, Handler]:
        return {C.UPDATE_ROUTER_INTERFACES: self._update}

    def _update(self, ch: RouterChannel, m: Message) -> None:
        report = pb.decode(messages.ROUTER_INTERFACES_UPDATE, m.body)
        store = self.server.ctl.store
        with store.write():
            store.execute("UPDATE routers SET interfaces = ? WHERE id = ?",
                          (json.dumps(stored(report), separators=(",", ":")), ch.router_id))
        log.debug("control channel %s: %d interfaces reported", ch.label, len(report.get("interfaces") or []))
        ch.result(m, True, "success")
