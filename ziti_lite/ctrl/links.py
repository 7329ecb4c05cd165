"""Router-to-router links and the paths circuits take over them, as upstream v1.3.3 keeps them.

Routers build links themselves from what the controller tells them. A router that declares the
LinkManagement capability in its hello (header 11) is sent ``PeerStateChanges``: every other
online router with its link listeners (header 10 of its hello) when it comes online, and every
router that comes (Healthy), goes (Unhealthy) or is deleted (Removed) afterwards. Routers dial the
listeners, the listening side asks the controller to ``VerifyRouter`` the dialer's certificate,
and the dialer reports the link (``RouterLinks`` for links it holds, ``LinkConnected`` when a
pending one connects). A link goes with a ``LinkFault`` or with either router.

Paths follow upstream's cost model: Dijkstra over the links of online routers, each hop costing
the link's cost (static cost 1 plus the latencies in milliseconds both ends report in their
metrics: mean link latency and queue time) plus the next router's cost (at least upstream's
minimum router cost, 10); a router with ``noTraversal`` is never a transit hop, only an end.
"""

from __future__ import annotations

import heapq
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..channel.wire import Message
from . import messages, pb
from .messages import C
from .part import Handler, Part

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .hello import Hello
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

STATIC_LINK_COST = 1
MIN_ROUTER_COST = 10


@dataclass(slots=True)
class Link:
    id: str
    src: str                  # the router that dialed it and reported it
    dst: str                  # the router whose listener it reached
    protocol: str
    dial_address: str
    iteration: int = 0
    state: str = "Connected"  # upstream's modes: Pending, Connected
    static_cost: int = STATIC_LINK_COST
    created: float = field(default_factory=time.time)
    src_latency: int = 0      # ns, from the routers' metrics (link latency + queue time), as upstream
    dst_latency: int = 0

    @property
    def cost(self) -> int:
        """Upstream's link cost: the static cost plus both ends' latencies in milliseconds."""
        return self.static_cost + self.src_latency // 1_000_000 + self.dst_latency // 1_000_000


