"""One SDK's TLS connection to the embedded edge router: framing, replies, and flow control.

A ``Channel`` is an asyncio buffered protocol: the TLS layer decrypts straight into a read
buffer shared by every channel of the thread (``get_buffer``), where the messages are cut out
with the limits of ``wire`` (a hello's, then the general ones). A data frame of an open circuit
whose headers are the usual ones (connection id, sequence, flags) is re-headed in place (the
peer's connection id and the channel's sequence) and copied out once, to the peer's channel
(consecutive ones for the same peer as one write); every other message becomes a
``wire.Message`` for the router. Only an incomplete message (or what waits while reading is
paused) is kept per channel, so an idle channel holds no buffer; a message larger than
``OWN_BUFFER_ABOVE`` is read into a buffer of its own size. Latency probes are answered right
here, so a busy router still answers them within the SDK's 10 s. Outgoing control messages go
straight to the transport.

Relayed data is bounded per connection. While the transport's buffer is below its high-water
mark, data is written through; above it, data waits in the destination ``Conn``'s own queue and
is written out fairly (round robin) as the transport drains. When one connection has more than
``CONN_QUEUE`` bytes waiting, the channel that feeds it stops reading until the queue is below
half that, and likewise when all connections of one receiving channel together hold more than
``CHANNEL_QUEUE``; if it stays full for ``STALL_SECONDS`` the stuck connection is closed and the
feeding channel reads again. A transport whose own buffer (control messages) passes ``CHANNEL_BUFFER``
is a peer that stopped reading: its channel is closed. So memory is bounded whatever a peer
does, and one stuck receiver costs only its own senders a few seconds.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from ..channel import wire
from ..channel.replies import Replies
from ..channel.wire import Content, H, Message

if TYPE_CHECKING:  # pragma: no cover
    from ..routing.checks import ApiSession
    from .router import EdgeRouter, Terminator

log = logging.getLogger("ziti_lite.edge")

HIGH_WATER = 256 * 1024       # transport buffer above which relayed data waits in its conn queue
CONN_QUEUE = 1024 * 1024      # bytes one connection may have waiting before its source pauses
CHANNEL_QUEUE = 16 * 1024 * 1024  # bytes all connections of one channel may have waiting
CHANNEL_BUFFER = 8 * 1024 * 1024  # a transport buffer this full: the peer does not read; close
STALL_SECONDS = 5.0           # a connection blocked this long is closed
HELLO_SECONDS = 10.0          # time allowed between the TLS handshake and the hello
READ_BUFFER = 256 * 1024      # the read buffer shared by the channels of a thread
OWN_BUFFER_ABOVE = 64 * 1024  # an incomplete message larger than this is read into its own buffer

_PREFIX = wire.PREFIX
_MAGIC = wire.MAGIC
_DATA = Content.DATA
_SEQ_AT = wire.I32.pack_into
_CONN_AT = wire.U32.pack_into
_plain_data_conn = wire.plain_data_conn
_buffers = threading.local()


def _shared_buffer() -> memoryview:
    """The read buffer of this thread's loop: a channel's bytes are cut into messages (and
    copied out) before the next read of any channel."""
    view = getattr(_buffers, "view", None)
    if view is None:
        view = _buffers.view = memoryview(bytearray(READ_BUFFER))
    return view


class Conn:
    """One end of a circuit on one channel: the SDK's connection id there, and its peer."""

    __slots__ = ("channel", "id", "peer", "session_id", "queue", "queued", "circuit_id", "out_seq",
                 "blocking", "blocked_since", "closed", "kind", "grant")

    def __init__(self, channel: Channel, conn_id: int, session_id: str, circuit_id: str, kind: str):
        self.channel = channel
        self.id = conn_id
        self.peer: Conn | None = None
        self.session_id = session_id      # the Dial or Bind session this end runs under
        self.circuit_id = circuit_id
        self.kind = kind                  # "dial" | "hosted"
        self.queue: collections.deque[bytes] = collections.deque()
        self.queued = 0
        self.out_seq = 0
        self.blocking: Channel | None = None   # the source channel paused because of this conn
        self.blocked_since = 0.0
        self.closed = False               # no more data is accepted for it (queued data still goes)
        self.grant: tuple[str, str, str] = ("", "", "")  # (identity, service, type) of its session


