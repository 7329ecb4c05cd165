"""Idle, slow and too many connections against a real ``ziti-lite serve`` over TLS; fast
shutdown with an idle keep-alive client; one server per database file.

Waits here are hang guards, not measurements (benchmarks/chaos.py measures): a deadline of
1 s is asserted by "the server closed the connection", never by how long it took.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from tests.test_server import REPO, Server
from ziti_lite import connections, tls
from ziti_lite import server as ziti_server
from ziti_lite.lifecycle import contexts

pytestmark = pytest.mark.slow   # real servers in subprocesses

PASSWORD = "Conn-test-Passw0rd"
GUARD = 30.0  # seconds before a test gives up waiting (a hang, not a slow pass)


def _tls_client() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _idle_tls(port: int) -> ssl.SSLSocket:
    """A connection that finishes the TLS handshake and then sends nothing."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=GUARD)
    return _tls_client().wrap_socket(raw, server_hostname="localhost")


def _closed_by_server(sock) -> bool:
    """Blocks until the server closes ``sock`` (EOF or reset); False on the hang guard."""
    sock.settimeout(GUARD)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("conn") / "net.db"
    s = Server(db, "--admin-password", PASSWORD, "--idle-timeout", "1", "--handshake-timeout", "1",
               "--max-connections", "6")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def test_a_connection_that_sends_nothing_is_closed(server):
    sock = _idle_tls(server.port)
    assert _closed_by_server(sock)
    sock.close()


def test_a_connection_that_never_finishes_the_handshake_is_closed(server):
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=GUARD)
    assert _closed_by_server(raw)
    raw.close()


def test_a_trickled_request_head_is_cut_off(server):
    sock = _idle_tls(server.port)
    head = b"GET /version HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 400
    closed = False
    for i in range(len(head)):  # one byte every 100 ms: the head would take 40+ s
        try:
            sock.sendall(head[i:i + 1])
        except (ConnectionError, ssl.SSLError, OSError):
            closed = True
            break
        time.sleep(0.1)
    else:
        closed = _closed_by_server(sock)
    assert closed, "the server kept a connection whose request head never completed"
    sock.close()


def test_a_keep_alive_connection_serves_requests_then_idles_out(server):
    with httpx.Client(verify=False, timeout=GUARD) as c:
        for _ in range(3):
            assert c.get(server.base + "/version").status_code == 200


def test_at_the_connection_cap_idle_connections_make_room(server):
    idle = [_idle_tls(server.port) for _ in range(6)]
    # the cap is 6: a real client still gets in, and the connections that sent nothing go first
    for _ in range(4):
        r = httpx.get(server.base + "/version", verify=False, timeout=GUARD)
        assert r.status_code == 200
    assert _closed_by_server(idle[0])
    for s in idle:
        s.close()
    deadline = time.monotonic() + GUARD   # the server's log is read by a thread: wait for the line
    while not (lines := [ln for ln in server.output.splitlines() if "connection limit" in ln]):
        assert time.monotonic() < deadline, "no connection-limit line logged"
        time.sleep(0.05)
    assert len(lines) == 1, lines  # once, not a line (or a traceback) per accept
    assert "Traceback" not in server.output


def test_shutdown_with_an_idle_keep_alive_client_is_fast_and_checkpoints(tmp_path):
    db = tmp_path / "net.db"
    s = Server(db, "--admin-password", PASSWORD, "--idle-timeout", "60")
    s.wait_ready()
    client = httpx.Client(verify=False, timeout=GUARD)
    try:
        token = client.post(s.base + "/edge/management/v1/authenticate?method=password",
                            json={"username": "admin", "password": PASSWORD}).json()["data"]["token"]
        r = client.post(s.base + "/edge/management/v1/identities", headers={"zt-session": token},
                        json={"name": "before-stop", "type": "User", "isAdmin": False})
        assert r.status_code == 201
        # the client keeps its connection open and idle; before the fix, SIGTERM waited 30 s for
        # its TLS close_notify. A third of that is the hang guard here; chaos.py measures.
        s.proc.send_signal(signal.SIGTERM)
        s.proc.wait(10)
    finally:
        client.close()
        code = s.stop()
    assert code == 0, s.output
    wal = str(db) + "-wal"
    assert not os.path.exists(wal) or os.path.getsize(wal) == 0  # the final checkpoint ran
    import apsw
    conn = apsw.Connection(str(db))
    assert conn.execute("SELECT count(*) FROM identities WHERE name = 'before-stop'").fetchone()[0] == 1
    conn.close()


