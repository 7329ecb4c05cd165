"""The control-channel listener: real OpenZiti routers connect here and come online.

``CtrlServer`` listens with TLS on ``--ctrl-port`` in the controller's process, on its event
loop, beside the API and the embedded router. A router is accepted when its client certificate
verifies against the controller's PKI, the router id in its hello names an enrolled, enabled
router whose stored fingerprint is among the presented certificates; a second connection of the
same router replaces the first. After the hello result the controller sends ServerHello; the
router's ClientHello (its edge listeners and version) makes it online in the API
(``Controller.router_states``, the same state the embedded router publishes). Then:

* ``sync.py`` streams API sessions (all at once, then each change) and session removals;
* ``terminators.py`` answers terminator creation, removal and updates;
* ``circuits.py`` answers circuit requests (checks, terminator choice, Route, RouteResult),
  faults and circuit confirmations;
* ``tunnel.py`` serves tunneler-enabled routers;
* ``links.py`` tells routers of their peers, keeps the link table and computes paths;
* ``datamodel.py`` keeps the router data model v2 routers subscribe to;
* ``interfaces.py`` keeps the network interfaces v1.6 and v2.0 routers report.

Each is a ``Part`` (``part.py``), declared once in the list at the top of ``CtrlServer``: the
server builds them, merges their handlers (one per content type) and tells each of a router's
hello, readiness and loss, and of the tick.

A router that closes, stops answering heartbeats, is disabled, deleted or re-enrolled goes
offline at once. Facts about the protocol: ``shared/reference/behaviour/ctrl-channel.md``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import typing
from typing import Protocol

from .. import connections
from ..auth import certs as certauth
from ..channel import wire
from ..channel.wire import Content, Message
from ..config import url_host
from ..events import reports
from ..events.runtime import EventsController
from ..pki import ca as pki
from ..routing import presence, version
from ..routing.checks import RoutingController
from . import circuits, datamodel, hello, interfaces, links, messages, pb, sync, terminators, tunnel
from .channel import RouterChannel
from .messages import C
from .part import Handler, Part

log = logging.getLogger("ziti_lite.ctrl")

HELLO_SECONDS = 10.0        # from the TLS handshake to an acceptable hello
CLIENT_HELLO_SECONDS = 30.0  # from our ServerHello to the router's ClientHello
TICK = 0.2                  # seconds between sync passes

class CtrlController(RoutingController, presence.StatesController, EventsController, Protocol):
    """The controller as the control channel sees it (see ``lifecycle.contexts.LifecycleController``)."""
    instance_id: str
    ctrl_server: CtrlServer | None
    ctrl_ssl_context: ssl.SSLContext | None
    ctrl_sock: socket.socket | None
    router_lines: dict[str, str]

    @property
    def edge_router(self) -> presence.Embedded | None: ...   # its id is not a real router's


class CtrlServer:
    # the parts (part.py), one line each, in the order they hear of routers (ready: sync before
    # links; lost: circuits before links; tick: sync before the data model)
    sync: sync.Sync
    terminators: terminators.Terminators
    circuits: circuits.Circuits
    tunnel: tunnel.Tunnel
    links: links.Links
    datamodel: datamodel.DataModel
    interfaces: interfaces.Interfaces

    @classmethod
    def part_types(cls) -> list[tuple[str, type[Part]]]:
        """The declared parts: (attribute, class), in their order."""
        hints = typing.get_type_hints(cls)
        return [(name, t) for name, t in hints.items() if isinstance(t, type) and issubclass(t, Part)]

    def __init__(self, ctl: CtrlController, host: str, port: int, advertise: str, context: ssl.SSLContext,
                 heartbeat: float = 10.0, timeout: float = 30.0):
        self.ctl = ctl
        self.host, self.port, self.advertise = host, port, advertise
        self.context = context
        # as upstream: a heartbeat every 10 s, a router silent for 30 s is closed (a third of a
        # shorter timeout between heartbeats, so that a live router always answers in time)
        self.heartbeat_interval, self.heartbeat_timeout = min(heartbeat, timeout / 3), timeout
        self.server: asyncio.AbstractServer | None = None
        self.channels: set[RouterChannel] = set()
        self.routers: dict[str, RouterChannel] = {}     # router id -> its accepted channel
        self.parts: list[Part] = []
        for name, part_type in self.part_types():
            part = part_type(self)
            setattr(self, name, part)
            self.parts.append(part)
        self._task: asyncio.Task | None = None
        self.refused = 0                                 # connections refused since start
        self.handlers: dict[int, Handler] = {C.CLIENT_HELLO: self._client_hello}
        for part in self.parts:
            for content, handler in part.handlers().items():
                if content in self.handlers:
                    raise ValueError(f"content type {content}: a second handler, {handler.__qualname__}")
                self.handlers[content] = handler

    # ------------------------------------------------------------------ lifecycle
    @property
    def address(self) -> str:
        """How routers reach us: ``tls:host:port`` (a router's ``ctrl.endpoint``)."""
        return f"tls:{url_host(self.advertise)}:{self.port}"

    async def start(self, sock=None) -> None:
        # the process's one way to listen with TLS (the same TLS layer on asyncio's loop and uvloop)
        self.server, self.port = await connections.listen(lambda: RouterChannel(self), self.context, self.host,
                                                          self.port, sock, backlog=256)
        self._task = asyncio.create_task(self._loop())
        log.info("control channel listening on %s", self.address)

    async def stop(self) -> None:
        await connections.shut(self._task, self.server, self.channels, "controller stopping")

    async def _loop(self) -> None:
        last_beat = 0.0
        while True:
            await asyncio.sleep(TICK)
            try:
                now = time.monotonic()
                if now - last_beat >= 1.0:
                    last_beat = now
                    self._housekeeping(now)
                if self.routers:
                    for part in self.parts:
                        part.tick()
            except Exception:
                log.exception("control channel tick")

    def _housekeeping(self, now: float) -> None:
        for ch in list(self.channels):
            if ch.router_id is None:
                if now - ch.opened > HELLO_SECONDS:
                    self.refuse(ch, "no hello")
            elif not ch.ready and now - ch.opened > HELLO_SECONDS + CLIENT_HELLO_SECONDS:
                log.warning("control channel %s: no ClientHello; closing", ch.label)
                ch.close("no client hello")
            else:
                ch.heartbeat(self.heartbeat_interval, self.heartbeat_timeout)

    # ------------------------------------------------------------------ channels
    def opened(self, ch: RouterChannel) -> None:
        self.channels.add(ch)

    def lost(self, ch: RouterChannel, reason: str) -> None:
        self.channels.discard(ch)
        if ch.primary is not None:      # a later underlay of a group: the logical channel stays
            ch.primary.underlays.discard(ch)
            return
        for underlay in list(ch.underlays):
            underlay.close(reason)
        for part in self.parts:
            part.channel_lost(ch)
        rid = ch.router_id
        if rid is None or self.routers.get(rid) is not ch:
            return
        del self.routers[rid]
        presence.offline(self.ctl, rid)
        reports.router_online(self.ctl.events, rid, False)
        removed = ch.close_reason == "router deleted"
        for part in self.parts:
            part.router_lost(rid, removed)
        log.info("router %s offline (%s)", ch.label, reason)

    def verify_chain(self, chain: list[bytes]) -> str:
        """Why a router's certificate chain is not acceptable ('' when it is): it must verify
        against the controller's own CAs, be valid now and allow client authentication."""
        if not chain:
            return "no client certificate"
        try:
            certs = pki.load_certs(chain)
        except ValueError:
            return "client certificate does not parse"
        anchors = pki.load_certs(certauth.controller_cas(self.ctl))
        try:
            pki.verify_chain(certs[0], certs[1:], anchors, allow_expired=False, eku="client")
        except pki.ChainError as e:
            return f"client certificate does not verify against the controller's CAs ({e})"
        return ""

    def refuse(self, ch: RouterChannel, reason: str, hello: Message | None = None) -> None:
        self.refused += 1
        log.warning("control channel %s: refused: %s", ch.label, reason)
        if hello is not None:
            ch.reply(hello, Content.RESULT, {wire.H.RESULT_SUCCESS: b"\x00"}, reason.encode())
        ch.close(reason)

    def received(self, ch: RouterChannel, m: Message) -> None:
        if ch.router_id is None:
            if m.content == Content.HELLO:
                self._hello(ch, m)
            else:
                self.refuse(ch, f"content type {m.content} before the hello")
            return
        handler = self.handlers.get(m.content)
        if handler is not None:
            try:
                handler(ch, m)
            except (pb.PbError, ValueError) as e:
                log.warning("control channel %s: malformed content type %s (%s); closing", ch.label, m.content, e)
                ch.close("malformed message")
        elif m.content == Content.HELLO:
            self.refuse(ch, "second hello")
        else:   # metrics, link reports, traces, the reconnect ping: nothing to answer
            log.debug("control channel %s: content type %s ignored", ch.label, m.content)

    def _hello(self, ch: RouterChannel, m: Message) -> None:
        rid = m.body.decode("utf-8", "replace").strip()
        row = self.ctl.store.one("SELECT id, name, fingerprint, disabled FROM routers WHERE id = ?", (rid,)) \
            if rid else None
        ch.name = row["name"] if row is not None else ""
        if row is None:
            return self.refuse(ch, f"unknown router id {rid[:64]!r}", m)
        if self.ctl.edge_router is not None and rid == self.ctl.edge_router.router_id:
            return self.refuse(ch, "the embedded router's id", m)
        if not row["fingerprint"]:
            return self.refuse(ch, "router is not enrolled", m)
        if row["fingerprint"] not in ch.fingerprints:
            return self.refuse(ch, "client certificate is not the router's enrolled certificate", m)
        if row["disabled"]:
            return self.refuse(ch, "router is disabled", m)
        said = hello.Hello.read(m)
        if not said.first:
            return self._join_group(ch, rid, said, m)
        old = self.routers.get(rid)
        if old is not None:
            log.info("router %s connected again from %s; closing the older channel", ch.label, ch.peer_name)
            old.close("replaced by a new connection")
        ch.router_id = rid
        ch.version = m.text(wire.H.HELLO_VERSION)
        self.ctl.router_lines[rid] = ch.version.split("|")[0]
        ch.listeners = _listeners(said.listeners)
        ch.group = hello.new_group(said) if said.grouped else None
        self.routers[rid] = ch
        for part in self.parts:
            part.hello(ch, said)
        answer = hello.answer(said, m, self.ctl.instance_id, version.hello_version(), ch.group)
        ch.send(Content.RESULT, answer, seq=wire.HELLO_SEQUENCE)
        ch.send(C.SERVER_HELLO, {}, pb.encode(messages.SERVER_HELLO, {
            "version": version.VERSION, "data": {"instant": "true"}}))
        log.info("router %s connected from %s (%s%s)", ch.label, ch.peer_name, ch.version.split("|")[0] or "?",
                 ", grouped channel" if said.grouped else "")

    def _join_group(self, ch: RouterChannel, rid: str, said: hello.Hello, m: Message) -> None:
        """A later underlay of a v2 router's grouped channel (``ctrl.high``): it joins the logical
        channel whose connection id and secret it names, and only that."""
        primary = self.routers.get(rid)
        if primary is None or primary.closed or primary.group is None or primary.group[0] != said.connection_id:
            return self.refuse(ch, "no channel group with that connection id for this router", m)
        if primary.group[1] != said.secret:
            return self.refuse(ch, "incorrect group secret", m)
        ch.router_id, ch.version, ch.ready = rid, primary.version, True
        ch.primary = primary
        primary.underlays.add(ch)
        ch.send(Content.RESULT, hello.answer(said, m, self.ctl.instance_id, version.hello_version(), primary.group),
                seq=wire.HELLO_SEQUENCE)
        log.info("router %s: %s underlay joined from %s", ch.label, said.underlay, ch.peer_name)

    def _client_hello(self, ch: RouterChannel, m: Message) -> None:
        try:
            hello = pb.decode(messages.CLIENT_HELLO, m.body)
        except pb.PbError as e:
            log.warning("control channel %s: bad ClientHello (%s); closing", ch.label, e)
            ch.close("bad client hello")
            return
        protocols: dict[str, str] = {}
        for listener in hello["listeners"]:
            adv = listener["advertise"] or {}
            if adv.get("protocol") and adv.get("hostname"):
                protocols[adv["protocol"]] = f"{adv['protocol']}://{url_host(adv['hostname'])}:{adv['port']}"
        if not protocols:   # routers before listeners were reported: protocols and their ports
            for proto, port in zip(hello["protocols"], hello["protocolPorts"], strict=False):
                protocols[proto] = f"{proto}://{url_host(hello['hostname'])}:{port}"
        ch.ready = True
        rid = ch.router_id
        assert rid is not None
        presence.online(self.ctl, rid, {
            "isOnline": True, "hostname": hello["hostname"], "supportedProtocols": protocols,
            "syncStatus": "SYNC_DONE", "versionInfo": version.parse(ch.version)})
        for part in self.parts:
            part.router_ready(ch)
        reports.router_online(self.ctl.events, rid, True)
        log.info("router %s online: %s", ch.label, ", ".join(protocols.values()) or "no edge listeners")

    def has_connection(self, identity_id: str) -> bool:
        """Whether an SDK of the identity is connected to an online real router."""
        return any(identity_id in ch.connected for ch in self.routers.values() if ch.ready)

    # ------------------------------------------------------------------ figures
    def stats(self) -> dict:
        return {"routers": len([c for c in self.routers.values() if c.ready]), "channels": len(self.channels),
                "links": len(self.links.table),
                "circuits": len(self.circuits.live), "circuits_total": self.circuits.created, "refused": self.refused}


def _listeners(raw: bytes | None) -> list[dict]:
    """The link listeners a router declares in its hello (header 10, or 1000 from v2), for the record."""
    if not raw:
        return []
    try:
        return list(pb.decode(messages.LISTENERS, raw)["listeners"])
    except pb.PbError:
        return []

