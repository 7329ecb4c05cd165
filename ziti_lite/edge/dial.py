"""The dial path of the embedded edge router: a Connect becomes a circuit.

A Connect with a Dial session picks terminators (instance id, precedence, then the service's
strategy over cost; a failed dial raises a terminator's cost for a while), sends Dial to each
host in turn within the dial budget, and once a host answers DialSuccess connects both ends,
host first then dialer, so that neither sees data before it is connected. SDKs with
router-assigned connection ids get their id with the Dial; their early data waits in
``early`` until the dialer is connected.

``Dialer`` is an object the router owns (``EdgeRouter.dialer``; the router owns the channels,
the terminators and the relay): it holds the dials under way (``pending``), the early data of
router-assigned ids (``early``), what each circuit's deleted event will name
(``circuit_facts``) and its timeouts; the terminators carry their penalties
(``routing/strategy.py``'s table). It reads the router's terminators and answers through the
router's channels.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..channel import wire
from ..channel.wire import Content, H, Message
from ..events import reports
from ..routing import checks, strategy
from .channel import Channel, Conn

if TYPE_CHECKING:
    from .router import EdgeRouter

DIAL_TIMEOUT = 5.0            # one host's answer to a Dial (the Go router's value)
DIAL_BUDGET = 8.0             # all hosts tried for one Connect: below the SDK's 10 s
MAX_CONNS_PER_CHANNEL = 16384
ROUTER_ID_BASE = 1 << 31      # router-assigned connection ids: 0x80000000 up, per channel


@dataclass(eq=False)
class Terminator:
    id: str
    service_id: str
    channel: Channel
    conn_id: int
    session: checks.Session
    instance_id: str
    cost: int
    precedence: str
    public_key: bytes | None
    failures: int = 0


@dataclass(eq=False)
class PendingDial:
    task: asyncio.Task | None = None
    cancelled: bool = False


class Dialer:
    """The dial path of an ``EdgeRouter``: a Connect in, a circuit (or a refusal) out."""

    def __init__(self, router: EdgeRouter) -> None:
        self.router = router
        self.pending: dict[tuple[int, int], PendingDial] = {}   # (id(channel), conn id) -> dial
        # data a host sent on a router-assigned id right after its DialSuccess (its crypto header),
        # before the dial's task connected the circuit: (id(host channel), conn id) -> messages
        self.early: dict[tuple[int, int], list[Message]] = {}
        # circuit id -> what its fabric.circuits deleted event names (events/reports.py)
        self.circuit_facts: dict[str, dict] = {}
        self.timeout = DIAL_TIMEOUT     # one host's answer
        self.budget = DIAL_BUDGET       # all hosts of one Connect

    def start(self, ch: Channel, m: Message) -> None:
        cid = m.conn_id
        if cid is None:
            return
        key = (id(ch), cid)
        if cid in ch.conns or key in self.pending:
            self.router.refuse(ch, m, cid, "connection id already in use")
            return
        if len(ch.conns) >= MAX_CONNS_PER_CHANNEL:
            self.router.refuse(ch, m, cid, "too many connections on this channel")
            return
        sess = self.router.session_of(ch, m, cid, "Dial")
        if sess is None:
            return
        candidates = self.pick(sess.service_id, m.headers.get(H.TERMINATOR_IDENTITY))
        if not candidates:
            reports.circuit_failed(self.router.ctl.events, uuid.uuid4().hex, session_id=sess.id,
                                  service_id=sess.service_id, router_id=self.router.router_id,
                                  client_identity_id=sess.identity_id, cause="NO_TERMINATORS", creation_seconds=0.0)
            self.router.refuse(ch, m, cid, f"service {sess.service_id} has no terminators")
            return
        pending = PendingDial()
        self.pending[key] = pending
        pending.task = asyncio.create_task(  # held: the loop keeps only weak references
            self._dial(ch, m, cid, sess, candidates, pending))

    def pick(self, service_id: str, instance: bytes | None) -> list[Terminator]:
        """Terminators to try, best first: matching instance id, then precedence, then the
        service's strategy over cost (failed dials raise a terminator's cost for a while)."""
        terms = [t for t in self.router.by_service.get(service_id, ()) if not t.channel.closed]
        if instance is not None:
            want = instance.decode("utf-8", "replace")
            terms = [t for t in terms if t.instance_id == want]
        if not terms:
            return []
        return strategy.order(terms, terms[0].session.terminator_strategy, lambda t: t.precedence,
                              lambda t: t.cost + t.failures)

    async def _dial(self, ch: Channel, m: Message, cid: int, sess: checks.Session,
                    candidates: list[Terminator], pending: PendingDial) -> None:
        key = (id(ch), cid)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budget
        circuit_id = uuid.uuid4().hex
        started = loop.time()
        cause = "NO_TERMINATORS"
        reason = f"service {sess.service_id} has no terminators that accepted the dial"
        caller = m.headers.get(H.CALLER_ID) or sess.identity_name.encode()
        try:
            for term in candidates:
                left = deadline - loop.time()
                if left <= 0.05 or pending.cancelled:
                    break
                host = term.channel
                if host.closed or term.id not in self.router.terminators:
                    continue
                if term.session.encryption_required and not term.public_key:
                    reason = checks.ENCRYPTION_MISSING
                    continue
                headers = _dial_headers(m, term, caller, circuit_id)
                hosted = self._register_accept(term, circuit_id, headers) if host.router_conn_ids else None
                try:
                    reply = await host.request(Content.DIAL, headers, term.session.token.encode(),
                                               min(self.timeout, left))
                except TimeoutError:
                    term.failures = strategy.penalised(term.failures, "timeout")
                    cause = "ROUTER_ERR_DIAL_TIMED_OUT"
                    reason = "timeout waiting for the hosting application to accept the dial"
                    self._forget_accept(hosted)
                    continue
                except ConnectionError:
                    self._forget_accept(hosted)
                    continue
                if reply.content != Content.DIAL_SUCCESS:
                    term.failures = strategy.penalised(term.failures, "error")
                    cause = "ROUTER_ERR_GENERIC"
                    reason = reply.body.decode("utf-8", "replace") or "dial failed"
                    self._forget_accept(hosted)
                    continue
                if hosted is None:
                    hosted_id = int.from_bytes(reply.body[:4], "little") if len(reply.body) >= 4 else None
                    if hosted_id is None or hosted_id in host.conns:
                        reason = "hosting application answered with an unusable connection id"
                        continue
                    hosted = Conn(host, hosted_id, term.session.id, circuit_id, "hosted")
                    hosted.grant = (term.session.identity_id, term.session.service_id, "Bind")
                elif hosted.closed:   # the host closed the accepted connection already
                    self._forget_accept(hosted)
                    reason = "the hosting application closed the connection"
                    continue
                if pending.cancelled or ch.closed or term.id not in self.router.terminators or host.closed:
                    # the dialer gave up (or the host went) meanwhile: close the accepted side
                    self._forget_accept(hosted)
                    self.reject_accept(host, reply, term.conn_id, b"dialer gone")
                    return
                term.failures = strategy.penalised(term.failures, "success")
                self._connect(ch, m, cid, sess, term, hosted, reply, circuit_id, started,
                              assigned=H.ROUTER_PROVIDED_CONN_ID in headers)
                return
            if not ch.closed and not pending.cancelled:
                reports.circuit_failed(self.router.ctl.events, circuit_id, session_id=sess.id,
                                      service_id=sess.service_id, router_id=self.router.router_id,
                                      client_identity_id=sess.identity_id, cause=cause,
                                      creation_seconds=loop.time() - started)
                self.router.refuse(ch, m, cid, reason)
        finally:
            if self.pending.get(key) is pending:
                del self.pending[key]

    def _register_accept(self, term: Terminator, circuit_id: str, headers: dict[int, bytes]) -> Conn:
        """The router-assigned id of the host's accepted connection, registered before the Dial
        goes out (as upstream's router): the host sends its crypto header on this id right after
        its DialSuccess, which is kept in ``early`` until the dialer is connected."""
        host = term.channel
        hosted_id = self._new_conn_id(host)
        headers[H.ROUTER_PROVIDED_CONN_ID] = wire.u32(hosted_id)
        hosted = Conn(host, hosted_id, term.session.id, circuit_id, "hosted")
        hosted.grant = (term.session.identity_id, term.session.service_id, "Bind")
        host.conns[hosted_id] = hosted
        self.early[(id(host), hosted_id)] = []
        return hosted

    def _connect(self, ch: Channel, m: Message, cid: int, sess: checks.Session, term: Terminator, hosted: Conn,
                 reply: Message, circuit_id: str, started: float, assigned: bool) -> None:
        """The host accepted: the circuit joins the dialer's connection and the host's."""
        host = term.channel
        dialer = Conn(ch, cid, sess.id, circuit_id, "dial")
        dialer.peer, hosted.peer = hosted, dialer
        dialer.grant = (sess.identity_id, sess.service_id, "Dial")
        ch.conns[cid] = dialer
        host.conns[hosted.id] = hosted
        self.router.circuits += 1
        facts: dict = {"session_id": sess.id, "service_id": sess.service_id, "terminator_id": term.id,
                       "instance_id": term.instance_id, "router_id": self.router.router_id,
                       "client_identity_id": sess.identity_id, "host_identity_id": term.session.identity_id}
        self.circuit_facts[circuit_id] = {**facts, "started": started}
        reports.circuit_created(self.router.ctl.events, circuit_id, **facts, cost=term.cost,
                               creation_seconds=asyncio.get_running_loop().time() - started, ingress_id=f"{cid}",
                               egress_id=f"{hosted.id}")
        # the host's accepted connection first, then the dialer: both are connected before either
        # one's first data (its crypto header) can reach the other. An SDK with router-assigned
        # ids is connected by its DialSuccess already.
        if not assigned:
            host.reply(reply, Content.STATE_CONNECTED, {H.CONN_ID: wire.u32(term.conn_id), H.SEQ: wire.u32(0)})
        out = {H.CONN_ID: wire.u32(cid), H.SEQ: wire.u32(0), H.CIRCUIT_ID: circuit_id.encode()}
        if term.public_key:
            out[H.PUBLIC_KEY] = term.public_key
        ch.reply(m, Content.STATE_CONNECTED, out)
        for early in self.early.pop((id(host), hosted.id), ()):   # now the dialer may see them
            self.router.data(host, early)

    def _forget_accept(self, hosted: Conn | None) -> None:
        """Drop a router-assigned id registered for a Dial that did not connect."""
        if hosted is None:
            return
        self.early.pop((id(hosted.channel), hosted.id), None)
        if hosted.channel.conns.get(hosted.id) is hosted:
            del hosted.channel.conns[hosted.id]

    def reject_accept(self, host: Channel, reply: Message, bind_id: int, reason: bytes) -> None:
        """StateClosed for a DialSuccess whose dial is over. An SDK with router-assigned ids
        (Go, C >= 1.6) already runs the accepted connection and takes a StateClosed on the bind
        id as the end of its listener: it gets one on the accepted connection's id (the
        DialSuccess body). A legacy SDK waits for the reply to its DialSuccess."""
        if host.closed:
            return
        if host.router_conn_ids and len(reply.body) == 4:
            host.send(Content.STATE_CLOSED, {H.CONN_ID: reply.body, H.SEQ: wire.u32(0)}, reason)
        else:
            host.reply(reply, Content.STATE_CLOSED, {H.CONN_ID: wire.u32(bind_id), H.SEQ: wire.u32(0)}, reason)

    def _new_conn_id(self, ch: Channel) -> int:
        """0x80000000 and up, per channel, skipping ids in use (as upstream's router)."""
        n = ch.next_router_id
        while True:
            n = n + 1 if ROUTER_ID_BASE <= n < 0xFFFFFFFF else ROUTER_ID_BASE
            if n not in ch.conns:
                ch.next_router_id = n
                return n


def _dial_headers(m: Message, term: Terminator, caller: bytes, circuit_id: str) -> dict[int, bytes]:
    """The Dial's headers to the host: its bind's id, the caller, the circuit, and what the
    dialer sent along (its public key, app data)."""
    headers = {H.CONN_ID: wire.u32(term.conn_id), H.SEQ: wire.u32(0), H.CALLER_ID: caller,
               H.CIRCUIT_ID: circuit_id.encode()}
    pk = m.headers.get(H.PUBLIC_KEY)
    if pk:
        headers[H.PUBLIC_KEY] = pk
    app_data = m.headers.get(H.APP_DATA)
    if app_data is not None:
        headers[H.APP_DATA] = app_data
    return headers