class Channel(asyncio.BufferedProtocol):
    def __init__(self, router: EdgeRouter):
        self.router = router
        self.transport: asyncio.Transport | None = None
        # reading: the buffer of the current read (the shared one, or one of the message's
        # size), the end of the bytes in it, and what is kept between reads (an incomplete
        # message, or messages not handled while reading is paused)
        self._rbuf: memoryview = _shared_buffer()
        self._rend = 0
        self._own: memoryview | None = None
        self._rest = b""
        self._hello = True                 # the first message has a hello's limits
        self._scanning = False
        self.seq = 0
        self.replies = Replies()
        self.api_session: ApiSession | None = None   # once the hello passed
        self.fingerprint: str | None = None
        self.peer_name = ""
        self.conns: dict[int, Conn] = {}   # SDK connection id -> circuit end (dial/hosted)
        self.binds: dict[int, Terminator] = {}   # bind connection id -> its terminator
        self.closed = False
        self.writable = True
        self.ready: collections.deque[Conn] = collections.deque()   # conns with queued data
        self.queued = 0                    # bytes waiting in all conn queues of this channel
        self.blocked: set[Conn] = set()    # conns of this channel whose source channel waits
        self.paused_by: set[Conn] = set()  # conns of other channels this one's reading waits for
        self.reading_paused = False
        self.hello_timer: asyncio.TimerHandle | None = None
        self.router_conn_ids = False       # the SDK asked for router-assigned ids (1012 on Bind)
        self.supports_bind_success = False
        self.next_router_id = 0            # last router-assigned connection id (newer SDKs)
        self.bytes_in = 0
        self.bytes_out = 0

    # ------------------------------------------------------------------ asyncio protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER)
        sslobj = transport.get_extra_info("ssl_object")
        der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
        self.fingerprint = hashlib.sha1(der).hexdigest() if der else None
        peer = transport.get_extra_info("peername")
        self.peer_name = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.hello_timer = asyncio.get_running_loop().call_later(HELLO_SECONDS, self._no_hello)
        self.router.channel_opened(self)

    def _no_hello(self) -> None:
        if self.api_session is None:
            self.close("no hello")

    # ------------------------------------------------------------------ reading
    def get_buffer(self, sizehint: int) -> memoryview:
        own = self._own
        if own is not None:          # the rest of one large message
            return own[self._rend:]
        buf = _shared_buffer()
        rest = self._rest
        n = len(rest)
        if n:                        # kept until buffer_updated: the read may bring nothing
            buf[:n] = rest
        self._rbuf, self._rend = buf, n
        return buf[n:]

    def buffer_updated(self, nbytes: int) -> None:
        self.bytes_in += nbytes
        self._rend += nbytes
        if self._own is not None:
            if self._rend < len(self._own):
                return
            self._own = None
        self._rest = b""
        self._scan(0)

    def _scan(self, pos: int) -> None:
        """Handle the whole messages in ``self._rbuf`` from ``pos`` up to ``self._rend``, in
        order, until reading pauses; keep the rest."""
        buf, end = self._rbuf, self._rend
        self._scanning = True
        run_to: Conn | None = None         # consecutive data frames for one peer: one copy, one write
        run_from = 0
        broken = ""
        try:
            while end - pos >= 20 and not self.reading_paused and not self.closed:
                magic, content, seq, hlen, blen = _PREFIX.unpack_from(buf, pos)
                if magic != _MAGIC:
                    broken = "bad magic"
                    break
                if (hlen > wire.MAX_HELLO or blen > wire.MAX_HELLO) if self._hello else \
                        (hlen > wire.MAX_HEADERS or blen > wire.MAX_BODY):
                    broken = f"message too large (headers {hlen}, body {blen})"
                    break
                stop = pos + 20 + hlen + blen
                if stop > end:
                    break
                self._hello = False
                if content == _DATA:
                    plain = _plain_data_conn(buf, pos + 20, hlen)
                    if plain is not None:
                        conn = self.conns.get(plain[0])
                        peer = conn.peer if conn is not None else None
                        if peer is not None:
                            if peer is not run_to:
                                if run_to is not None:
                                    run_to.channel.send_data(run_to, bytes(buf[run_from:pos]), self)
                                run_to, run_from = peer, pos
                            _SEQ_AT(buf, pos + 8, peer.channel.next_seq())
                            _CONN_AT(buf, plain[1], peer.id & 0xFFFFFFFF)
                            pos = stop
                            continue
                if run_to is not None:
                    run_to.channel.send_data(run_to, bytes(buf[run_from:pos]), self)
                    run_to = None
                    if self.reading_paused or self.closed:
                        break
                m = Message(content, seq, wire.parse_headers(buf[pos + 20:pos + 20 + hlen]) if hlen else {},
                            bytes(buf[pos + 20 + hlen:stop]))
                pos = stop
                self._dispatch(m)
            if run_to is not None:
                run_to.channel.send_data(run_to, bytes(buf[run_from:pos]), self)
            if broken:
                return self._broken(broken)
        except wire.WireError as e:
            return self._broken(str(e))
        except Exception:  # a bug handling one message must not take the router down
            log.exception("edge channel %s: error handling a message", self.peer_name)
            self.close("internal error")
            return
        finally:
            self._scanning = False
        if self.closed or pos == end:
            self._rest = b""
            return
        if not self.reading_paused and end - pos >= 4 and buf[pos:pos + 4] != _MAGIC:
            return self._broken("bad magic")
        if end - pos >= 20 and not self.reading_paused:
            _, _, _, hlen, blen = _PREFIX.unpack_from(buf, pos)
            size = 20 + hlen + blen
            if size > OWN_BUFFER_ABOVE:   # read the rest of it into a buffer of its own
                own = memoryview(bytearray(size))
                own[:end - pos] = buf[pos:end]
                self._own, self._rbuf, self._rend = own, own, end - pos
                return
        self._rest = bytes(buf[pos:end])

    def _dispatch(self, m: Message) -> None:
        if self.replies.resolve(m):
            return
        if m.content == Content.LATENCY:
            self.reply(m, Content.RESULT, {H.RESULT_SUCCESS: b"\x01"})
            return
        if m.content == Content.HEARTBEAT:
            beat = m.headers.get(H.HEARTBEAT)
            if beat is not None:  # answer a Go channel's heartbeat with its own value
                self.send(Content.HEARTBEAT, {H.HEARTBEAT_RESPONSE: beat})
            return
        self.router.received(self, m)

    def _broken(self, reason: str) -> None:
        log.info("edge channel %s: %s; closing", self.peer_name, reason)
        if reason == "bad magic" and self.transport is not None:
            self.transport.write(wire.UNKNOWN_VERSION)
        self._rest = b""
        self.close(reason)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc) -> None:
        self._teardown()

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        self._flush()

    # ------------------------------------------------------------------ sending
    @property
    def session(self) -> ApiSession:
        """The API session of a channel past its hello (the router checks before it asks)."""
        assert self.api_session is not None
        return self.api_session

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def send(self, content: int, headers: dict[int, bytes], body: bytes = b"", seq: int | None = None) -> int:
        """Write one control message now (never queued behind data). Returns its sequence."""
        if seq is None:
            seq = self.next_seq()
        self.write(wire.encode(content, seq, headers, body))
        return seq

    def write(self, frame: bytes) -> None:
        t = self.transport
        if self.closed or t is None:
            return
        t.write(frame)
        self.bytes_out += len(frame)
        if t.get_write_buffer_size() > CHANNEL_BUFFER:
            log.info("edge channel %s: peer stopped reading (%d bytes buffered); closing",
                     self.peer_name, t.get_write_buffer_size())
            self.close("peer stopped reading")

    def reply(self, to: Message, content: int, headers: dict[int, bytes], body: bytes = b"",
              seq: int | None = None) -> None:
        h = {H.REPLY_FOR: wire.i32(to.seq)}
        for hid, value in to.headers.items():   # reflected headers go back unchanged
            if H.REFLECTED_MIN <= hid <= H.REFLECTED_MAX:
                h[hid] = value
        h.update(headers)
        self.send(content, h, body, seq)

    def request(self, content: int, headers: dict[int, bytes], body: bytes, timeout: float) -> asyncio.Future:
        """Send a message that expects a reply (``channel/replies.py``)."""
        return self.replies.request(lambda: self.send(content, headers, body), self.closed, timeout)

    # ------------------------------------------------------------------ relayed data
    def send_data(self, conn: Conn, frame: bytes, source: Channel) -> None:
        """Relay one data frame to ``conn`` (an end on this channel), with flow control."""
        if self.closed or conn.closed:
            return
        if self.writable and not conn.queue:
            self.write(frame)
            return
        if not conn.queue:
            self.ready.append(conn)
        conn.queue.append(frame)
        conn.queued += len(frame)
        self.queued += len(frame)
        if ((conn.queued > CONN_QUEUE or self.queued > CHANNEL_QUEUE) and conn.blocking is None
                and source is not self):
            conn.blocking = source
            conn.blocked_since = time.monotonic()
            self.blocked.add(conn)
            source.pause_for(conn)

    def _flush(self) -> None:
        ready = self.ready
        while ready and self.writable and not self.closed:
            conn = ready.popleft()
            if not conn.queue:
                continue
            frame = conn.queue.popleft()
            conn.queued -= len(frame)
            self.queued -= len(frame)
            self.write(frame)
            if conn.queue:
                ready.append(conn)
        if self.blocked and self.queued <= CHANNEL_QUEUE // 2:
            for conn in [c for c in self.blocked if c.queued <= CONN_QUEUE // 2]:
                self._unblock(conn)

    def _unblock(self, conn: Conn) -> None:
        self.blocked.discard(conn)
        if conn.blocking is not None:
            src, conn.blocking = conn.blocking, None
            src.resume_for(conn)

    def send_last(self, conn: Conn, frame: bytes) -> None:
        """The final message of a closed end, after the data already queued for it."""
        if self.closed:
            return
        if not conn.queue:
            self.write(frame)
            return
        conn.queue.append(frame)
        conn.queued += len(frame)
        self.queued += len(frame)

    def pause_for(self, conn: Conn) -> None:
        self.paused_by.add(conn)
        if not self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_for(self, conn: Conn) -> None:
        self.paused_by.discard(conn)
        if not self.paused_by and self.reading_paused and not self.closed and self.transport is not None:
            self.reading_paused = False
            if self._rest and not self._scanning:   # what was read before the pause first
                rest, self._rest = self._rest, b""
                self._rbuf, self._rend = memoryview(bytearray(rest)), len(rest)
                self._scan(0)
            if not self.reading_paused and not self.closed:
                self.transport.resume_reading()

    def drop_queue(self, conn: Conn) -> None:
        self.queued -= conn.queued
        conn.queue.clear()
        conn.queued = 0
        self._unblock(conn)

    # ------------------------------------------------------------------ closing
    def close(self, reason: str = "") -> None:
        if self.closed:
            return
        if self.transport is not None:
            self.transport.close()
            # a peer that never reads would hold a graceful TLS close open: abort after a moment
            asyncio.get_running_loop().call_later(2.0, self._abort)
        self._teardown()

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _teardown(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.hello_timer is not None:
            self.hello_timer.cancel()
        self.replies.fail_all()
        for conn in list(self.paused_by):
            conn.blocking = None
            conn.channel.blocked.discard(conn)
        self.paused_by.clear()
        self.router.channel_lost(self)
