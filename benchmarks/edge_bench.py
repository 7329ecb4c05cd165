"""``make bench`` (data plane): ziti-lite's embedded edge router against a bare asyncio TLS relay,
side by side, in one run.

A = ``ziti-lite serve --edge-port`` (a real subprocess on loopback). A host process binds an
unencrypted service and answers every Dial with DialSuccess at once; a dialer process dials it.
Both speak the edge protocol with the pure-Python client (``tests/edge/client.py``).

B = a bare relay (``--relay``, a subprocess too): a Python asyncio TLS server with the *same* TLS
context as ziti-lite (``ziti_lite.lifecycle.contexts.ssl_context`` over the same database: RSA server
certificate + signer, TLS 1.2+, client certificate requested), written with asyncio protocols
(the cheapest way asyncio can copy bytes). A host process keeps idle TLS connections open to it
(first line ``H``); a dialer opens a TLS connection (``D``), the relay hands it to an idle host
connection (``D`` to the host, ``A`` back: one round trip, as a Dial/DialSuccess) and answers
``C`` to the dialer, then copies bytes both ways. Its clients use the same identity certificates.

Measured, alternating A B per round, medians over the rounds:

1. one connection's bulk throughput (``--bulk`` MiB in ``--chunk`` KiB writes, dialer to host,
   timed until the host's 1-byte acknowledgement of the last byte);
2. dial setup latency (``--dials`` dials, one at a time: ziti-lite Connect -> StateConnected on an
   open channel; bare: TCP + TLS handshake + the host round trip -> ``C``);
3. aggregate throughput of ``--conns`` concurrent connections (``--per-conn`` MiB each);
4. server RSS (``/proc/PID/status`` VmRSS) with ``--idle`` idle connections open vs none;
5. ``GET /version`` latency over one keep-alive connection: alone, while 1,000 SDK channels send
   through ziti-lite's router (the API probed in the router's process), the same traffic with a
   second ziti-lite (no router, its own process) probed instead, and the same traffic through
   the bare relay. The second ziti-lite is the goal's baseline: what the traffic costs an API
   process on the same box that does not carry it, against what carrying it in-process adds.

Loads run in separate processes (multiprocessing, spawn), never in the measuring process. With
``--json FILE`` the figures are written there too. Loopback only, stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing as mp
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from asyncio import sslproto
from pathlib import Path
from typing import ClassVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from common import free_port, median_p99, row, start_server, stop_server, wait_ready, write_rows  # noqa: E402

ADMIN_PASSWORD = "edge-bench-Admin-1"
MGMT, CLIENT = "/edge/management/v1", "/edge/client/v1"
HARD_LIMIT_S = 1200
MiB = 1024 * 1024


# ====================================================================== shared by the workers
def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def _stat_cpu(path: str) -> float:
    """User + system CPU seconds of a ``/proc`` ``stat`` file (a process's or a thread's)."""
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    return _stat_cpu(f"/proc/{pid}/stat")


def thread_cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds of ``pid``'s main thread (ziti-lite's API loop) and of all its other threads
    together (the embedded router's thread, the TLS handshake pool)."""
    main = other = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            t = _stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        except OSError:   # the thread ended meanwhile
            continue
        if int(tid) == pid:
            main += t
        else:
            other += t
    return main, other


class ProbePriority:
    """The REST probe runs at a higher scheduling priority than the load processes (``nice``,
    the same for every phase): on 2 CPUs the 1,000 channels' load processes otherwise delay the
    probe's own sends and reads, and that delay, not the server's, dominated the p99 (traced:
    0.9-2.1 ms of each loaded phase's p99 came after the response had left the server). Without
    the permission to raise it the probe runs at the bench's own priority, as the load does."""

    def __init__(self, nice: int):
        self.nice = nice
        self.own = os.getpriority(os.PRIO_PROCESS, 0)
        self.applied = self.own

    def __enter__(self) -> ProbePriority:
        if self.nice != self.own:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)   # on Linux: this thread only
                self.applied = self.nice
            except OSError:
                pass
        return self

    def __exit__(self, *exc) -> None:
        if self.applied != self.own:
            os.setpriority(os.PRIO_PROCESS, 0, self.own)   # lowering one's priority needs no permission


def _identity(spec: dict):
    from tests.edge.client import Identity
    return Identity(spec["cert"], spec["key"], spec["ca"])


async def _within(aw, seconds: float):
    return await asyncio.wait_for(aw, seconds)


# ---------------------------------------------------------------------- A: ziti-lite, edge protocol
async def _open_and_hold(open_one, n: int, batch: int, q, stop) -> None:
    """Open ``n`` idle connections, ``batch`` at a time; report, then hold them until told to stop."""
    for s in range(0, n, batch):
        await asyncio.gather(*(open_one() for _ in range(s, min(n, s + batch))))
    q.put(("result", {"open": n}))
    while not stop.is_set():
        await asyncio.sleep(0.05)


async def _sdk_circuit(cfg: dict, token, into: list) -> None:
    """One SDK channel to the embedded router (kept in ``into``) with one circuit dialed on it."""
    from tests.edge.client import STATE_CONNECTED, EdgeClient  # in the load processes only, as above
    o = await EdgeClient.open("127.0.0.1", cfg["edge_port"], _identity(cfg["dial_id"]))
    into.append(o)
    r = await o.hello(cfg["dial_token"])
    assert r.headers.get(2) == b"\x01", "hello refused"
    r = await o.dial(0, token)
    assert r.content == STATE_CONNECTED, f"dial refused: {r.body!r}"