def test_a_second_server_on_the_same_database_refuses_to_start(server, tmp_path):
    db = server.proc.args[server.proc.args.index("--db") + 1]
    second = subprocess.run([sys.executable, "-m", "ziti_lite", "serve", "--db", db, "--port", "0",
                             "--ctrl-port", "0"],
                            cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=GUARD)
    assert second.returncode != 0
    assert "already being served" in second.stderr and str(server.proc.pid) in second.stderr
    # snapshot and check still work beside the live server
    out = tmp_path / "copy.db"
    snap = subprocess.run([sys.executable, "-m", "ziti_lite", "snapshot", "--db", db, str(out)],
                          cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=GUARD)
    assert snap.returncode == 0, snap.stderr
    check = subprocess.run([sys.executable, "-m", "ziti_lite", "check", "--db", db],
                           cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
                           capture_output=True, text=True, timeout=GUARD)
    assert check.returncode == 0, check.stdout + check.stderr
    # and the running server is unaffected
    assert httpx.get(server.base + "/version", verify=False, timeout=GUARD).status_code == 200


def test_a_body_that_stops_arriving_gets_a_400_envelope(server):
    sock = _idle_tls(server.port)
    body = b'{"username": "admin", "password": "'
    sock.sendall(b"POST /edge/client/v1/authenticate?method=password HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n" + body)
    sock.settimeout(GUARD)
    answer = b""
    try:
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    except (ConnectionError, ssl.SSLError):
        pass
    sock.close()
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b'"COULD_NOT_PARSE_BODY"' in answer


def test_accept_failures_are_one_line_a_minute_not_a_traceback_each(caplog):
    import asyncio
    import errno
    import logging

    from ziti_lite import connections
    caplog.set_level(logging.DEBUG)
    server = connections.GuardedServer.__new__(connections.GuardedServer)
    server.limits = connections.Limits(max_connections=10)
    loop = asyncio.new_event_loop()
    try:
        server._zl_install_exception_handler(loop)
        for _ in range(500):
            loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                         "exception": OSError(errno.EMFILE, "Too many open files")})
    finally:
        loop.close()
    lines = [r for r in caplog.records if "accept() failed" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert "Traceback" not in caplog.text


# ------------------------------------------------------------------ create_tls_server, on both loops
def _loops():
    loops = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
        loops.append(pytest.param(uvloop.new_event_loop, id="uvloop"))
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        loops.append(pytest.param(None, id="uvloop", marks=pytest.mark.skip(reason="uvloop is not installed")))
    return loops


def _client_cert(tmp_path) -> tuple[str, str, bytes]:
    """A self-signed client certificate (cert file, key file, DER) from no CA the server knows."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "some-device")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "c.pem", tmp_path / "c.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file), cert.public_bytes(serialization.Encoding.DER)


class _Echo(asyncio.Protocol):
    """Answers each read with the bytes read; keeps what the handshake gave the app."""

    made: list = []

    def connection_made(self, transport) -> None:
        self.transport = transport
        _Echo.made.append((tls.tls_extension(transport), transport))

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


@pytest.mark.parametrize("new_loop", _loops())
def test_tls_servers_keep_chains_deadlines_and_one_read_buffer_on_both_loops(ctl, tmp_path, new_loop):
    """What every listener relies on, on asyncio's loop and on uvloop: a client chain from an
    unknown CA passes the handshake and reaches the protocol, bytes cross both ways (64 KiB:
    more than one TLS record and one read), a client that never handshakes is dropped at the
    deadline, and all connections read through the one buffer of their thread."""
    context = contexts.ssl_context(ctl.state)
    cert_file, key_file, der = _client_cert(tmp_path)
    client = _tls_client()
    client.load_cert_chain(cert_file, key_file)
    _Echo.made = []
    loop = new_loop()
    try:
        async def main():
            srv = await connections.create_tls_server(_Echo, context, host="127.0.0.1", port=0,
                                                      handshake_timeout=0.5)
            port = srv.sockets[0].getsockname()[1]
            payload = os.urandom(64 * 1024)
            streams = [await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
                       for _ in range(2)]
            for reader, writer in streams:
                writer.write(payload)
                assert await asyncio.wait_for(reader.readexactly(len(payload)), GUARD) == payload
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(silent_reader.read(), GUARD) == b""   # the deadline closed it
            for _, transport in _Echo.made:
                transport.abort()
            for reader, writer in streams + [(silent_reader, silent_writer)]:
                await asyncio.wait_for(reader.read(), GUARD)    # the server's side is gone
                writer.transport.abort()
            srv.close()
            await srv.wait_closed()
            for _ in range(3):      # let the aborts' connection_lost callbacks run before the loop closes
                await asyncio.sleep(0)
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert len(_Echo.made) == 2
    for ext, _ in _Echo.made:
        assert ext is not None and ext["client_cert_chain"] == [ssl.DER_cert_to_PEM_cert(der)]
        assert ext["tls_version"] in (0x0303, 0x0304)
    first, second = (t._ssl_protocol for _, t in _Echo.made)
    assert isinstance(first, connections._OffloopHandshake)
    assert first._ssl_buffer_view is second._ssl_buffer_view


class _BufferedEcho(asyncio.BufferedProtocol):
    """Echoes what it is given through a small buffer; notes the peer's close_notify."""

    eofs: list = []

    def __init__(self) -> None:
        self.buf = bytearray(1000)     # smaller than a TLS record: a record takes several reads

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buf)

    def buffer_updated(self, nbytes: int) -> None:
        self.transport.write(bytes(self.buf[:nbytes]))

    def eof_received(self) -> bool:
        _BufferedEcho.eofs.append(True)
        return False


