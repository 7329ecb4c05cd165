"""What a router reports of itself over its control channel, kept on its row for the API: its
network interfaces and its control-channel listeners (OpenZiti 2.0).

A v2 router sends UpdateRouterInterfaces (1052) when its interfaces change and at least every
so often, once the controller names a version of 1.6.3 or later in its hello; it waits for a
Result. Its hello carries the control-channel listeners it advertises (header 1003). Each is
written to the router's row only when it differs from what is stored, as upstream does:
``interfaces`` in the API's shape (the flags read as ``isUp``, ``isLoopback``, ...), shown by the
router's details; a tunneler-enabled edge router's identity (same id) gets the same interfaces;
``ctrlChanListeners`` replaced by what the hello advertised (none: cleared), as upstream's accept
does on every connection.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from .. import clock
from ..channel.wire import Message
from . import messages, pb
from .messages import C
from .part import Handler, Part

if TYPE_CHECKING:
    from .channel import RouterChannel
    from .hello import Hello

log = logging.getLogger("ziti_lite.ctrl")

# Go's net.Flags bits, as a router reports them
FLAGS = {"isUp": 1 << 0, "isBroadcast": 1 << 1, "isLoopback": 1 << 2, "isMulticast": 1 << 4, "isRunning": 1 << 5}


def interfaces(reported: list[dict]) -> list[dict]:
    """The API's ``interface`` of each reported one, in the order upstream's store reads them
    back (keyed ``<position>.<name>``, so sorted as text: ``10.x`` before ``2.y``)."""
    keyed = sorted((f"{i}.{x['name']}", x) for i, x in enumerate(reported))
    return [{"name": x["name"], "hardwareAddress": x["hardwareAddress"], "mtu": x["mtu"], "index": x["index"],
             **{name: bool(x["flags"] & bit) for name, bit in FLAGS.items()},
             "addresses": list(x["addresses"]) or None} for _, x in keyed]


def ctrl_listeners(header: bytes | None) -> dict[str, list[str]] | None:
    """The listeners a hello advertised (address -> groups), None without any."""
    if not header:
        return None
    found = pb.decode(messages.CTRL_CHAN_LISTENERS, header)["listeners"]
    return {x["address"]: list(x["groups"]) for x in found} or None


def _same_listeners(a: dict[str, list[str]] | None, b: dict[str, list[str]] | None) -> bool:
    a, b = a or {}, b or {}
    return a.keys() == b.keys() and all(sorted(a[k]) == sorted(b[k]) for k in a)


class Reported(Part):
    def handlers(self) -> dict[int, Handler]:
        return {C.UPDATE_ROUTER_INTERFACES: self._interfaces}

    def hello(self, ch: RouterChannel, said: Hello) -> None:
        try:
            advertised = ctrl_listeners(said.ctrl_listeners)
        except pb.PbError as e:   # upstream logs it and keeps the router
            log.warning("control channel %s: unreadable ctrl channel listeners (%s)", ch.label, e)
            return
        store = self.server.ctl.store
        with store.write():
            stored = store.value("SELECT ctrl_chan_listeners FROM routers WHERE id = ?", (ch.router_id,))
            if _same_listeners(json.loads(stored) if stored else None, advertised):
                return
            store.execute("UPDATE routers SET ctrl_chan_listeners = ?, updated_at = ? WHERE id = ?",
                          (json.dumps(advertised) if advertised else None, clock.stamp(), ch.router_id))

    def _interfaces(self, ch: RouterChannel, m: Message) -> None:
        shaped = json.dumps(interfaces(pb.decode(messages.ROUTER_INTERFACES_UPDATE, m.body)["interfaces"]))
        store = self.server.ctl.store
        with store.write():
            row = store.one("SELECT interfaces, is_edge, is_tunneler_enabled FROM routers WHERE id = ?",
                            (ch.router_id,))
            if row is not None and row["interfaces"] != shaped:
                now = clock.stamp()
                store.execute("UPDATE routers SET interfaces = ?, updated_at = ? WHERE id = ?",
                              (shaped, now, ch.router_id))
                if row["is_edge"] and row["is_tunneler_enabled"]:   # its Router identity (tunneler.py)
                    store.execute("UPDATE identities SET interfaces = ?, updated_at = ? WHERE id = ?",
                                  (shaped, now, ch.router_id))
        ch.result(m, True, "success")