async def _every_100ms(conns: list, send, ticks: int, stop) -> None:
    """Each of ``conns`` sends once every 100 ms until ``stop``: in ``ticks`` slices of the period
    (10: a tenth of them every 10 ms, as independent devices would; 1: all at once, a burst)."""
    loop = asyncio.get_running_loop()
    period = 0.1 / ticks
    slices = [conns[i::ticks] for i in range(ticks)]
    at = loop.time()
    while not stop.is_set():
        for part in slices:
            for c in part:
                send(c)
            at += period
            await asyncio.sleep(max(0.0, at - loop.time()))


async def _ziti_host(cfg: dict, q, stop) -> None:
    """Bind the service; accept every Dial at once; sink the data of every accepted connection
    and answer ``b"k"`` once it got ``expect`` bytes."""
    from tests.edge.client import STATE_CONNECTED, EdgeClient
    # (router_bench.py: the host may bind on another router than the one the dialer enters)
    c = await EdgeClient.open("127.0.0.1", cfg.get("host_port") or cfg["edge_port"], _identity(cfg["host_id"]),
                              limit=4 * MiB)
    r = await c.hello(cfg["host_token"])
    assert r.headers.get(2) == b"\x01", "hello refused"
    r = await c.bind(0, cfg["bind_token"])
    assert r.content == STATE_CONNECTED, f"bind refused: {r.body!r}"
    expect = cfg.get("expect", 0)
    tasks = set()

    async def sink(conn_id: int, fut) -> None:
        try:
            await fut                      # the router's StateConnected for the accepted conn
        except ConnectionError:
            return
        if not expect:
            return
        if expect < 0:   # traffic: take everything, answer nothing
            qu = c.queue(conn_id)
            while True:
                await qu.get()
        got, qu = 0, c.queue(conn_id)
        while got < expect:
            m = await qu.get()
            got += len(m.body)
        c.data(conn_id, b"k")

    async def accept_loop() -> None:
        next_id = 1
        while True:
            d = await c.dials.get()
            t = asyncio.create_task(sink(next_id, c.accept(d, next_id)))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            next_id += 1

    acc = asyncio.create_task(accept_loop())
    q.put(("ready", None))
    while not stop.is_set():
        await asyncio.sleep(0.05)
    acc.cancel()
    await c.close()


async def _ziti_dialer(cfg: dict, test: str, q, stop) -> None:
    from tests.edge.client import (
        CONN_ID,
        SEQ,
        STATE_CLOSED,
        STATE_CONNECTED,
        EdgeClient,
        u32,
    )
    c = await EdgeClient.open("127.0.0.1", cfg["edge_port"], _identity(cfg["dial_id"]), limit=4 * MiB)
    r = await c.hello(cfg["dial_token"])
    assert r.headers.get(2) == b"\x01", "hello refused"
    token = cfg["dial_session"]

    async def dial(conn_id: int) -> None:
        r = await c.dial(conn_id, token)
        assert r.content == STATE_CONNECTED, f"dial refused: {r.body!r}"

    async def send(conn_id: int, total: int, chunk: bytes) -> None:
        sent = 0
        while sent < total:
            c.data(conn_id, chunk)
            sent += len(chunk)
            await c.drain()
        m = await c.queue(conn_id).get()
        assert m.body == b"k", m

    if test in ("bulk", "conc"):
        n = 1 if test == "bulk" else cfg["conns"]
        total = cfg["expect"]
        chunk = os.urandom(cfg["chunk"])
        await asyncio.gather(*(dial(i) for i in range(n)))
        t0, p0 = time.perf_counter(), time.process_time()
        await _within(asyncio.gather(*(send(i, total, chunk) for i in range(n))), 300)
        took = time.perf_counter() - t0
        q.put(("result", {"mbps": n * total / took / 1e6, "seconds": took, "dialer_cpu_s": time.process_time() - p0}))
    elif test == "dials":
        others = []
        if cfg.get("channels"):   # other SDKs connected meanwhile (hello'd, idle): the router's load
            sslproto.SSLProtocol.max_size = 16 * 1024   # this client's memory only (see idlech)

            async def other() -> None:
                o = await EdgeClient.open("127.0.0.1", cfg["edge_port"], _identity(cfg["dial_id"]))
                others.append(o)
                r = await o.hello(cfg["dial_token"])
                assert r.headers.get(2) == b"\x01", "hello refused"
            for s in range(0, cfg["channels"], 50):
                await asyncio.gather(*(other() for _ in range(s, min(cfg["channels"], s + 50))))
        lat = []
        for i in range(cfg["warmup"] + cfg["dials"]):
            t0 = time.perf_counter()
            await dial(i)
            dt = time.perf_counter() - t0
            c.send(STATE_CLOSED, {CONN_ID: u32(i), SEQ: u32(1)})
            if i >= cfg["warmup"]:
                lat.append(dt * 1e3)
        q.put(("result", {"lat_ms": lat}))
        for o in others:
            o.writer.close()
    elif test == "idle":
        batch = 50
        for s in range(0, cfg["idle"], batch):
            await asyncio.gather(*(dial(i) for i in range(s, min(cfg["idle"], s + batch))))
        q.put(("result", {"open": cfg["idle"]}))
        while not stop.is_set():
            await asyncio.sleep(0.05)
    elif test == "traffic":   # ``idle`` SDK channels, one circuit each, each sending 1 KiB every 100 ms
        sslproto.SSLProtocol.max_size = 16 * 1024   # this client's memory only (see idlech)
        chans: list = []
        for s in range(0, cfg["idle"], 50):
            await asyncio.gather(*(_sdk_circuit(cfg, token, chans) for _ in range(s, min(cfg["idle"], s + 50))))
        payload = os.urandom(1024)
        q.put(("result", {"open": cfg["idle"]}))
        await _every_100ms(chans, lambda o: o.data(0, payload), cfg.get("ticks", 10), stop)
        for o in chans:
            o.writer.close()
    elif test == "idlech":   # one channel per connection, as ``idle`` SDKs with one circuit each
        # the load client's own memory: asyncio gives each client TLS connection a 256 KiB read
        # buffer (2.5 GiB for 10,000); 16 KiB holds a TLS record. Only this process is changed.
        sslproto.SSLProtocol.max_size = 16 * 1024
        others: list = []
        await _open_and_hold(lambda: _sdk_circuit(cfg, token, others), cfg["idle"], 50, q, stop)
        for o in others:
            o.writer.close()
    await c.close()


