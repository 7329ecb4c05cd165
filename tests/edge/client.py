"""A pure-Python client of the SDK ↔ edge-router protocol, for what real SDKs never send
(malformed frames, floods, peers that stop reading, hosts that never answer) and for the
data-plane benchmark. It speaks the wire format on its own (``encode``/``parse`` below), not
through ziti-lite's codec, so the two implementations check each other.

    c = await EdgeClient.open(host, port, identity)      # TLS with the identity's certificate
    await c.hello(api_session_token)
    reply = await c.bind(conn_id, bind_session_token)    # StateConnected or StateClosed
    reply = await c.dial(conn_id, dial_session_token)    # StateConnected or StateClosed
    c.data(conn_id, b"bytes")                            # relayed to the peer connection
    msg = await c.next(conn_id)                          # next message for that connection
    dial = await c.dials.get()                           # a Dial sent to this host
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import struct
import tempfile
from dataclasses import dataclass, field

MAGIC = b"\x03\x06\x09\x0c"
HELLO, RESULT, LATENCY = 0, 2, 3
CONNECT, STATE_CONNECTED, STATE_CLOSED, DATA, DIAL, DIAL_SUCCESS, DIAL_FAILED, BIND, UNBIND = range(60783, 60792)
UPDATE_BIND, HEALTH_EVENT = 60794, 60795
BIND_SUCCESS = 60800
CONN_ID, SEQ, SESSION_TOKEN, PUBLIC_KEY, COST, PRECEDENCE = 1000, 1001, 1002, 1003, 1004, 1005
TERMINATOR_IDENTITY, CALLER_ID, FLAGS, APP_DATA, ROUTER_CONN_ID = 1006, 1008, 1010, 1011, 1012
SUPPORTS_BIND_SUCCESS, CIRCUIT_ID = 1024, 1026
REPLY_FOR, RESULT_SUCCESS = 1, 2


@dataclass
class Msg:
    content: int
    seq: int
    headers: dict[int, bytes] = field(default_factory=dict)
    body: bytes = b""

    def u32(self, hid: int) -> int | None:
        v = self.headers.get(hid)
        return None if v is None else int.from_bytes(v[:4], "little")


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def encode(content: int, seq: int, headers: dict[int, bytes], body: bytes = b"") -> bytes:
    block = b"".join(struct.pack("<iI", k, len(v)) + v for k, v in headers.items())
    return MAGIC + struct.pack("<iiII", content, seq, len(block), len(body)) + block + body


def parse(buf: bytearray) -> tuple[list[Msg], int]:
    """The whole messages at the start of ``buf`` and how many bytes they took."""
    out, pos, n = [], 0, len(buf)
    while n - pos >= 20:
        if buf[pos:pos + 4] != MAGIC:
            raise ValueError(f"bad magic {bytes(buf[pos:pos + 4])!r}")
        content, seq, hlen, blen = struct.unpack_from("<iiII", buf, pos + 4)
        end = pos + 20 + hlen + blen
        if end > n:
            break
        headers, at, stop = {}, pos + 20, pos + 20 + hlen
        while at < stop:
            hid, length = struct.unpack_from("<iI", buf, at)
            headers[hid] = bytes(buf[at + 8:at + 8 + length])
            at += 8 + length
        out.append(Msg(content, seq, headers, bytes(buf[stop:end])))
        pos = end
    return out, pos


@dataclass
class Identity:
    cert_pem: str
    key_pem: str
    ca_pem: str


def tls_context(identity: Identity | None, ca_pem: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem)
    if identity is not None:
        with tempfile.TemporaryDirectory() as d:
            cf, kf = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
            with open(cf, "w") as f:
                f.write(identity.cert_pem)
            with open(kf, "w") as f:
                f.write(identity.key_pem)
            ctx.load_cert_chain(cf, kf)
    return ctx


class EdgeClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.seq = 0
        self.waiters: dict[int, asyncio.Future] = {}
        self.conns: dict[int, asyncio.Queue] = {}
        self.dials: asyncio.Queue = asyncio.Queue()
        self.other: asyncio.Queue = asyncio.Queue()
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, host: str, port: int, identity: Identity | None, ca_pem: str | None = None,
                   limit: int = 2 ** 20) -> EdgeClient:
        ctx = tls_context(identity, ca_pem or identity.ca_pem)
        reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host, limit=limit)
        return cls(reader, writer)

    async def _read(self) -> None:
        buf = bytearray()
        try:
            while True:
                data = await self.reader.read(1 << 20)   # whatever arrived: messages cut out below
                if not data:
                    break
                buf += data
                messages, used = parse(buf)
                del buf[:used]
                for m in messages:
                    self._deliver(m)
        except (ConnectionError, ssl.SSLError, ValueError, OSError):
            pass
        finally:
            self.closed.set()
            self.writer.close()   # our end too (the loop may end before anyone calls close())
            with contextlib.suppress(TimeoutError, ConnectionError, ssl.SSLError, OSError):
                await asyncio.wait_for(self.writer.wait_closed(), 2)
            for fut in self.waiters.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("closed"))

    def _deliver(self, m: Msg) -> None:
        rf = m.headers.get(REPLY_FOR)
        if rf is not None:
            fut = self.waiters.pop(int.from_bytes(rf, "little", signed=True), None)
            if fut is not None and not fut.done():
                fut.set_result(m)
                return
        if m.content == DIAL:
            self.dials.put_nowait(m)
        elif CONNECT <= m.content <= UNBIND and CONN_ID in m.headers:
            self.queue(m.u32(CONN_ID)).put_nowait(m)
        else:
            self.other.put_nowait(m)

    def queue(self, conn_id: int) -> asyncio.Queue:
        q = self.conns.get(conn_id)
        if q is None:
            q = self.conns[conn_id] = asyncio.Queue()
        return q

    # ------------------------------------------------------------------ sending
    def send(self, content: int, headers: dict[int, bytes], body: bytes = b"") -> int:
        seq = self.seq
        self.seq += 1
        self.writer.write(encode(content, seq, headers, body))
        return seq

    def raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def request(self, content: int, headers: dict[int, bytes], body: bytes = b"", timeout: float = 10) -> Msg:
        fut = asyncio.get_running_loop().create_future()
        seq = self.send(content, headers, body)
        self.waiters[seq] = fut
        return await asyncio.wait_for(fut, timeout)

    def reply(self, to: Msg, content: int, headers: dict[int, bytes], body: bytes = b"") -> int:
        return self.send(content, {REPLY_FOR: struct.pack("<i", to.seq), **headers}, body)

    async def hello(self, token: str) -> Msg:
        return await self.request(HELLO, {SESSION_TOKEN: token.encode()}, b"ziti-lite-test-client")

    async def bind(self, conn_id: int, token: str, **extra: bytes) -> Msg:
        headers = {CONN_ID: u32(conn_id), SEQ: u32(0), **{int(k[1:]): v for k, v in extra.items()}}
        return await self.request(BIND, headers, token.encode())

    async def dial(self, conn_id: int, token: str, timeout: float = 10, **extra: bytes) -> Msg:
        headers = {CONN_ID: u32(conn_id), SEQ: u32(0), **{int(k[1:]): v for k, v in extra.items()}}
        return await self.request(CONNECT, headers, token.encode(), timeout)

    def accept(self, dial: Msg, new_conn_id: int) -> asyncio.Future:
        """Answer a Dial with DialSuccess; the future ends with the router's StateConnected."""
        fut = asyncio.get_running_loop().create_future()
        seq = self.reply(dial, DIAL_SUCCESS, {CONN_ID: dial.headers[CONN_ID], SEQ: u32(0)}, u32(new_conn_id))
        self.waiters[seq] = fut
        return fut

    def data(self, conn_id: int, payload: bytes, fin: bool = False) -> None:
        headers = {CONN_ID: u32(conn_id), SEQ: u32(0)}
        if fin:
            headers[FLAGS] = u32(1)
        self.send(DATA, headers, payload)

    async def drain(self) -> None:
        await self.writer.drain()

    async def next(self, conn_id: int, timeout: float = 10) -> Msg:
        return await asyncio.wait_for(self.queue(conn_id).get(), timeout)

    async def close(self) -> None:
        self._task.cancel()
        self.writer.close()
        with contextlib.suppress(TimeoutError, ConnectionError, ssl.SSLError, OSError):
            await asyncio.wait_for(self.writer.wait_closed(), 2)
