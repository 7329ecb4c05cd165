"""The channel wire format that SDKs speak to an edge router (OpenZiti channel "V2").

One message is a 20-byte prefix (magic ``03 06 09 0C``, then little-endian int32 content type,
int32 sequence, uint32 header-block length, uint32 body length), the header block (repeated
``int32 id, uint32 length, value``) and the body. ``Decoder`` cuts messages out of a byte
stream with limits on both lengths, so a peer can never make the router buffer more than one
bounded message; anything malformed raises ``WireError`` and the channel is closed.

The numbers (content types, header ids, edge error codes) are those of the edge protocol as
described in ``shared/reference/behaviour/edge-protocol.md``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAGIC = b"\x03\x06\x09\x0c"
UNKNOWN_VERSION = b"\x03\x06\x09\x0a"   # what a Go channel answers to a bad magic before closing
PREFIX = struct.Struct("<4siiII")
HEADER = struct.Struct("<iI")
U32 = struct.Struct("<I")
I32 = struct.Struct("<i")
U64 = struct.Struct("<Q")

HELLO_SEQUENCE = -1
MAX_HELLO = 4192                     # headers and body of a hello, each (as the Go channel)
MAX_HEADERS = 64 * 1024              # header block of any later message
MAX_BODY = 16 * 1024 * 1024          # body of any later message (only after a hello)


class Content:
    """Content types: channel level, then edge."""
    HELLO = 0
    PING = 1
    RESULT = 2
    LATENCY = 3
    LATENCY_RESPONSE = 4
    HEARTBEAT = 5
    CONNECT = 60783
    STATE_CONNECTED = 60784
    STATE_CLOSED = 60785
    DATA = 60786
    DIAL = 60787
    DIAL_SUCCESS = 60788
    DIAL_FAILED = 60789
    BIND = 60790
    UNBIND = 60791
    STATE_SESSION_ENDED = 60792
    PROBE = 60793
    UPDATE_BIND = 60794
    HEALTH_EVENT = 60795
    TRACE_ROUTE = 60796
    TRACE_ROUTE_RESPONSE = 60797
    CONN_INSPECT_REQUEST = 60798
    CONN_INSPECT_RESPONSE = 60799
    BIND_SUCCESS = 60800
    UPDATE_TOKEN_SUCCESS = 60801
    UPDATE_TOKEN_FAILURE = 60802
    UPDATE_TOKEN = 60803              # C SDK 1.5+; older SDKs send UpdateToken as 60800


class H:
    """Header ids: channel level (0-8, 128 reflected), then edge (1000+)."""
    CONNECTION_ID = 0
    REPLY_FOR = 1
    RESULT_SUCCESS = 2
    HELLO_VERSION = 4
    HEARTBEAT = 5
    HEARTBEAT_RESPONSE = 6
    ID = 8
    REFLECTED_MIN = 128
    REFLECTED_MAX = 255
    CONN_ID = 1000
    SEQ = 1001
    SESSION_TOKEN = 1002
    PUBLIC_KEY = 1003
    COST = 1004
    PRECEDENCE = 1005
    TERMINATOR_IDENTITY = 1006
    TERMINATOR_IDENTITY_SECRET = 1007
    CALLER_ID = 1008
    CRYPTO_METHOD = 1009
    FLAGS = 1010
    APP_DATA = 1011
    ROUTER_PROVIDED_CONN_ID = 1012
    HEALTH_STATUS = 1013
    ERROR_CODE = 1014
    TIMESTAMP = 1015
    TRACE_HOP_COUNT = 1016
    TRACE_HOP_TYPE = 1017
    TRACE_HOP_ID = 1018
    TRACE_SOURCE_REQUEST_ID = 1019
    TRACE_ERROR = 1020
    LISTENER_ID = 1021
    CONN_TYPE = 1022
    SUPPORTS_INSPECT = 1023
    SUPPORTS_BIND_SUCCESS = 1024
    CONNECTION_MARKER = 1025
    CIRCUIT_ID = 1026
    STICKINESS_TOKEN = 1027


FLAG_FIN = 1
PRECEDENCES = {0: "default", 1: "required", 2: "failed"}


class WireError(Exception):
    """The peer broke the framing; the channel must be closed."""


@dataclass(slots=True)
class Message:
    content: int
    seq: int = 0
    headers: dict[int, bytes] = field(default_factory=dict)
    body: bytes = b""

    # -- header accessors ------------------------------------------------------------------
    def u32(self, hid: int, default: int | None = None) -> int | None:
        """An unsigned integer header, read from up to 4 little-endian bytes (as the C SDK)."""
        v = self.headers.get(hid)
        if v is None or not v:
            return default
        return int.from_bytes(v[:4], "little")

    def i32(self, hid: int, default: int | None = None) -> int | None:
        v = self.headers.get(hid)
        if v is None or not v:
            return default
        return int.from_bytes(v[:4], "little", signed=len(v) >= 4)

    def flag(self, hid: int) -> bool:
        v = self.headers.get(hid)
        return v is not None and len(v) > 0 and v[0] != 0

    def text(self, hid: int, default: str = "") -> str:
        v = self.headers.get(hid)
        return default if v is None else v.decode("utf-8", "replace")

    @property
    def reply_for(self) -> int | None:
        return self.i32(H.REPLY_FOR)

    @property
    def conn_id(self) -> int | None:
        return self.u32(H.CONN_ID)

    # -- encoding --------------------------------------------------------------------------
    def encode(self) -> bytes:
        return encode(self.content, self.seq, self.headers, self.body)


def u32(n: int) -> bytes:
    return U32.pack(n & 0xFFFFFFFF)


def i32(n: int) -> bytes:
    return I32.pack(n)


def encode(content: int, seq: int, headers: dict[int, bytes], body: bytes = b"") -> bytes:
    return b"".join((encode_head(content, seq, headers, len(body)), body))


def encode_head(content: int, seq: int, headers: dict[int, bytes], body_length: int) -> bytes:
    """A message's bytes before its body (of ``body_length`` bytes): for a body written apart."""
    parts = []
    for hid, value in headers.items():
        parts.append(HEADER.pack(hid, len(value)))
        parts.append(value)
    block = b"".join(parts)
    return b"".join((PREFIX.pack(MAGIC, content, seq, len(block), body_length), block))