# ---------------------------------------------------------------------- B: bare relay clients
def _bare_ctx(spec: dict) -> ssl.SSLContext:
    from tests.edge.client import tls_context
    return tls_context(_identity(spec), spec["ca"])


async def _bare_host(cfg: dict, q, stop) -> None:
    """Keep ``pool`` idle TLS connections to the relay; answer each pairing and replace it."""
    ctx = _bare_ctx(cfg["host_id"])
    expect = cfg.get("expect", 0)
    tasks = set()

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", cfg["relay_port"], ssl=ctx,
                                                       server_hostname="127.0.0.1", limit=4 * MiB)
        writer.write(b"H\n")
        try:
            line = await reader.readline()
        except (ConnectionError, ssl.SSLError):
            line = b""
        if line != b"D\n":
            writer.close()
            return
        writer.write(b"A\n")
        if cfg.get("replenish"):
            spawn()
        got = 0
        while got < expect or expect < 0:   # expect < 0 (traffic): take everything, answer nothing
            data = await reader.read(256 * 1024)
            if not data:
                break
            got += len(data)
        if expect > 0:
            writer.write(b"k")
            await writer.drain()
        try:
            await reader.read(1)            # until the dialer goes
        except (ConnectionError, ssl.SSLError):
            pass
        writer.close()

    def spawn() -> None:
        t = asyncio.create_task(one())
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    if cfg["pool"] > 100:   # many idle connections: this client's memory only (see idlech)
        sslproto.SSLProtocol.max_size = 16 * 1024
    for _ in range(cfg["pool"]):
        spawn()
    await asyncio.sleep(0.3 + cfg["pool"] / 1000)   # connected and registered at the relay
    q.put(("ready", None))
    while not stop.is_set():
        await asyncio.sleep(0.05)
    for t in list(tasks):
        t.cancel()


async def _bare_dialer(cfg: dict, test: str, q, stop) -> None:
    ctx = _bare_ctx(cfg["dial_id"])
    writers = []

    async def dial():
        reader, writer = await asyncio.open_connection("127.0.0.1", cfg["relay_port"], ssl=ctx,
                                                       server_hostname="127.0.0.1", limit=4 * MiB)
        writer.write(b"D\n")
        line = await reader.readline()
        assert line == b"C\n", line
        writers.append(writer)
        return reader, writer

    async def send(rw, total: int, chunk: bytes) -> None:
        reader, writer = rw
        sent = 0
        while sent < total:
            writer.write(chunk)
            sent += len(chunk)
            await writer.drain()
        assert await reader.readexactly(1) == b"k"

    if test in ("bulk", "conc"):
        n = 1 if test == "bulk" else cfg["conns"]
        total = cfg["expect"]
        chunk = os.urandom(cfg["chunk"])
        conns = await asyncio.gather(*(dial() for _ in range(n)))
        t0, p0 = time.perf_counter(), time.process_time()
        await _within(asyncio.gather(*(send(rw, total, chunk) for rw in conns)), 300)
        took = time.perf_counter() - t0
        q.put(("result", {"mbps": n * total / took / 1e6, "seconds": took, "dialer_cpu_s": time.process_time() - p0}))
    elif test == "dials":
        lat = []
        for i in range(cfg["warmup"] + cfg["dials"]):
            t0 = time.perf_counter()
            _, w = await dial()
            dt = time.perf_counter() - t0
            w.close()
            writers.remove(w)
            if i >= cfg["warmup"]:
                lat.append(dt * 1e3)
        q.put(("result", {"lat_ms": lat}))
    elif test == "idle":
        await _open_and_hold(dial, cfg["idle"], 50, q, stop)
    elif test == "traffic":   # as A's: ``idle`` relayed connections, each sending 1 KiB every 100 ms
        sslproto.SSLProtocol.max_size = 16 * 1024   # this client's memory only (see idlech)
        conns = []
        for s in range(0, cfg["idle"], 50):
            conns += await asyncio.gather(*(dial() for _ in range(s, min(cfg["idle"], s + 50))))
        payload = os.urandom(1024)
        q.put(("result", {"open": cfg["idle"]}))
        await _every_100ms(conns, lambda rw: rw[1].write(payload), cfg.get("ticks", 10), stop)
    for w in writers:
        w.close()


# ---------------------------------------------------------------------- worker entry points
def _worker(side: str, role: str, cfg: dict, test: str, q, stop) -> None:
    try:
        if role == "host":
            coro = _ziti_host(cfg, q, stop) if side == "A" else _bare_host(cfg, q, stop)
        else:
            coro = _ziti_dialer(cfg, test, q, stop) if side == "A" else _bare_dialer(cfg, test, q, stop)
        asyncio.run(coro)
    except BaseException as e:  # noqa: BLE001 - reported to the orchestrator, which fails the run
        q.put(("error", f"{side} {role} {test}: {type(e).__name__}: {e}"))


