"""One real router's control-channel connection: framing, replies, requests and heartbeats.

An asyncio protocol over the TLS connection a ``ziti router`` opens to ``--ctrl-port``. Bytes are
cut into messages by ``channel.wire.Decoder`` (the same channel format SDKs speak, with its limits:
a peer can never make us buffer more than one bounded message). Replies to our requests (Route)
resolve their futures; heartbeats are answered here; everything else goes to the server, which
knows the router. Outgoing messages carry a heartbeat header every ``heartbeat`` seconds, and a
router that has not answered one for ``timeout`` seconds is closed, as upstream's controller
does (10 s and 30 s by default).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import TYPE_CHECKING

from .. import tls
from ..channel import wire
from ..channel.replies import Replies
from ..channel.wire import Content, H, Message

if TYPE_CHECKING:  # pragma: no cover
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

MAX_HEADERS = 64 * 1024
MAX_BODY = 4 * 1024 * 1024           # the largest message a router may send (metrics are ~2 KB)
WRITE_LIMIT = 16 * 1024 * 1024       # a router that stops reading is closed at this much queued
PIECE = 64 * 1024                    # a large message is handed to TLS this much at a time


class RouterChannel(asyncio.Protocol):
    def __init__(self, server: CtrlServer):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.decoder = wire.Decoder(MAX_HEADERS, MAX_BODY)
        self.seq = 0
        self.replies = Replies()
        self.fingerprints: set[str] = set()   # SHA-1 of the verified client certificate
        self.peer_name = "?"
        self.router_id: str | None = None     # set when the hello is accepted
        self.name = ""
        self.ready = False                    # ClientHello received: the router is online
        self.closed = False
        self.close_reason = ""
        self.last_beat_answer = time.monotonic()
        self.last_beat_sent = 0.0
        self.beat_due = False
        self._pending_beat = b""
        self._torn = False
        self.opened = time.monotonic()
        self.version = ""                     # the hello's version header (version|revision|...)
        self.listeners: list[dict] = []       # link listeners declared in the hello
        # what the router was told (sync.py): API session id -> (token, identity, fingerprints),
        # and session token -> (session id, (identity, service, type)) of the sessions it used
        self.api_sessions: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        self.sessions: dict[str, tuple[str, tuple[str, str, str]]] = {}
        self.connected: set[str] = set()      # identities with SDKs connected to the router (ConnectEvents)
        # a v2 router's grouped channel: this is its first underlay (group: connection id and
        # secret; underlays: the later ones), or a later one (primary: the first)
        self.group: tuple[str, bytes] | None = None
        self.underlays: set[RouterChannel] = set()
        self.primary: RouterChannel | None = None
        # a large message being written piece by piece (send_large), the messages sent meanwhile
        # (they follow it), and whether the connection asked us to stop writing
        self._large: tuple[memoryview, int] | None = None
        self._held: list[bytes] = []
        self._paused = False

    # ------------------------------------------------------------------ asyncio protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer_name = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.opened(self)
        chain = tls.client_chain(transport)
        problem = self.server.verify_chain(chain)
        if problem:
            self.server.refuse(self, problem)
            return
        self.fingerprints.add(hashlib.sha1(chain[0]).hexdigest())

    def data_received(self, data: bytes) -> None:
        try:
            messages = self.decoder.feed(data)
        except wire.WireError as e:
            log.warning("control channel %s: %s; closing", self.label, e)
            self.close(str(e))
            return
        for m in messages:
            if self.closed:
                return
            try:
                self._dispatch(m)
            except Exception:  # a bug handling one message must not take the listener down
                log.exception("control channel %s: error handling content type %s", self.label, m.content)
                self.close("internal error")
                return

    def _dispatch(self, m: Message) -> None:
        beat = m.headers.get(H.HEARTBEAT)
        if beat is not None and len(beat) == 8:
            self.beat_due = True
            self._pending_beat = beat
        # a later underlay of a group carries the logical channel's traffic: its replies, its
        # heartbeat answers and its requests are the first underlay's (we send on that one)
        logical = self.primary or self
        if H.HEARTBEAT_RESPONSE in m.headers:
            logical.last_beat_answer = time.monotonic()
        if m.content != Content.HELLO and logical.replies.resolve(m):
            return
        if m.content == Content.HEARTBEAT:
            self._answer_beat()
            return
        self.server.received(logical if m.content != Content.HELLO else self, m)

    def connection_lost(self, exc) -> None:
        self._teardown(self.close_reason or ("connection lost" if exc is None else str(exc)))

    def eof_received(self) -> bool:
        return False

    # ------------------------------------------------------------------ sending
    @property
    def label(self) -> str:
        return f"{self.name or self.router_id or '?'}@{self.peer_name}"

    def _answer_beat(self) -> None:
        if self.beat_due:
            self.send(Content.HEARTBEAT, {})

    def _next(self, headers: dict[int, bytes], seq: int | None) -> tuple[dict[int, bytes], int]:
        if seq is None:
            self.seq += 1
            seq = self.seq
        if self.beat_due:   # the router's last heartbeat goes back on our next message
            headers = {**headers, H.HEARTBEAT_RESPONSE: self._pending_beat}
            self.beat_due = False
        return headers, seq

    def send(self, content: int, headers: dict[int, bytes], body: bytes = b"", seq: int | None = None) -> int:
        headers, seq = self._next(headers, seq)
        t = self.transport
        if self.closed or t is None:
            return seq
        if self._large is not None:     # after the large message being written
            self._held.append(wire.encode(content, seq, headers, body))
            if sum(len(d) for d in self._held) > WRITE_LIMIT:
                log.warning("control channel %s: router stopped reading; closing", self.label)
                self.close("router stopped reading")
            return seq
        t.write(wire.encode(content, seq, headers, body))
        if t.get_write_buffer_size() > WRITE_LIMIT:
            log.warning("control channel %s: router stopped reading; closing", self.label)
            self.close("router stopped reading")
        return seq

    def send_large(self, content: int, headers: dict[int, bytes], body: bytes) -> int:
        """Send a large message (the router data model's full state) without copying it: its body
        goes to TLS a piece at a time as the connection drains, so ten routers taking one 5 MB
        state hold one body and a few pieces each, not ten encrypted copies. Messages sent
        meanwhile follow it."""
        if self._large is not None or self.transport is None or self.closed:
            return self.send(content, headers, body)
        headers, seq = self._next(headers, None)
        self.transport.write(wire.encode_head(content, seq, headers, len(body)))
        self._large = (memoryview(body), 0)
        self._pump()
        return seq

    def _pump(self) -> None:
        if self._large is None:
            return
        t = self.transport
        if self.closed or t is None:
            self._large, self._held = None, []
            return
        view, pos = self._large
        while not self._paused and pos < len(view):
            t.write(view[pos:pos + PIECE])
            pos += PIECE
        if pos < len(view):
            self._large = (view, pos)
            return
        self._large = None
        held, self._held = self._held, []
        for data in held:
            t.write(data)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._pump()

    def reply(self, to: Message, content: int, headers: dict[int, bytes], body: bytes = b"") -> None:
        self.send(content, {H.REPLY_FOR: wire.i32(to.seq), **headers}, body)

    def result(self, to: Message, ok: bool, text: str = "") -> None:
        """A channel Result answering ``to``: success, or failure with a text."""
        self.reply(to, Content.RESULT, {H.RESULT_SUCCESS: b"\x01" if ok else b"\x00"}, text.encode())

    def request(self, content: int, headers: dict[int, bytes], body: bytes, timeout: float) -> asyncio.Future:
        """Send a message that expects a reply (``channel/replies.py``)."""
        return self.replies.request(lambda: self.send(content, headers, body), self.closed, timeout)

    def heartbeat(self, interval: float, timeout: float) -> None:
        """Called about once a second: send our heartbeat when due, close an unresponsive router."""
        now = time.monotonic()
        if self.closed:
            return
        if self.primary is not None:   # the logical channel's heartbeats go on its first underlay
            if self.beat_due:
                self._answer_beat()
            return
        if now - self.last_beat_answer > timeout:
            log.warning("control channel %s: no heartbeat answer for %.0f s; closing", self.label, timeout)
            self.close("heartbeat timeout")
            return
        if self.beat_due:
            self._answer_beat()
        if now - self.last_beat_sent >= interval:
            self.last_beat_sent = now
            self.send(Content.HEARTBEAT, {H.HEARTBEAT: wire.U64.pack(time.time_ns())})

    # ------------------------------------------------------------------ closing
    def close(self, reason: str = "") -> None:
        if self.closed:
            return
        self.close_reason = reason
        if self.transport is not None:
            self.transport.close()
            asyncio.get_running_loop().call_later(2.0, self._abort)
        self._teardown(reason)

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _teardown(self, reason: str) -> None:
        if self._torn:
            return
        self._torn = self.closed = True
        self.replies.fail_all()
        self.server.lost(self, reason)

