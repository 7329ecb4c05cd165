"""A pure-Python stand-in for a real router's control channel, for what a real ``ziti router``
never sends (malformed frames and protobuf, oversized messages, a silent router) and for
driving terminators and circuits step by step. It writes the channel framing and the few
protobuf messages it needs on its own (not through ziti-lite's codec), so the two check each
other; replies are matched by sequence, everything else lands on a queue.

    r = FakeRouter.connect(port, cert_pem, key_pem, ca_pem)
    result = r.hello(router_id)            # the hello's Result
    server_hello = r.expect(20000)
    r.client_hello("127.0.0.1", 4444)      # now online
"""

from __future__ import annotations

import queue
import socket
import ssl
import struct
import tempfile
import threading
import time

from tests.edge.client import MAGIC as MAGIC  # the tests of bad frames use it too
from tests.edge.client import Msg as EdgeMsg
from tests.edge.client import encode as frame


# ---------------------------------------------------------------- protobuf, written by hand
def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f_str(num: int, value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def f_int(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def f_map_u32_bytes(num: int, m: dict[int, bytes]) -> bytes:
    return b"".join(f_str(num, f_int(1, k) + f_str(2, v)) for k, v in m.items())


def read_pb(data: bytes) -> dict[int, list]:
    """field number -> values (ints, or bytes for length-delimited fields)."""
    out: dict[int, list] = {}
    pos = 0

    def rv() -> int:
        nonlocal pos
        n = shift = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
    while pos < len(data):
        key = rv()
        num, wt = key >> 3, key & 7
        if wt == 0:
            out.setdefault(num, []).append(rv())
        elif wt == 2:
            n = rv()
            out.setdefault(num, []).append(data[pos:pos + n])
            pos += n
        else:
            raise ValueError(f"wire type {wt}")
    return out


def strings(data: bytes, num: int) -> list[str]:
    return [v.decode() for v in read_pb(data).get(num, [])]


def u32_map(value: bytes) -> dict[int, bytes]:
    count, = struct.unpack_from("<I", value, 0)
    out, pos = {}, 4
    for _ in range(count):
        k, n = struct.unpack_from("<II", value, pos)
        out[k] = value[pos + 8:pos + 8 + n]
        pos += 8 + n
    return out


def string_slice(items: list[str]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(struct.pack("<I", len(s)) + s.encode() for s in items)


def u32_map_bytes(m: dict[int, bytes]) -> bytes:
    return struct.pack("<I", len(m)) + b"".join(struct.pack("<II", k, len(v)) + v for k, v in m.items())


# ---------------------------------------------------------------- the channel
class Msg(EdgeMsg):
    """A channel message as the edge tests' client reads it, with the reply it answers."""

    received = 0.0

    @property
    def reply_for(self) -> int | None:
        v = self.headers.get(1)
        return None if v is None else struct.unpack("<i", v[:4])[0]


class FakeRouter:
    def __init__(self, sock: ssl.SSLSocket):
        self.sock = sock
        self.answer_heartbeats = True     # as a real router does; False: a router that went silent
        self.seq = 0
        self.inbox: queue.Queue[Msg | None] = queue.Queue()
        self.kept: list[Msg] = []       # read while waiting for something else
        self.closed = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def connect(cls, port: int, cert_pem: str | None, key_pem: str | None, ca_pem: str) -> FakeRouter:
        ctx = ssl.create_default_context(cadata=ca_pem)
        ctx.check_hostname = False
        if cert_pem:
            with (tempfile.NamedTemporaryFile("w", suffix=".pem") as c,
                  tempfile.NamedTemporaryFile("w", suffix=".key") as k):
                c.write(cert_pem)
                c.flush()
                k.write(key_pem or "")
                k.flush()
                ctx.load_cert_chain(c.name, k.name)
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        sock.settimeout(0.02)
        return cls(sock)

    def _read(self) -> None:
        buf = b""
        try:
            while True:
                while len(buf) >= 20:
                    _, content, seq, hlen, blen = struct.unpack_from("<4siiII", buf)
                    if len(buf) < 20 + hlen + blen:
                        break
                    block, body = buf[20:20 + hlen], buf[20 + hlen:20 + hlen + blen]
                    buf = buf[20 + hlen + blen:]
                    headers, pos = {}, 0
                    while pos < len(block):
                        hid, n = struct.unpack_from("<iI", block, pos)
                        headers[hid] = block[pos + 8:pos + 8 + n]
                        pos += 8 + n
                    if 5 in headers and self.answer_heartbeats:
                        self.send(5, {6: headers[5]})
                    m = Msg(content, seq, headers, body)
                    m.received = time.monotonic()     # when it was read off the socket (benchmarks)
                    self.inbox.put(m)
                with self.lock:   # one thread in the TLS object at a time (reads poll briefly)
                    try:
                        data = self.sock.recv(65536)
                    except TimeoutError:
                        continue
                if not data:
                    break
                buf += data
        except (OSError, ValueError):
            pass
        self.close()
        self.closed.set()
        self.inbox.put(None)

    def send(self, content: int, headers: dict[int, bytes] | None = None, body: bytes = b"", seq: int | None = None,
             reply_to: Msg | None = None) -> int:
        with self.lock:
            if seq is None:
                self.seq += 1
                seq = self.seq
            h = dict(headers or {})
            if reply_to is not None:
                h[1] = struct.pack("<i", reply_to.seq)
            self.sock.sendall(frame(content, seq, h, body))
        return seq

    def raw(self, data: bytes) -> None:
        with self.lock:
            self.sock.sendall(data)

    def _next(self, match, timeout: float) -> Msg | None:
        """The first message (kept ones first) that ``match`` accepts; others are kept for later
        expectations, in order. None when none came in time or the channel closed."""
        for i, m in enumerate(self.kept):
            if match(m):
                del self.kept[i]
                return m
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                m = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if m is None:
                self.inbox.put(None)     # closed: every later wait ends at once too
                return None
            if match(m):
                return m
            self.kept.append(m)

    def expect(self, content: int, timeout: float = 5.0, where=None) -> Msg:
        """The next message of ``content`` (and ``where``), or AssertionError."""
        m = self._next(lambda m: m.content == content and (where is None or where(m)), timeout)
        if m is None:
            raise AssertionError(f"no message {content} (closed: {self.closed.is_set()})")
        return m

    def request(self, content: int, headers: dict[int, bytes] | None = None, body: bytes = b"",
                timeout: float = 5.0) -> Msg:
        seq = self.send(content, headers, body)
        return self.expect_reply(seq, timeout)

    def expect_reply(self, seq: int, timeout: float = 5.0) -> Msg:
        m = self._next(lambda m: m.reply_for == seq, timeout)
        if m is None:
            raise AssertionError("closed before the reply" if self.closed.is_set() else "no reply in time")
        return m

    def wait_closed(self, timeout: float = 5.0) -> bool:
        return self.closed.wait(timeout)

    # ---------------------------------------------------------- the router's side of the hello
    def hello(self, router_id: str, version: str = "v1.3.3|fake|2026-01-01|linux|amd64",
              link_listener: str | None = None) -> Msg:
        """``link_listener`` (``tls:host:port``): declare it and the LinkManagement capability."""
        headers = {4: version.encode()}
        if link_listener is not None:
            headers[10] = f_str(1, f_str(1, link_listener) + f_str(2, "tls"))
            headers[11] = f_str(1, varint(1))      # capabilities, packed: [LinkManagement]
        seq = self.send(0, headers, router_id.encode(), seq=-1)
        return self.expect_reply(seq)

    def hello_v2(self, router_id: str, *, first: bool = True, underlay: str = "ctrl.default",
                 connection_id: str | None = None, secret: bytes | None = None,
                 version: str = "v2.0.3|fake|2026-01-01|linux|amd64", link_listener: str | None = None,
                 extra: dict[int, bytes] | None = None) -> Msg:
        """The hello of a v2.0 router's grouped channel: 9 grouped, 7 underlay type, 11 first
        underlay, 1002 its capabilities (bit 1: the 1000+ header ids), listeners in 1000; a later
        underlay or a reconnect names the group (0) and its secret (10)."""
        headers = {4: version.encode(), 9: b"\x01", 7: underlay.encode(), 1002: b"\x02"}
        if first:
            headers[11] = b"\x01"
        if connection_id is not None:
            headers[0] = connection_id.encode()
        if secret is not None:
            headers[10] = secret
        if link_listener is not None:
            headers[1000] = f_str(1, f_str(1, link_listener) + f_str(2, "tls"))
        headers.update(extra or {})
        seq = self.send(0, headers, router_id.encode(), seq=-1)
        return self.expect_reply(seq)

    def subscribe(self, subscription_id: str, index: int = 0, timeline: str = "", renew: bool = False) -> None:
        """SubscribeToDataModelRequest (20505), as a v2 router sends it (no reply expected)."""
        body = (f_int(1, index) if index else b"") + f_int(2, 300) + (f_int(3, 1) if renew else b"") + \
            (f_str(4, timeline) if timeline else b"") + f_str(5, subscription_id)
        self.send(20505, {}, body)

    def client_hello(self, host: str, port: int, server_hello: Msg | None = None) -> None:
        if server_hello is None:
            server_hello = self.expect(20000)
        address = f_str(10, f"tls:{host}:{port}") + f_str(20, "tls") + f_str(30, host) + f_int(40, port)
        advertise = f_str(10, f"{host}:{port}") + f_str(20, "tls") + f_str(30, host) + f_int(40, port)
        listener = f_str(10, address) + f_str(20, advertise)
        body = f_str(1, "v1.3.3") + f_str(2, host) + f_str(3, "tls") + f_str(10, listener)
        self.send(20001, {}, body, reply_to=server_hello)

    def close(self) -> None:
        # under the lock: never while the reader is inside recv, whose descriptor number a new
        # connection could otherwise be given and read from by the old TLS object
        with self.lock:
            try:
                self.sock.close()
            except OSError:
                pass