# ---------------------------------------------------------------------- B: the relay process
class _Relay(asyncio.Protocol):
    """One TLS connection to the bare relay: the first line says what it is, then its bytes go
    straight to the paired connection's transport, with pause/resume as back-pressure."""

    idle_hosts: ClassVar[list[_Relay]] = []

    def __init__(self):
        self.t = None
        self.peer: _Relay | None = None
        self.buf = b""
        self.state = "new"        # new | idle-host | asked | dialer-waiting | relay

    def connection_made(self, t) -> None:
        self.t = t
        t.set_write_buffer_limits(high=256 * 1024)

    def data_received(self, data: bytes) -> None:
        if self.state == "relay":
            self.peer.t.write(data)
            return
        self.buf += data
        if b"\n" not in self.buf:
            return
        line, self.buf = self.buf.split(b"\n", 1)
        if self.state == "new" and line == b"H":
            self.state = "idle-host"
            _Relay.idle_hosts.append(self)
        elif self.state == "new" and line == b"D":
            if not _Relay.idle_hosts:
                self.t.close()
                return
            host = _Relay.idle_hosts.pop()
            self.peer, host.peer = host, self
            self.state, host.state = "dialer-waiting", "asked"
            host.t.write(b"D\n")
        elif self.state == "asked" and line == b"A":
            self.state = self.peer.state = "relay"
            self.peer.t.write(b"C\n")
            for side in (self, self.peer):
                if side.buf:
                    side.peer.t.write(side.buf)
                    side.buf = b""
        else:
            self.t.close()

    def pause_writing(self) -> None:
        if self.peer is not None:
            self.peer.t.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None:
            self.peer.t.resume_reading()

    def connection_lost(self, exc) -> None:
        if self in _Relay.idle_hosts:
            _Relay.idle_hosts.remove(self)
        if self.peer is not None and self.peer.t is not None:
            self.peer.t.close()


def relay_main(db: str, port: int, loop_name: str = "asyncio") -> None:
    import apsw

    from ziti_lite.lifecycle.contexts import ssl_context
    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    state = dict(conn.execute("SELECT key, value FROM controller"))
    conn.close()
    ctx = ssl_context(state)   # exactly ziti-lite's: same certificate chain, versions, client-cert callback

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Relay, "127.0.0.1", port, ssl=ctx, ssl_handshake_timeout=10.0, backlog=1024)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    if loop_name == "uvloop":   # the same loop as the router it is compared with (uvloop's own TLS)
        import uvloop
        uvloop.run(run())
    else:
        asyncio.run(run())


# ====================================================================== orchestration
def setup(url: str, tmp: Path) -> dict:
    """Admin login, an unencrypted service, bind/dial policies, two identities enrolled with a CSR,
    their cert logins and service sessions."""
    import httpx
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs7

    from ziti_lite.pki.csr import build_csr

    admin = httpx.Client(base_url=url + MGMT, verify=False, timeout=30)
    r = admin.post("/authenticate?method=password", json={"username": "admin", "password": ADMIN_PASSWORD})
    r.raise_for_status()
    admin.headers["zt-session"] = r.json()["data"]["token"]

    def create(coll: str, body: dict) -> str:
        r = admin.post(f"/{coll}", json=body)
        assert r.status_code == 201, r.text
        return r.json()["data"]["id"]

    r = httpx.get(url + "/.well-known/est/cacerts", verify=False, timeout=10)
    ca = "".join(c.public_bytes(serialization.Encoding.PEM).decode()
                 for c in pkcs7.load_der_pkcs7_certificates(base64.b64decode(r.text)))
    svc = create("services", {"name": "bench-echo", "encryptionRequired": False, "roleAttributes": ["bench"]})
    create("service-policies", {"name": "bench-bind", "type": "Bind", "semantic": "AnyOf",
                                "identityRoles": ["#bench-host"], "serviceRoles": ["#bench"]})
    create("service-policies", {"name": "bench-dial", "type": "Dial", "semantic": "AnyOf",
                                "identityRoles": ["#bench-client"], "serviceRoles": ["#bench"]})
    out = {"service": svc}
    for role, attr, stype in (("host", "bench-host", "Bind"), ("dial", "bench-client", "Dial")):
        key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption()).decode()
        iid = create("identities", {"name": f"bench-{role}", "type": "Device", "isAdmin": False,
                                    "roleAttributes": [attr], "enrollment": {"ott": True}})
        ott = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["token"]
        r = httpx.post(f"{url}/enroll?method=ott&token={ott}", content=build_csr(iid, key_pem=key)[0],
                       headers={"content-type": "application/x-pem-file", "accept": "application/x-pem-file"},
                       verify=False, timeout=10)
        assert r.status_code == 200, r.text
        cert = r.text
        cf, kf = tmp / f"{role}.crt", tmp / f"{role}.key"
        cf.write_text(cert)
        kf.write_text(key)
        sdk = httpx.Client(base_url=url + CLIENT, verify=False, cert=(str(cf), str(kf)), timeout=30)
        r = sdk.post("/authenticate?method=cert", json={})
        assert r.status_code == 200, r.text
        api_token = r.json()["data"]["token"]
        r = sdk.post("/sessions", json={"serviceId": svc, "type": stype}, headers={"zt-session": api_token})
        assert r.status_code == 201, r.text
        out[f"{role}_id"] = {"cert": cert, "key": key, "ca": ca}
        out[f"{role}_token"] = api_token
        out["bind_token" if stype == "Bind" else "dial_session"] = r.json()["data"]["token"]
        sdk.close()
    admin.close()
    return out