# a relayed data frame's prefix and headers (connection id, sequence, and flags when the
# sender gave them) in one pack: the same bytes as ``encode`` with {CONN_ID, SEQ[, FLAGS]}
_DATA_HEAD = struct.Struct("<4siiIIiIIiI4s")
_DATA_HEAD_FLAGS = struct.Struct("<4siiIIiIIiI4siI")


def encode_data(seq: int, conn_id: int, data_seq: bytes, flags: bytes | None, body: bytes) -> bytes:
    """``encode(Content.DATA, seq, {CONN_ID: u32(conn_id), SEQ: data_seq[, FLAGS: flags]}, body)``
    for the relay's hot path: one struct pack and one join instead of a header loop."""
    if len(data_seq) != 4 or (flags is not None and len(flags) != 4):  # not as SDKs send them
        h = {H.CONN_ID: u32(conn_id), H.SEQ: data_seq}
        if flags is not None:
            h[H.FLAGS] = flags
        return encode(Content.DATA, seq, h, body)
    conn_id &= 0xFFFFFFFF
    if flags is None:
        head = _DATA_HEAD.pack(MAGIC, Content.DATA, seq, 24, len(body), H.CONN_ID, 4, conn_id, H.SEQ, 4, data_seq)
    else:
        head = _DATA_HEAD_FLAGS.pack(MAGIC, Content.DATA, seq, 36, len(body), H.CONN_ID, 4, conn_id, H.SEQ, 4,
                                     data_seq, H.FLAGS, 4) + flags
    return head + body


