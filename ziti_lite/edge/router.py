"""The embedded edge router: SDKs bind services here, dial them, and their bytes cross here.

``EdgeRouter`` listens with TLS beside the API (same process and SQLite file, on a thread, loop
and database connection of its own: ``thread.py``). A channel becomes usable once its hello
names a live API session whose identity owns the client certificate. Then:

* **Bind** with a Bind session creates a terminator (a row in ``terminators``, binding ``edge``,
  this router, the hosting identity, cost, precedence, instance id) and keeps the host's public
  key for dialers. It goes when the SDK closes or unbinds it, when the channel goes, and when
  its session, API session, identity or access goes (``reconcile``, twice a second).
* **Connect** with a Dial session picks terminators (instance id, precedence, cost, the
  service's strategy), sends Dial to the host, and once the host answers DialSuccess connects
  both ends, host first then dialer, so that neither sees data before it is connected
  (``dial.py``: the ``Dialer`` the router owns). Data, FIN and StateClosed are relayed between
  the two ends; the router never sees the end-to-end keys, only the public keys it passes along.

Message shapes and the SDK reactions they rely on: ``shared/reference/behaviour/edge-protocol.md``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import uuid
from typing import TYPE_CHECKING

from .. import clock, connections
from ..channel import wire
from ..channel.wire import Content, H, Message
from ..config import url_host
from ..events import reports
from ..routing import checks, strategy
from ..routing.version import hello_version, version_info
from .channel import STALL_SECONDS, Channel, Conn
from .dial import Dialer, Terminator

if TYPE_CHECKING:
    from .controller import EdgeController
    from .thread import RouterThread

log = logging.getLogger("ziti_lite.edge")

RECONCILE_SECONDS = 0.5
BIND_SUCCESS_AFTER = 0.05     # s after a bind's StateConnected (upstream: after the controller stored the terminator)
PRECEDENCE_RANK = strategy.PRECEDENCE_RANK


class EdgeRouter:
    def __init__(self, ctl: EdgeController, router_id: str, name: str, host: str, port: int, advertise: str,
                 context: ssl.SSLContext):
        self.ctl = ctl
        self.router_id = router_id
        self.name = name
        self.host, self.port, self.advertise = host, port, advertise
        self.context = context
        self.server: asyncio.AbstractServer | None = None
        self.channels: set[Channel] = set()
        self.terminators: dict[str, Terminator] = {}
        self.by_service: dict[str, list[Terminator]] = {}
        self.identities: dict[str, int] = {}    # identity id -> channels connected
        self._task: asyncio.Task | None = None
        self._gen: tuple | None = None
        self.circuits = 0                        # circuits created since start
        self.closed_bytes = [0, 0]               # bytes in, out of the channels closed since start
        self.dialer = Dialer(self)               # the dial path (dial.py): dials under way, their timeouts
        self.apart: RouterThread | None = None   # the router's own thread and loop, when it has them
        # what an SDK may send once its hello passed, by content type
        self._handlers = {
            Content.CONNECT: self.dialer.start, Content.STATE_CLOSED: self._state_closed, Content.BIND: self._bind,
            Content.UNBIND: self._unbind, Content.UPDATE_BIND: self._update_bind,
            Content.HEALTH_EVENT: self._health_event,
            # SDK -> router, 60800 is UpdateToken (router -> SDK it is BindSuccess); C SDK 1.5+ sends 60803
            Content.BIND_SUCCESS: self._update_token, Content.UPDATE_TOKEN: self._update_token,
            Content.TRACE_ROUTE: self._trace_route, Content.TRACE_ROUTE_RESPONSE: self._trace_route_response,
        }

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        return f"tls://{url_host(self.advertise)}:{self.port}"

    async def start(self, sock=None) -> None:
        # the process's one way to listen with TLS (the same TLS layer on asyncio's loop and uvloop)
        self.server, self.port = await connections.listen(lambda: Channel(self), self.context, self.host,
                                                          self.port, sock, backlog=1024)
        self._cleanup_stale()
        self._task = asyncio.create_task(self._reconcile_loop())
        log.info("edge router %s listening on %s", self.name, self.url)

    async def stop(self) -> None:
        await connections.shut(self._task, self.server, self.channels, "router stopping", self._cleanup_stale)

    def _cleanup_stale(self) -> None:
        """Terminators of this router left by an earlier process (or this one) are gone."""
        store = self.ctl.store
        with store.write():
            store.execute("DELETE FROM terminators WHERE router_id = ? AND binding = 'edge'", (self.router_id,))

    def state(self) -> dict:
        """What the API shows of this router while it runs."""
        protocols = {"tls": self.url}
        return {"isOnline": True, "hostname": self.advertise, "supportedProtocols": protocols,
                "syncStatus": "SYNC_DONE", "versionInfo": version_info()}

    def has_connection(self, identity_id: str) -> bool:
        return self.identities.get(identity_id, 0) > 0

    def carries(self, session_id: str) -> bool:
        """Whether a live circuit runs under the session (Dial or Bind). From the API's thread:
        it reads copies (the router's thread may change them meanwhile)."""
        return any(c.session_id == session_id for ch in list(self.channels) for c in list(ch.conns.values()))

    # ------------------------------------------------------------------ channels
    def channel_opened(self, ch: Channel) -> None:
        self.channels.add(ch)

    def channel_lost(self, ch: Channel) -> None:
        self.channels.discard(ch)
        self.closed_bytes[0] += ch.bytes_in
        self.closed_bytes[1] += ch.bytes_out
        if ch.api_session is not None:
            n = self.identities.get(ch.session.identity_id, 0) - 1
            if n > 0:
                self.identities[ch.session.identity_id] = n
            else:
                self.identities.pop(ch.session.identity_id, None)
                reports.sdk_online(self.ctl.events, ch.session.identity_id, False)
        for key, pending in list(self.dialer.pending.items()):
            if key[0] == id(ch):
                pending.cancelled = True
                self.dialer.pending.pop(key, None)
        for conn in list(ch.conns.values()):
            self._close_conn(conn, "channel closed", notify_self=False)
        for term in list(ch.binds.values()):
            self._remove_terminator(term, notify=False)

    def received(self, ch: Channel, m: Message) -> None:
        c = m.content
        if c == Content.DATA:
            self.data(ch, m)
            return
        if ch.api_session is None:
            if c == Content.HELLO:
                self._hello(ch, m)
            else:
                ch.close("message before hello")
            return
        handler = self._handlers.get(c)
        if handler is not None:
            handler(ch, m)
        elif c == Content.DIAL_SUCCESS and m.conn_id is not None:
            # an accept that came after the dial was given up: tell the host it is over
            self.dialer.reject_accept(ch, m, m.conn_id, b"dial timed out")
        elif c == Content.HELLO:
            ch.close("second hello")
        # anything else (Ping, Probe, trace, stray replies) needs no answer

    def _hello(self, ch: Channel, m: Message) -> None:
        # like the Go router: acknowledge first, then close if the token or certificate fails,
        # which makes an SDK refresh its API session and reconnect
        ch.reply(m, Content.RESULT, {
            H.RESULT_SUCCESS: b"\x01", H.CONNECTION_ID: uuid.uuid4().hex.encode(),
            H.ID: self.router_id.encode(), H.HELLO_VERSION: hello_version().encode(),
            H.SUPPORTS_BIND_SUCCESS: b"\x01"}, seq=wire.HELLO_SEQUENCE)
        token = m.text(H.SESSION_TOKEN)
        api = checks.hello(self.ctl, token, ch.fingerprint)
        if api is None:
            log.info("edge channel %s: hello refused (unknown API session or certificate)", ch.peer_name)
            ch.close("invalid api session")
            return
        ch.api_session = api
        if ch.hello_timer is not None:
            ch.hello_timer.cancel()
        self.identities[api.identity_id] = self.identities.get(api.identity_id, 0) + 1
        if self.identities[api.identity_id] == 1:
            reports.sdk_online(self.ctl.events, api.identity_id, True)
        self.ctl.activity[api.token] = clock.stamp()

    # ------------------------------------------------------------------ bind / terminators
    def _bind(self, ch: Channel, m: Message) -> None:
        cid = m.conn_id
        if cid is None:
            return
        sess = self.session_of(ch, m, cid, "Bind")
        if sess is None:
            return
        pk = m.headers.get(H.PUBLIC_KEY)
        if m.flag(H.ROUTER_PROVIDED_CONN_ID):
            ch.router_conn_ids = True
        if m.flag(H.SUPPORTS_BIND_SUCCESS):
            ch.supports_bind_success = True
        old = ch.binds.get(cid)
        if old is not None:
            self._remove_terminator(old, notify=False)
        cost = m.i32(H.COST)
        cost = sess.hosting_cost if cost is None else cost
        prec_code = m.u32(H.PRECEDENCE)
        precedence = wire.PRECEDENCES.get(prec_code, "default") if prec_code is not None else sess.hosting_precedence
        if precedence not in PRECEDENCE_RANK:
            precedence = "default"
        term = Terminator(str(uuid.uuid4()), sess.service_id, ch, cid, sess, m.text(H.TERMINATOR_IDENTITY),
                          max(0, min(65535, cost)), precedence, pk)
        now = clock.stamp()
        store = self.ctl.store
        with store.write():
            store.execute(
                "INSERT INTO terminators (id, created_at, updated_at, service_id, router_id, binding, address,"
                " instance_id, instance_secret, cost, precedence, host_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (term.id, now, now, sess.service_id, self.router_id, "edge", "hosted:" + term.id,
                 term.instance_id, None, term.cost, term.precedence, sess.identity_id))
        ch.binds[cid] = term
        self.terminators[term.id] = term
        self.by_service.setdefault(sess.service_id, []).append(term)
        ok = {H.CONN_ID: wire.u32(cid), H.SEQ: wire.u32(0)}
        if m.flag(H.ROUTER_PROVIDED_CONN_ID):
            ok[H.ROUTER_PROVIDED_CONN_ID] = b"\x01"
        ch.reply(m, Content.STATE_CONNECTED, ok)
        if ch.supports_bind_success:
            # upstream's router sends BindSuccess once the controller has stored the terminator, a
            # round trip after the bind's StateConnected; the Go SDKs register their listener on
            # StateConnected and drop a BindSuccess that arrives before it, so it comes that much later
            asyncio.get_running_loop().call_later(BIND_SUCCESS_AFTER, self._bind_success, ch, cid, term)
        log.debug("terminator %s for service %s on %s", term.id, sess.service_name, ch.peer_name)

    def _bind_success(self, ch: Channel, cid: int, term: Terminator) -> None:
        if not ch.closed and ch.binds.get(cid) is term:
            ch.send(Content.BIND_SUCCESS, {H.CONN_ID: wire.u32(cid)})

    def _unbind(self, ch: Channel, m: Message) -> None:
        cid = m.conn_id
        term = ch.binds.get(cid) if cid is not None else None
        if term is not None:   # no answer: upstream's router sends none either
            self._remove_terminator(term, notify=False)

    def _update_bind(self, ch: Channel, m: Message) -> None:
        term = ch.binds.get(m.conn_id) if m.conn_id is not None else None
        if term is None:
            return
        cost = m.i32(H.COST)
        prec = m.u32(H.PRECEDENCE)
        if cost is not None:
            term.cost = max(0, min(65535, cost))
        if prec is not None:
            term.precedence = wire.PRECEDENCES.get(prec, term.precedence)
        with self.ctl.store.write():
            self.ctl.store.execute("UPDATE terminators SET cost = ?, precedence = ?, updated_at = ? WHERE id = ?",
                                   (term.cost, term.precedence, clock.stamp(), term.id))

    def _health_event(self, ch: Channel, m: Message) -> None:
        """A host reports its service healthy or not: an unhealthy terminator is tried last."""
        term = ch.binds.get(m.conn_id) if m.conn_id is not None else None
        if term is not None:
            term.failures = strategy.penalised(term.failures, "healthy" if m.flag(H.HEALTH_STATUS) else "unhealthy")

    def _update_token(self, ch: Channel, m: Message) -> None:
        """UpdateToken: a new API session token for this channel (same identity and certificate)."""
        api = checks.hello(self.ctl, m.body.decode("utf-8", "replace"), ch.fingerprint)
        if api is None or api.identity_id != ch.session.identity_id:
            ch.reply(m, Content.UPDATE_TOKEN_FAILURE, {}, b"invalid api session token")
            return
        ch.api_session = api
        ch.reply(m, Content.UPDATE_TOKEN_SUCCESS, {})

    def _remove_terminator(self, term: Terminator, notify: bool, reason: str = "") -> None:
        if self.terminators.pop(term.id, None) is None:
            return
        ch = term.channel
        if ch.binds.get(term.conn_id) is term:
            del ch.binds[term.conn_id]
        lst = self.by_service.get(term.service_id)
        if lst is not None:
            if term in lst:
                lst.remove(term)
            if not lst:
                del self.by_service[term.service_id]
        store = self.ctl.store
        with store.write():
            store.execute("DELETE FROM terminators WHERE id = ?", (term.id,))
        if notify and not ch.closed:
            ch.send(Content.STATE_CLOSED, {H.CONN_ID: wire.u32(term.conn_id), H.SEQ: wire.u32(0)},
                    reason.encode())

    def session_of(self, ch: Channel, m: Message, cid: int, kind: str) -> checks.Session | None:
        """The Dial or Bind session in the body of a Connect or Bind, with the public key the
        service needs; otherwise the SDK is refused (None)."""
        token = m.body.decode("utf-8", "replace")
        sess, err = checks.session(self.ctl, token, kind, ch.session.id, self.router_id)
        if err == checks.WRONG_ROUTER and not self._still_granted(token, kind):
            # upstream deletes a session as soon as its policy access is gone, so its router
            # answers such a session "Invalid Session", and the SDK drops it and asks again
            err = checks.INVALID_SESSION
        if sess is not None and sess.encryption_required and not m.headers.get(H.PUBLIC_KEY):
            sess, err = None, checks.ENCRYPTION_MISSING
        if sess is None:
            self.refuse(ch, m, cid, err)
        return sess

    def _still_granted(self, token: str, kind: str) -> bool:
        """Whether a service policy of the session's kind still grants its identity its service."""
        return self.ctl.store.value(
            "SELECT 1 FROM sessions x JOIN service_policy_identities i ON i.identity_id = x.identity_id"
            " JOIN service_policy_services s ON s.policy_id = i.policy_id AND s.service_id = x.service_id"
            " JOIN service_policies p ON p.id = i.policy_id AND p.type = ? WHERE x.token = ? LIMIT 1",
            (kind, token)) is not None

    def refuse(self, ch: Channel, m: Message, cid: int, reason: str) -> None:
        ch.reply(m, Content.STATE_CLOSED, {H.CONN_ID: wire.u32(cid), H.SEQ: wire.u32(0)}, reason.encode())

    # ------------------------------------------------------------------ traceroute
    def _trace_route(self, ch: Channel, m: Message) -> None:
        """``ziti edge traceroute``: each hop answers when the hop count reaches it, as upstream's
        router: this router as the circuit's ingress (``xgress/edge``), then as its egress, then
        the SDK at the other end, whose answer names the request it answers (header 1019) and is
        passed back by ``_trace_route_response``."""
        cid = m.conn_id
        hops = max(0, (m.u32(H.TRACE_HOP_COUNT) or 0) - 1)     # this router as the circuit's ingress
        conn = ch.conns.get(cid) if cid is not None else None
        if hops > 0 and conn is not None and conn.peer is not None:
            hops -= 1                                           # ... and as its egress
        if hops == 0 or conn is None or conn.peer is None:
            # the probe ends here; hops left over tell the client the path ended before them
            headers = {H.CONN_ID: wire.u32(cid or 0), H.TRACE_HOP_COUNT: wire.u32(hops),
                       H.TIMESTAMP: m.headers.get(H.TIMESTAMP, wire.U64.pack(0)),
                       H.TRACE_HOP_TYPE: b"xgress/edge", H.TRACE_HOP_ID: b""}
            ch.reply(m, Content.TRACE_ROUTE_RESPONSE, headers)
            return
        far = conn.peer
        far.channel.send(Content.TRACE_ROUTE, {
            H.CONN_ID: wire.u32(far.id), H.TRACE_HOP_COUNT: wire.u32(hops),
            H.TIMESTAMP: m.headers.get(H.TIMESTAMP, wire.U64.pack(0)), H.TRACE_SOURCE_REQUEST_ID: wire.u32(m.seq)})

    def _trace_route_response(self, ch: Channel, m: Message) -> None:
        """The far SDK's answer to a probe: back to the prober, as the reply to its request."""
        conn = ch.conns.get(m.conn_id) if m.conn_id is not None else None
        if conn is None or conn.peer is None or conn.peer.channel.closed:
            return
        near = conn.peer
        headers = {H.REPLY_FOR: wire.i32(m.i32(H.TRACE_SOURCE_REQUEST_ID) or 0), H.CONN_ID: wire.u32(near.id)}
        headers.update({k: v for k, v in m.headers.items()
                        if k in (H.TRACE_HOP_COUNT, H.TIMESTAMP, H.TRACE_HOP_TYPE, H.TRACE_HOP_ID, H.TRACE_ERROR)})
        near.channel.send(Content.TRACE_ROUTE_RESPONSE, headers)

    # ------------------------------------------------------------------ relay
    def data(self, ch: Channel, m: Message) -> None:
        cid = m.u32(H.CONN_ID)
        conn = ch.conns.get(cid) if cid is not None else None
        if conn is None or conn.peer is None:
            early = self.dialer.early.get((id(ch), conn.id)) if conn is not None and not conn.closed else None
            if early is not None and len(early) < 64:
                early.append(m)
            return
        peer = conn.peer
        headers = m.headers
        pch = peer.channel
        pch.send_data(peer, wire.encode_data(pch.next_seq(), peer.id, headers.get(H.SEQ, b"\0\0\0\0"),
                                             headers.get(H.FLAGS), m.body), ch)

    def _state_closed(self, ch: Channel, m: Message) -> None:
        cid = m.conn_id
        if cid is None:
            return
        conn = ch.conns.get(cid)
        if conn is not None:
            self._close_conn(conn, m.body.decode("utf-8", "replace") or "closed by peer", notify_self=False)
            return
        term = ch.binds.get(cid)
        if term is not None:     # a C SDK closes its listener with StateClosed: unbind
            self._remove_terminator(term, notify=False)
            return
        pending = self.dialer.pending.pop((id(ch), cid), None)
        if pending is not None:
            pending.cancelled = True

    def _close_conn(self, conn: Conn, reason: str, notify_self: bool = True) -> None:
        """Close one circuit: both ends are forgotten; the peer (and, if asked, this end's SDK)
        gets StateClosed after whatever data was already queued for it."""
        facts = self.dialer.circuit_facts.pop(conn.circuit_id, None)
        if facts is not None:
            started = facts.pop("started")
            reports.circuit_deleted(self.ctl.events, conn.circuit_id, **facts,
                                   duration_seconds=asyncio.get_running_loop().time() - started)
        for end, notify in ((conn, notify_self), (conn.peer, True)):
            if end is None or end.closed:
                continue
            end.closed = True
            ch = end.channel
            if ch.conns.get(end.id) is end:
                del ch.conns[end.id]
            if not notify:
                ch.drop_queue(end)
            elif not ch.closed:
                ch.send_last(end, wire.encode(Content.STATE_CLOSED, ch.next_seq(),
                                              {H.CONN_ID: wire.u32(end.id), H.SEQ: wire.u32(0)}, reason.encode()))

    # ------------------------------------------------------------------ revocation
    async def _reconcile_loop(self) -> None:
        while True:
            await asyncio.sleep(RECONCILE_SECONDS)
            try:
                self.close_stalled()
                self.reconcile()
            except Exception:
                log.exception("edge router reconcile")

    def close_stalled(self) -> None:
        """A connection whose receiver has not taken its data for STALL_SECONDS is closed, so
        that the channel feeding it reads again."""
        now = time.monotonic()
        for ch in list(self.channels):
            for end in list(ch.paused_by):
                if now - end.blocked_since > STALL_SECONDS:
                    log.info("edge connection %s on %s: receiver stalled; closing", end.id, end.channel.peer_name)
                    end.channel.drop_queue(end)
                    self._close_conn(end, "receiver stopped reading")

    def reconcile(self) -> None:
        """Close what lost its right: channels of gone API sessions (logout, expiry, deletion,
        disabled identity), circuits and terminators of gone sessions or policies, terminators
        deleted through the API. Connected SDKs keep their API sessions alive."""
        live_channels = [ch for ch in self.channels if ch.api_session is not None and not ch.closed]
        if not live_channels:
            self._gen = None
            return
        stamp = clock.stamp()
        for ch in live_channels:
            self.ctl.activity[ch.session.token] = stamp
        if self._generation() == self._gen:   # nothing written and nothing new since the last pass
            return
        grants: dict[str, tuple[str, str, str]] = {}
        for term in self.terminators.values():
            grants[term.session.id] = (term.session.identity_id, term.service_id, "Bind")
        for ch in live_channels:
            for c in ch.conns.values():
                grants[c.session_id] = c.grant
        revoked = checks.reconcile(self.ctl, self.router_id, {ch.session.id for ch in live_channels},
                                   grants, set(self.terminators))
        for ch in live_channels:
            if ch.session.id in revoked.api_sessions:
                log.info("edge channel %s: API session gone; closing", ch.peer_name)
                ch.close("api session gone")
        for term in list(self.terminators.values()):
            if term.id in revoked.terminators or term.session.id in revoked.sessions:
                self._remove_terminator(term, notify=True, reason=checks.INVALID_SESSION)
        for ch in live_channels:
            for c in list(ch.conns.values()):
                if c.session_id in revoked.sessions:
                    self._close_conn(c, "session removed")
        # measured after the closes above, whose own writes must not hide later changes
        self._gen = self._generation()

    def _generation(self) -> tuple:
        live = sum(1 for ch in self.channels if ch.api_session is not None and not ch.closed)
        return (*self.ctl.store.generation(), len(self.terminators), self.circuits, live)

    # ------------------------------------------------------------------ figures
    def stats(self) -> dict:
        """The router's figures (``/metrics``), from the API's thread: over a copy of the channels."""
        channels = list(self.channels)
        return {"channels": len(channels), "terminators": len(self.terminators),
                "connections": sum(len(ch.conns) for ch in channels), "circuits": self.circuits,
                "bytes_in": self.closed_bytes[0] + sum(ch.bytes_in for ch in channels),
                "bytes_out": self.closed_bytes[1] + sum(ch.bytes_out for ch in channels)}