class Runner:
    def __init__(self, base: dict, server_pid: int, relay_pid: int):
        self.base = base
        self.pid = {"A": server_pid, "B": relay_pid}
        self.mp = mp.get_context("spawn")

    def run(self, side: str, test: str, cfg: dict, during=None) -> dict:
        """One measurement: a host process, ready, then a dialer process; its result."""
        cfg = {**self.base, **cfg}
        q, stop = self.mp.Queue(), self.mp.Event()
        procs = [self.mp.Process(target=_worker, args=(side, "host", cfg, test, q, stop), daemon=True)]
        procs[0].start()
        try:
            self._get(q, "ready", 60)
            procs.append(self.mp.Process(target=_worker, args=(side, "dial", cfg, test, q, stop), daemon=True))
            c0, h0 = cpu_seconds(self.pid[side]), cpu_seconds(procs[0].pid)
            procs[1].start()
            res = self._get(q, "result", 400)
            res["server_cpu_s"] = cpu_seconds(self.pid[side]) - c0
            res["host_cpu_s"] = cpu_seconds(procs[0].pid) - h0
            if during is not None:
                res.update(during(self.pid[side]))
            return res
        finally:
            stop.set()
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join(5)

    @staticmethod
    def _get(q, kind: str, timeout: float):
        while True:
            k, v = q.get(timeout=timeout)
            if k == "error":
                raise SystemExit(f"edge bench: {v}")
            if k == kind:
                return v