# the header block of a data frame as SDKs send it: CONN_ID, SEQ and perhaps FLAGS, 4 bytes each,
# in any order (a Go channel writes its headers in map order)
_TWO = struct.Struct("<iIIiII")
_THREE = struct.Struct("<iIIiIIiII")
_DATA_IDS = (H.CONN_ID, H.SEQ, H.FLAGS)


def plain_data_conn(buf: bytes | bytearray | memoryview, at: int, hlen: int) -> tuple[int, int] | None:
    """For the header block of ``hlen`` bytes at ``at`` in ``buf``: when it holds only
    CONN_ID, SEQ and perhaps FLAGS, 4 bytes each, the connection id and the offset of its value
    in ``buf`` (a relay can then re-head the frame in place); otherwise None."""
    if hlen == 24:
        a, la, va, b, lb, vb = _TWO.unpack_from(buf, at)
        if la == 4 and lb == 4:
            if a == H.CONN_ID and b == H.SEQ:
                return va, at + 8
            if a == H.SEQ and b == H.CONN_ID:
                return vb, at + 20
    elif hlen == 36:
        a, la, va, b, lb, vb, c, lc, vc = _THREE.unpack_from(buf, at)
        if la == 4 and lb == 4 and lc == 4 and a != b and b != c and a != c and a in _DATA_IDS \
                and b in _DATA_IDS and c in _DATA_IDS:
            if a == H.CONN_ID:
                return va, at + 8
            if b == H.CONN_ID:
                return vb, at + 20
            return vc, at + 32
    return None


def parse_headers(block: bytes | memoryview) -> dict[int, bytes]:
    headers: dict[int, bytes] = {}
    pos, end = 0, len(block)
    while pos < end:
        if end - pos < 8:
            raise WireError("truncated header")
        hid, length = HEADER.unpack_from(block, pos)
        pos += 8
        if length > end - pos:
            raise WireError("header value runs past the header block")
        headers[hid] = bytes(block[pos:pos + length])
        pos += length
    return headers


def decode_one(data: bytes, max_size: int = MAX_HEADERS + MAX_BODY) -> Message:
    """Exactly one whole message, as an underlay that frames messages itself carries it (a
    WebSocket message: ``events/wsapi.py``); WireError if it is anything else."""
    if len(data) < PREFIX.size or len(data) > max_size:
        raise WireError("bad message size")
    magic, content, seq, hlen, blen = PREFIX.unpack_from(data)
    if magic != MAGIC or PREFIX.size + hlen + blen != len(data):
        raise WireError("bad channel message")
    headers = parse_headers(memoryview(data)[PREFIX.size:PREFIX.size + hlen]) if hlen else {}
    return Message(content, seq, headers, bytes(data[PREFIX.size + hlen:]))


class Decoder:
    """Feed bytes in, take whole messages out. The first message (the hello) has the small
    limits of a hello; every later one the general limits."""

    def __init__(self, max_headers: int = MAX_HEADERS, max_body: int = MAX_BODY):
        self._buf = bytearray()
        self._first = True
        self.max_headers, self.max_body = max_headers, max_body

    def feed(self, data: bytes) -> list[Message]:
        buf = self._buf
        buf += data
        out: list[Message] = []
        pos, n = 0, len(buf)
        while n - pos >= 20:
            magic, content, seq, hlen, blen = PREFIX.unpack_from(buf, pos)
            if magic != MAGIC:
                raise WireError("bad magic")
            hmax, bmax = (MAX_HELLO, MAX_HELLO) if self._first else (self.max_headers, self.max_body)
            if hlen > hmax or blen > bmax:
                raise WireError(f"message too large (headers {hlen}, body {blen})")
            end = pos + 20 + hlen + blen
            if end > n:
                break
            view = memoryview(buf)
            headers = parse_headers(view[pos + 20:pos + 20 + hlen]) if hlen else {}
            body = bytes(view[pos + 20 + hlen:end])
            view.release()
            out.append(Message(content, seq, headers, body))
            self._first = False
            pos = end
        if pos:
            del buf[:pos]
        if n - pos >= 4 and buf[:4] != MAGIC:
            raise WireError("bad magic")
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)