class Links(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self.table: dict[str, Link] = {}
        self.capable: set[str] = set()          # routers that manage links (LinkManagement)

    def handlers(self) -> dict[int, Handler]:
        return {C.ROUTER_LINKS: self._router_links, C.LINK_CONNECTED: self._link_connected,
                C.VERIFY_ROUTER: self._verify_router, C.METRICS: self._metrics}

    # ------------------------------------------------------------------ peers
    def hello(self, ch: RouterChannel, said: Hello) -> None:
        """Note whether the router manages links: its hello's metadata says so (v1), a v2 router
        always does (its metadata header is gone from the hello)."""
        raw = said.metadata
        caps: list[int] = [messages.CAP_LINK_MANAGEMENT] if said.new_headers else []
        if raw:
            try:
                caps = pb.decode(messages.ROUTER_METADATA, raw)["capabilities"]
            except pb.PbError:
                caps = []
        assert ch.router_id is not None
        if messages.CAP_LINK_MANAGEMENT in caps:
            self.capable.add(ch.router_id)
        else:
            self.capable.discard(ch.router_id)

    def _change(self, rid: str, state: int) -> dict:
        ch = self.server.routers.get(rid)
        if state != messages.PEER_HEALTHY or ch is None:
            return {"id": rid, "state": state}
        return {"id": rid, "version": ch.version.split("|")[0], "state": state, "listeners": ch.listeners}

    def _send(self, to: str, changes: list[dict]) -> None:
        ch = self.server.routers.get(to)
        if ch is not None and ch.ready and to in self.capable and changes:
            ch.send(C.PEER_STATE_CHANGES, {}, pb.encode(messages.PEER_STATE_CHANGES, {"changes": changes}))

    def router_ready(self, ch: RouterChannel) -> None:
        """Tell the new router of its peers and its peers of it."""
        rid = ch.router_id
        assert rid is not None
        others = [r for r, c in self.server.routers.items() if r != rid and c.ready]
        self._send(rid, [self._change(r, messages.PEER_HEALTHY) for r in others])
        for other in others:
            self._send(other, [self._change(rid, messages.PEER_HEALTHY)])

    def router_lost(self, router_id: str, removed: bool) -> None:
        rid = router_id
        for lid in [lid for lid, link in self.table.items() if rid in (link.src, link.dst)]:
            self._drop(lid, "router gone")
        self.capable.discard(rid)
        state = messages.PEER_REMOVED if removed else messages.PEER_UNHEALTHY
        for other, c in self.server.routers.items():
            if other != rid and c.ready:
                self._send(other, [self._change(rid, state)])

    # ------------------------------------------------------------------ the link table
    def _router_links(self, ch: RouterChannel, m: Message) -> None:
        for item in pb.decode(messages.ROUTER_LINKS, m.body)["links"]:
            self.reported(ch, item["id"], item["destRouterId"], item["linkProtocol"], item["dialAddress"],
                          item["iteration"])

    def reported(self, ch: RouterChannel, lid: str, dst: str, protocol: str, dial_address: str,
                 iteration: int) -> None:
        """A link the router holds: kept when both ends are online routers, else refused (logged)."""
        src = ch.router_id
        assert src is not None
        if not lid or dst == src or dst not in self.server.routers:
            log.warning("router %s: link %s to %s ignored (unknown or offline router)", ch.label, lid, dst or "?")
            return
        known = self.table.get(lid)
        if known is not None and {known.src, known.dst} != {src, dst}:
            log.warning("router %s: link id %s already names a link between other routers", ch.label, lid)
            return
        if known is None:
            self.table[lid] = Link(lid, src, dst, protocol, dial_address, iteration)
            log.info("link %s: %s -> %s (%s)", lid, ch.name or src, self._name(dst), protocol)
        else:
            known.iteration, known.state = max(known.iteration, iteration), "Connected"

    def _link_connected(self, ch: RouterChannel, m: Message) -> None:
        msg = pb.decode(messages.LINK_CONNECTED, m.body)
        link = self.table.get(msg["id"])
        if link is not None and ch.router_id in (link.src, link.dst):
            link.state = "Connected"

    def fault(self, ch: RouterChannel, lid: str) -> None:
        link = self.table.get(lid)
        if link is not None and ch.router_id in (link.src, link.dst):
            self._drop(lid, f"fault reported by {ch.name or ch.router_id}")

    def _drop(self, lid: str, why: str) -> None:
        link = self.table.pop(lid, None)
        if link is not None:
            log.info("link %s (%s -> %s) removed: %s", lid, self._name(link.src), self._name(link.dst), why)
            self.server.circuits.link_lost(link)

    def _name(self, rid: str) -> str:
        ch = self.server.routers.get(rid)
        return ch.name if ch is not None and ch.name else rid

    def _metrics(self, ch: RouterChannel, m: Message) -> None:
        """A router's metrics (every minute): the mean latency and queue time it measured on each
        of its links become that end's latency (upstream's ``link.<id>.latency``)."""
        histograms = pb.decode(messages.METRICS, m.body)["histograms"]
        for link in self.table.values():
            latency = histograms.get(f"link.{link.id}.latency")
            if latency is None:
                continue
            queued = histograms.get(f"link.{link.id}.queue_time")
            ns = int(latency["mean"] + (queued["mean"] if queued else 0))
            if link.src == ch.router_id:
                link.src_latency = ns
            elif link.dst == ch.router_id:
                link.dst_latency = ns

    def _verify_router(self, ch: RouterChannel, m: Message) -> None:
        """A router asks whether a peer dialing a link to it is who it says (its fingerprints)."""
        req = pb.decode(messages.VERIFY_ROUTER, m.body)
        fp = self.server.ctl.store.value("SELECT fingerprint FROM routers WHERE id = ?", (req["routerId"],))
        if fp and fp in req["fingerprints"]:
            ch.result(m, True, "router verified")
        else:
            log.warning("router %s: could not verify router %s for a link", ch.label, req["routerId"])
            ch.result(m, False, f"could not verify fingerprint for router {req['routerId']}"
                      if fp else f"invalid router {req['routerId']}, not yet enrolled")

    # ------------------------------------------------------------------ paths
    def path(self, src: str, dst: str) -> tuple[int, list[str], list[str]] | None:
        """(cost, router ids, link ids) of the cheapest path from ``src`` to ``dst``, or None."""
        if src == dst:
            return 0, [src], []
        costs = self._router_costs()
        if src not in costs or dst not in costs:
            return None
        adjacent: dict[str, list[tuple[str, Link]]] = {}
        for link in self.table.values():
            if link.state == "Connected":
                adjacent.setdefault(link.src, []).append((link.dst, link))
                adjacent.setdefault(link.dst, []).append((link.src, link))
        best: dict[str, int] = {src: 0}
        prev: dict[str, tuple[str, str]] = {}
        heap = [(0, src)]
        while heap:
            d, u = heapq.heappop(heap)
            if u == dst:
                break
            if d > best.get(u, 1 << 62):
                continue
            if u != src and costs[u][1]:   # noTraversal: an end, never a hop
                continue
            for v, link in adjacent.get(u, ()):
                if v not in costs:
                    continue
                alt = d + link.cost + max(costs[v][0], MIN_ROUTER_COST)
                if alt < best.get(v, 1 << 62):
                    best[v], prev[v] = alt, (u, link.id)
                    heapq.heappush(heap, (alt, v))
        if dst not in prev:
            return None
        routers: list[str] = [dst]
        links: list[str] = []
        node = dst
        while node != src:
            node, lid = prev[node]
            routers.insert(0, node)
            links.insert(0, lid)
        return best[dst], routers, links

    def _router_costs(self) -> dict[str, tuple[int, bool]]:
        """Online routers: (cost, noTraversal)."""
        online = sorted(rid for rid, ch in self.server.routers.items() if ch.ready)
        rows = self.server.ctl.store.all(
            "SELECT id, cost, no_traversal FROM routers WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(online),))
        return {r["id"]: (int(r["cost"] or 0), bool(r["no_traversal"])) for r in rows}