def main() -> None:
    ap = argparse.ArgumentParser(description="ziti-lite's embedded edge router vs a bare asyncio TLS relay")
    ap.add_argument("--rounds", type=int, default=7, help="A B rounds per measurement")
    ap.add_argument("--bulk", type=int, default=256, help="MiB through one connection (per round and side)")
    ap.add_argument("--chunk", type=int, default=32, help="KiB per write")
    ap.add_argument("--dials", type=int, default=500, help="dials per round for the setup latency")
    ap.add_argument("--conns", type=int, default=100, help="concurrent connections")
    ap.add_argument("--per-conn", type=float, default=1.0, help="MiB per concurrent connection")
    ap.add_argument("--idle", type=int, default=1000, help="idle connections for the RSS figure")
    ap.add_argument("--idle-channels", default="1000,10000",
                    help="idle SDK channels for the per-channel RSS figures (comma-separated counts)")
    ap.add_argument("--loop", default=default_loop(), choices=("uvloop", "asyncio"),
                    help="event loop of the router (serve --loop) and of the bare relay")
    ap.add_argument("--only", help="bulk, dials, dials1k, rest, conc or idle (comma-separated)")
    ap.add_argument("--dial-channels", type=int, default=1000, help="channels connected during dials1k and rest")
    ap.add_argument("--ticks", type=int, default=10,
                    help="rest: the channels send in this many slices of each 100 ms (1: all at once)")
    ap.add_argument("--rest-rounds", type=int, default=3, help="rest: rounds of alone / via ziti-lite / via bare")
    ap.add_argument("--probe-nice", type=int, default=-10,
                    help="rest: the probe's nice value while it measures (0: the load's; below 0 needs the permission)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--table-json", help="also write the figures as rows of make bench's table (table.py)")
    ap.add_argument("--relay", type=int, help=argparse.SUPPRESS)     # internal: run the bare relay
    ap.add_argument("--db", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.relay:
        relay_main(a.db, a.relay, a.loop)
        return
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(SystemExit("edge bench: hard time limit reached")))
    signal.alarm(HARD_LIMIT_S)
    only = set(a.only.split(",")) if a.only else {"bulk", "dials", "dials1k", "rest", "conc", "idle"}

    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-edge-bench-"))
    procs: list[subprocess.Popen] = []
    try:
        db = tmp / "edge.db"
        port, edge_port, relay_port = free_port(), free_port(), free_port()
        log = open(tmp / "ziti-lite.log", "wb")  # noqa: SIM115 - open while the server runs
        ziti = start_server(db, port, log, "--host", "127.0.0.1", "--edge-port", str(edge_port),
                            "--admin-password", ADMIN_PASSWORD, "--loop", a.loop)
        procs.append(ziti)
        url = f"https://127.0.0.1:{port}"
        wait_ready(url, ziti)
        if "rest" in only:   # the API of another process on the box, for the rest figures' baseline
            other_port = free_port()
            other = start_server(tmp / "other.db", other_port, open(tmp / "other.log", "wb"),  # noqa: SIM115
                                 "--host", "127.0.0.1", "--edge-port", "0", "--admin-password", ADMIN_PASSWORD,
                                 "--loop", a.loop)
            procs.append(other)
            other_url = f"https://127.0.0.1:{other_port}"
            wait_ready(other_url, other)
        base = setup(url, tmp)
        relay = subprocess.Popen([sys.executable, __file__, "--relay", str(relay_port), "--db", str(db),
                                  "--loop", a.loop],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=open(tmp / "relay.log", "wb"),  # noqa: SIM115
                                 start_new_session=True)
        procs.append(relay)
        if relay.stdout.readline().strip() != b"ready":
            raise SystemExit("the bare relay did not start")
        base.update(edge_port=edge_port, relay_port=relay_port)
        run = Runner(base, ziti.pid, relay.pid)
        print(f"A = ziti-lite edge router (pid {ziti.pid}, tls://127.0.0.1:{edge_port}), B = bare asyncio TLS relay"
              f" (pid {relay.pid}); both on {a.loop}; same TLS context; {os.cpu_count()} CPUs; loads in separate processes;"
              f" {a.rounds} rounds, alternating A B; load average {os.getloadavg()[0]:.1f}\n", flush=True)

        figures: dict[str, dict] = {}
        load0 = os.getloadavg()[0]

        def rounds(name: str, test: str, cfg: dict, show, n: int | None = None, during=None) -> list[tuple]:
            out = []
            run.run("A", test, cfg)   # warm-up, not counted
            run.run("B", test, cfg)
            for i in range(n or a.rounds):
                ra = run.run("A", test, cfg, during)
                rb = run.run("B", test, cfg, during)
                out.append((ra, rb))
                print(f"  {name:<34} round {i + 1}: A {show(ra)}   B {show(rb)}", flush=True)
            return out

        if "idle" in only:   # first, on fresh server processes: later rounds would measure reused heap
            def during(pid: int) -> dict:
                time.sleep(1.0)
                return {"rss_kib": rss_kib(pid)}

            def idle_once(side: str, test: str, n: int) -> dict:
                before = rss_kib(run.pid[side])
                r = run.run(side, test, {"test": test, "idle": n, "pool": n}, during)
                return {"n": n, "before_mib": before / 1024, "with_mib": r["rss_kib"] / 1024,
                        "kib_per_conn": (r["rss_kib"] - before) / n}
            counts = [int(x) for x in a.idle_channels.split(",") if x.strip()]
            figures["idle"] = {"A": idle_once("A", "idle", a.idle),
                               "A_channels": [idle_once("A", "idlech", n) for n in counts],
                               "B": idle_once("B", "idle", a.idle)}
            rows = [("A", f"{a.idle} circuits on 2 channels", figures["idle"]["A"])]
            rows += [("A", f"{v['n']} channels, 1 circuit each", v) for v in figures["idle"]["A_channels"]]
            rows += [("B", f"{a.idle} relayed connections", figures["idle"]["B"])]
            for k, what, v in rows:
                print(f"  RSS, {what:<34}: {k} {v['before_mib']:.1f} -> {v['with_mib']:.1f} MiB"
                      f" ({v['kib_per_conn']:.1f} KiB each)", flush=True)
        chunk = a.chunk * 1024

        def per_mb(r: dict, who: str) -> str:
            return f"{r[who + '_cpu_s'] / (r['mbps'] * r['seconds']) * 1e3:4.2f}"
        if "bulk" in only:
            cfg = {"test": "bulk", "expect": a.bulk * MiB, "chunk": chunk, "pool": 1, "conns": 1}
            rs = rounds(f"1 connection, {a.bulk} MiB", "bulk", cfg,
                        lambda r: f"{r['mbps']:7.1f} MB/s, CPU ms/MB server {per_mb(r, 'server')} dialer {per_mb(r, 'dialer')}"
                        f" host {per_mb(r, 'host')}")
            figures["bulk"] = {k: {"mbps": statistics.median(r[i]["mbps"] for r in rs),
                                   "cpu_ms_per_mb": statistics.median(r[i]["server_cpu_s"] for r in rs) / (a.bulk * MiB / 1e6) * 1e3}
                               for i, k in ((0, "A"), (1, "B"))}
            # each A round against the B round right after it (the same moment of the box's load):
            # the median of these paired ratios moves less than the ratio of the two medians
            paired = sorted(ra["mbps"] / rb["mbps"] for ra, rb in rs)
            figures["bulk"]["paired"] = {"median": statistics.median(paired), "min": paired[0], "max": paired[-1]}
            print(f"  paired ratios A/B, round by round: {', '.join(f'{x:.2f}' for x in paired)}", flush=True)
        if "dials" in only:
            cfg = {"test": "dials", "dials": a.dials, "warmup": 20, "pool": 8, "replenish": True}

            def show(r):
                p50, p99 = median_p99(r["lat_ms"])
                return f"p50 {p50:5.2f} ms p99 {p99:5.2f} ms"
            rs = rounds(f"dial setup x {a.dials}", "dials", cfg, show)
            figures["dials"] = {}
            for i, k in ((0, "A"), (1, "B")):
                pairs = [median_p99(r[i]["lat_ms"]) for r in rs]
                figures["dials"][k] = {"p50_ms": statistics.median(p[0] for p in pairs),
                                       "p99_ms": statistics.median(p[1] for p in pairs),
                                       "cpu_ms_per_dial": statistics.median(r[i]["server_cpu_s"] for r in rs) / (a.dials + 20) * 1e3}
        if "dials1k" in only:   # ziti-lite only: a bare relay has no channels to hold
            cfg = {"test": "dials", "dials": a.dials, "warmup": 20, "pool": 8, "replenish": True,
                   "channels": a.dial_channels}
            run.run("A", "dials", cfg)   # warm-up, not counted
            pairs = []
            for i in range(a.rounds):
                r = run.run("A", "dials", cfg)
                pairs.append(median_p99(r["lat_ms"]))
                print(f"  dial setup x {a.dials}, {a.dial_channels} channels open  round {i + 1}:"
                      f" A p50 {pairs[-1][0]:5.2f} ms p99 {pairs[-1][1]:5.2f} ms", flush=True)
            figures["dials1k"] = {"p50_ms": statistics.median(p[0] for p in pairs),
                                  "p99_ms": statistics.median(p[1] for p in pairs)}
        if "rest" in only:
            # the API's latency over one keep-alive connection: alone, while the embedded router
            # carries the traffic of ``dial_channels`` SDK channels (A), and while the same traffic
            # goes through the bare relay (B: the same load processes on the same 2 cores, but not
            # on ziti-lite's loop) -- the baseline that isolates what relaying costs the API
            def rest(seconds: float = 5.0, url: str = url) -> tuple[float, float]:
                import httpx
                lat = []
                with ProbePriority(a.probe_nice) as prio, httpx.Client(verify=False, timeout=10) as client:
                    probe_nice.add((prio.applied, prio.own))
                    client.get(url + CLIENT + "/version")
                    stop_at = time.perf_counter() + seconds
                    while (t0 := time.perf_counter()) < stop_at:
                        assert client.get(url + CLIENT + "/version").status_code == 200
                        lat.append((time.perf_counter() - t0) * 1e3)
                return median_p99(lat)
            quiet, loaded, apart, bare = [], [], [], []
            cpu: dict[str, list[float]] = {"A": [], "B": [], "A_api": [], "A_router": []}
            probe_nice: set[tuple[int, int]] = set()   # (the probe's nice, the load's)

            def timed_rest(pid: int) -> dict:   # and the CPU share of the relaying process (its threads) meanwhile
                c0, (m0, o0), t0 = cpu_seconds(pid), thread_cpu_seconds(pid), time.perf_counter()
                out = rest()
                el = time.perf_counter() - t0
                m1, o1 = thread_cpu_seconds(pid)
                return {"rest": out, "cpu_share": (cpu_seconds(pid) - c0) / el,
                        "api_share": (m1 - m0) / el, "other_share": (o1 - o0) / el}
            cfg = {"test": "traffic", "idle": a.dial_channels, "expect": -1, "pool": 1, "ticks": a.ticks}
            bcfg = {**cfg, "pool": a.dial_channels}
            for i in range(a.rest_rounds):
                quiet.append(rest())
                ra = run.run("A", "traffic", cfg, timed_rest)
                apart.append(run.run("A", "traffic", cfg, lambda _pid: {"rest": rest(url=other_url)})["rest"])
                rb = run.run("B", "traffic", bcfg, timed_rest)
                loaded.append(ra["rest"])
                bare.append(rb["rest"])
                cpu["A"].append(ra["cpu_share"])
                cpu["B"].append(rb["cpu_share"])
                cpu["A_api"].append(ra["api_share"])
                cpu["A_router"].append(ra["other_share"])
                print(f"  GET /version p50/p99 round {i + 1}: alone {quiet[-1][0]:.2f}/{quiet[-1][1]:.2f} ms,"
                      f" {a.dial_channels} channels sending through ziti-lite {loaded[-1][0]:.2f}/{loaded[-1][1]:.2f} ms"
                      f" (another API process meanwhile {apart[-1][0]:.2f}/{apart[-1][1]:.2f} ms),"
                      f" through the bare relay {bare[-1][0]:.2f}/{bare[-1][1]:.2f} ms; relaying process CPU"
                      f" {cpu['A'][-1]:.0%} (ziti-lite: API thread {cpu['A_api'][-1]:.0%}, router thread"
                      f" {cpu['A_router'][-1]:.0%}) / {cpu['B'][-1]:.0%} (bare)", flush=True)
            figures["rest"] = {"quiet_p99": statistics.median(x[1] for x in quiet),
                               "loaded_p99": statistics.median(x[1] for x in loaded),
                               "bare_p99": statistics.median(x[1] for x in bare),
                               "apart_p99": statistics.median(x[1] for x in apart),
                               "apart_p50": statistics.median(x[0] for x in apart),
                               "loaded_p50": statistics.median(x[0] for x in loaded),
                               "bare_p50": statistics.median(x[0] for x in bare),
                               "cpu_A": statistics.median(cpu["A"]), "cpu_B": statistics.median(cpu["B"]),
                               "cpu_A_api": statistics.median(cpu["A_api"]),
                               "cpu_A_router": statistics.median(cpu["A_router"]),
                               "probe_nice": sorted(probe_nice)}
        if "conc" in only:
            per = int(a.per_conn * MiB)
            cfg = {"test": "conc", "expect": per, "chunk": chunk, "conns": a.conns, "pool": a.conns}
            rs = rounds(f"{a.conns} connections x {a.per_conn:g} MiB", "conc", cfg,
                        lambda r: f"{r['mbps']:7.1f} MB/s, CPU ms/MB server {per_mb(r, 'server')} dialer"
                                  f" {per_mb(r, 'dialer')} host {per_mb(r, 'host')}")
            figures["conc"] = {k: {"mbps": statistics.median(r[i]["mbps"] for r in rs)} for i, k in ((0, "A"), (1, "B"))}
        figures["loadavg"] = {"start": load0, "end": os.getloadavg()[0]}
        rows = report(figures, a)
        write_rows(a.table_json, f"embedded edge router vs a bare TLS relay ({a.loop}, same run)",
                   [row(name, va, f"bare {vb}" if vb != "—" else "", float(ratio) if ratio not in ("—", "") else None,
                        goal if goal != "—" else "", ok) for name, va, vb, ratio, goal, ok in rows])
        print(f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs):"
              " latency percentiles and MB/s move with it; the ratios much less")
        if a.json:
            Path(a.json).write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                "cpus": os.cpu_count(), "args": vars(a), "figures": figures}, indent=2))
            print(f"\nfigures written to {a.json}")
    finally:
        for p in procs:
            stop_server(p)
        if os.environ.get("BENCH_KEEP") is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
        signal.alarm(0)