class _CopiedEcho(asyncio.Protocol):
    """Echoes what it is given as data_received (uvicorn's protocols read so); notes the goodbye."""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)

    def eof_received(self) -> bool:
        _BufferedEcho.eofs.append(True)
        return False


@pytest.mark.parametrize("protocol", [_BufferedEcho, _CopiedEcho], ids=["buffered", "copying"])
@pytest.mark.parametrize("new_loop", _loops())
def test_protocols_get_every_byte_and_the_peers_goodbye_on_both_loops(ctl, new_loop, protocol):
    """A buffered protocol (the router's channels) and a copying one (uvicorn's) behind the TLS
    layer: bytes of many records cross in order (the buffered one's buffer is smaller than one
    record), and the client's close_notify arrives as eof_received."""
    context = contexts.ssl_context(ctl.state)
    _BufferedEcho.eofs = []
    loop = new_loop()
    try:
        async def main():
            srv = await connections.create_tls_server(protocol, context, host="127.0.0.1", port=0,
                                                      handshake_timeout=5)
            port = srv.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=_tls_client(),
                                                           server_hostname="localhost")
            payload = os.urandom(200 * 1024)
            for cut in (1, 100, 5000, 70_000, len(payload)):
                for pos in range(0, len(payload), cut):
                    writer.write(payload[pos:pos + cut])
                    if cut > 1000:
                        await writer.drain()
                assert await asyncio.wait_for(reader.readexactly(len(payload)), GUARD) == payload
            writer.close()                     # close_notify, then the server's side goes
            assert await asyncio.wait_for(reader.read(), GUARD) == b""
            srv.close()
            await srv.wait_closed()
            for _ in range(3):
                await asyncio.sleep(0)
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert _BufferedEcho.eofs == [True]


def test_the_loop_option_picks_the_loop():
    assert ziti_server.loop_name("asyncio") == "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover
        assert ziti_server.loop_name("auto") == "asyncio"
    else:
        assert ziti_server.loop_name("auto") == ziti_server.loop_name("uvloop") == "uvloop"