def default_loop() -> str:
    """``serve``'s own choice (--loop auto): uvloop when installed."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def report(f: dict, a) -> list[tuple]:
    rows = []
    if "bulk" in f:
        A, B = f["bulk"]["A"], f["bulk"]["B"]
        P = f["bulk"]["paired"]
        r = P["median"]
        rows.append((f"1 connection, {a.bulk} MiB in {a.chunk} KiB writes (ratio: median of {a.rounds} paired rounds,"
                     f" {P['min']:.2f}-{P['max']:.2f})", f"{A['mbps']:.1f} MB/s", f"{B['mbps']:.1f} MB/s",
                     f"{r:.2f}", "≥ 0.80 × bare", r >= 0.8))
        rows.append(("  server CPU per MB relayed", f"{A['cpu_ms_per_mb']:.2f} ms", f"{B['cpu_ms_per_mb']:.2f} ms",
                     f"{A['cpu_ms_per_mb'] / B['cpu_ms_per_mb']:.2f}", "—", None))
    if "dials" in f:
        A, B = f["dials"]["A"], f["dials"]["B"]
        rows.append((f"dial setup p50 ({a.dials} dials)", f"{A['p50_ms']:.2f} ms", f"{B['p50_ms']:.2f} ms",
                     f"{A['p50_ms'] / B['p50_ms']:.2f}", "—", None))
        rows.append((f"dial setup p99 ({a.dials} dials)", f"{A['p99_ms']:.2f} ms", f"{B['p99_ms']:.2f} ms",
                     f"{A['p99_ms'] / B['p99_ms']:.2f}", "< 10 ms", A["p99_ms"] < 10))
        rows.append(("  server CPU per dial", f"{A['cpu_ms_per_dial']:.2f} ms", f"{B['cpu_ms_per_dial']:.2f} ms",
                     f"{A['cpu_ms_per_dial'] / B['cpu_ms_per_dial']:.2f}", "—", None))
    if "dials1k" in f:
        A = f["dials1k"]
        rows.append((f"dial setup p99 ({a.dials} dials, {a.dial_channels} other channels connected)",
                     f"{A['p99_ms']:.2f} ms", "—", "—", "< 10 ms", A["p99_ms"] < 10))
    if "rest" in f:
        R = f["rest"]
        how = "in 10 ms slices" if a.ticks == 10 else ("all at once" if a.ticks == 1 else f"in {a.ticks} slices")
        r = R["loaded_p99"] / R["apart_p99"]
        rows.append((f"GET /version p99 while {a.dial_channels} channels send 1 KiB / 100 ms each ({how})",
                     f"{R['loaded_p99']:.2f} ms (p50 {R['loaded_p50']:.2f})",
                     f"{R['apart_p99']:.2f} ms (p50 {R['apart_p50']:.2f}): another API process, the same traffic"
                     f" through ziti-lite; {R['bare_p99']:.2f} ms (p50 {R['bare_p50']:.2f}) with the traffic through"
                     f" the bare relay; {R['quiet_p99']:.2f} ms alone", f"{r:.2f}",
                     "≤ 1.25 × another process", r <= 1.25))
        nice = [tuple(n) for n in R.get("probe_nice", [(0, 0)])]
        rows.append((f"  the probe's nice value: {', '.join(str(p) for p, _ in nice)} (the load processes':"
                     f" {', '.join(str(o) for _, o in nice)})" + ("" if any(p != o for p, o in nice)
                                                                 else ": the probe at the load's priority"),
                     "", "—", "—", "—", None))
        rows.append((f"  CPU of the relaying process meanwhile (ziti-lite: API thread {R['cpu_A_api']:.0%},"
                     f" router thread {R['cpu_A_router']:.0%})", f"{R['cpu_A']:.0%}",
                     f"{R['cpu_B']:.0%}", f"{R['cpu_A'] / R['cpu_B']:.2f}" if R["cpu_B"] else "—", "—", None))
    if "conc" in f:
        A, B = f["conc"]["A"], f["conc"]["B"]
        r = A["mbps"] / B["mbps"]
        rows.append((f"{a.conns} concurrent connections, aggregate", f"{A['mbps']:.1f} MB/s", f"{B['mbps']:.1f} MB/s",
                     f"{r:.2f}", "—", None))
    if "idle" in f:
        A, B = f["idle"]["A"], f["idle"]["B"]
        rows.append(("server RSS, nothing open (fresh process)", f"{A['before_mib']:.1f} MiB", f"{B['before_mib']:.1f} MiB",
                     "—", "—", None))
        rows.append((f"RSS per idle connection: {a.idle} circuits over 2 channels (dialer, host)", f"{A['kib_per_conn']:.1f} KiB",
                     f"{B['kib_per_conn']:.1f} KiB", f"{A['kib_per_conn'] / B['kib_per_conn']:.2f}" if B["kib_per_conn"] > 0 else "—",
                     "—", None))
        for C in f["idle"]["A_channels"]:
            rows.append((f"RSS per idle SDK channel: {C['n']} channels, 1 circuit each", f"{C['kib_per_conn']:.1f} KiB",
                         f"{B['kib_per_conn']:.1f} KiB", f"{C['kib_per_conn'] / B['kib_per_conn']:.2f}"
                         if B["kib_per_conn"] > 0 else "—", "≤ 64 KiB", C["kib_per_conn"] <= 64))
            rows.append((f"server RSS with {C['n']} idle channels", f"{C['with_mib']:.1f} MiB", "—", "—", "—", None))
        rows.append((f"server RSS with {a.idle} idle circuits / relayed connections", f"{A['with_mib']:.1f} MiB",
                     f"{B['with_mib']:.1f} MiB", "—", "—", None))
    print("\nmedians over the rounds (A = ziti-lite, B = bare relay):\n")
    print("| endpoint | ziti-lite | bare | ratio | goal | met? |")
    print("|---|---|---|---|---|---|")
    for name, va, vb, ratio, goal, ok in rows:
        print(f"| {name} | {va} | {vb} | {ratio} | {goal} | {'' if ok is None else ('yes' if ok else '**no**')} |")
    goals = [ok for *_, ok in rows if ok is not None]
    print("\nall goals met" if all(goals) else "\nsome goals NOT met")
    return rows


if __name__ == "__main__":
    main()
