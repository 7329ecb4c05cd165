"""What the disaster-recovery interop tests and ``benchmarks/backup_bench.py`` share: the real
``litestream`` binary (v0.3.13), ziti-lite run under ``litestream replicate -exec``, steady writes
with their acknowledgement times, and a TCP relay standing in for a DNS name moved to a new box.

``litestream_binary`` finds ``$LITESTREAM``, else ``~/.cache/ziti-lite/litestream/litestream``
(``$ZITI_LITE_GO_CACHE/litestream`` when set), else installs it there with ``go install`` from
the Go module proxy; it returns None with the reason when none can be had (the tests skip
saying it)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ziti_lite import testing

LITESTREAM_VERSION = "v0.3.13"
LITESTREAM_MODULE = "github.com/benbjohnson/litestream/cmd/litestream"
SYNC_INTERVAL = 1.0      # seconds: the file replica's sync interval in the configuration below


def _cache() -> str:
    base = os.environ.get("ZITI_LITE_GO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ziti-lite")
    return os.path.join(base, "litestream")


def litestream_binary() -> tuple[str | None, str]:
    """(path, "") of the litestream binary, or (None, why there is none)."""
    named = os.environ.get("LITESTREAM")
    if named:
        return (named, "") if os.access(named, os.X_OK) else (None, f"$LITESTREAM ({named}) is not executable")
    path = os.path.join(_cache(), "litestream")
    if os.access(path, os.X_OK):
        return path, ""
    go = shutil.which("go")
    if go is None:
        return None, f"no litestream binary ($LITESTREAM or {path}) and no go command to install {LITESTREAM_VERSION}"
    os.makedirs(_cache(), exist_ok=True)
    try:
        r = subprocess.run([go, "install", f"{LITESTREAM_MODULE}@{LITESTREAM_VERSION}"], capture_output=True,
                           text=True, timeout=20 * 60,
                           env={**os.environ, "GOTOOLCHAIN": "auto", "GOBIN": _cache(), "CGO_ENABLED": "1"})
    except subprocess.TimeoutExpired:
        return None, f"installing litestream {LITESTREAM_VERSION} took over 20 minutes"
    if r.returncode != 0 or not os.access(path, os.X_OK):
        return None, (f"litestream {LITESTREAM_VERSION} could not be installed with go install (it needs cgo and a"
                      f" C compiler; or put a binary at {path}): {r.stderr.strip()[-600:]}")
    return path, ""


def write_config(path: Path, db: Path, replica: Path, sync_interval: float = SYNC_INTERVAL) -> Path:
    """A litestream configuration: ``db`` replicated to a file replica at ``replica``."""
    path.write_text(
        "dbs:\n"
        f"  - path: {db}\n"
        "    replicas:\n"
        "      - type: file\n"
        f"        path: {replica}\n"
        f"        sync-interval: {sync_interval:g}s\n")
    return path


def serve_args(db: Path, port: int, host: str = "127.0.0.1", ctrl_port: int = 0, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ziti_lite", "serve", "--db", str(db), "--host", host, "--port", str(port),
            "--edge-port", "0", "--ctrl-port", str(ctrl_port), "--log-level", "warning", *extra]


@dataclass
class Process:
    """A process group started here (litestream and its ziti-lite, or ziti-lite alone)."""

    proc: subprocess.Popen
    log: Path

    def kill9(self) -> None:
        """kill -9 of the whole group: litestream and the server die at the same instant."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def start(args: list[str], log: Path) -> Process:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_LITE_")}, "PYTHONUNBUFFERED": "1"}
    out = open(log, "ab")  # noqa: SIM115 - the child keeps it; closed with the process
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    out.close()
    return Process(proc, log)


def replicate(litestream: str, config: Path, serve: list[str], log: Path) -> Process:
    """``litestream replicate -config CONFIG -exec "ziti-lite serve ..."``, as the README shows."""
    return start([litestream, "replicate", "-config", str(config), "-exec", shlex.join(serve)], log)


def restore(litestream: str, config: Path, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([litestream, "restore", "-config", str(config), str(db)], capture_output=True, text=True,
                          timeout=120)


def wait_ready(url: str, ca_file: str, proc: Process, timeout: float = 30.0) -> float:
    """Seconds until ``url``/version answers 200; AssertionError with the log otherwise."""
    import ssl
    import urllib.request
    tls = ssl.create_default_context(cafile=ca_file)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert proc.proc.poll() is None, f"the server exited:\n{proc.tail()}"
        try:
            with urllib.request.urlopen(url + "/version", context=tls, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"{url} did not answer within {timeout} s:\n{proc.tail()}")


def wait_replicated(replica: Path, timeout: float = 30.0) -> None:
    """Until Litestream's first snapshot of the database is in the file replica (its first sync,
    up to a sync interval after the start: a stop before it leaves the replica empty)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if any(replica.glob("generations/*/snapshots/*")):
            return
        time.sleep(0.05)
    raise AssertionError(f"no snapshot in {replica} within {timeout} s")


@dataclass
class Writer:
    """Identities created at a steady rate; each name with the time its 201 came back."""

    admin: testing.Management
    rate: float = 50.0
    prefix: str = "w"
    acked: list[tuple[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n, t0 = 0, time.monotonic()
        while not self._stop.is_set():
            name = f"{self.prefix}-{n:06d}"
            try:
                r = self.admin.post("/identities", {"name": name, "type": "User", "isAdmin": False})
            except OSError as e:   # the server was killed under the request
                self.errors.append(str(e))
                return
            if r.status == 201:
                self.acked.append((name, time.monotonic()))
            n += 1
            delay = t0 + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(35)


def names(admin: testing.Management, prefix: str) -> set[str]:
    """The names of the identities a writer made (``prefix-...``), read page by page."""
    out: set[str] = set()
    offset = 0
    while True:
        page = admin.get(f'/identities?filter=name contains "{prefix}-"&limit=500&offset={offset}').data
        out |= {i["name"] for i in page}
        if len(page) < 500:
            return out
        offset += 500


def lost(acked: list[tuple[str, float]], present: set[str], killed_at: float) -> list[tuple[str, float]]:
    """The acknowledged writes missing after recovery, each with how long before the kill it was
    acknowledged (seconds)."""
    return [(name, killed_at - t) for name, t in acked if name not in present]


class Relay:
    """A TCP relay on ``listen`` (the address a name resolves to) to ``target`` host, same port:
    it stands in for the DNS record (or floating address) an operator moves to the new box.
    Bytes pass unchanged, TLS and client certificates included."""

    def __init__(self, listen: str, ports: list[int], target: str):
        self.target = target
        self.servers = []
        for port in ports:
            s = socket.create_server((listen, port), reuse_port=False)
            self.servers.append(s)
            threading.Thread(target=self._accept, args=(s, port), daemon=True).start()

    def _accept(self, server: socket.socket, port: int) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client, port), daemon=True).start()

    def _pipe(self, client: socket.socket, port: int) -> None:
        try:
            upstream = socket.create_connection((self.target, port), timeout=5)
        except OSError:
            client.close()      # as a dead host's address: the peer retries
            return
        upstream.settimeout(None)

        def copy(a: socket.socket, b: socket.socket) -> None:
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)
        threading.Thread(target=copy, args=(upstream, client), daemon=True).start()
        copy(client, upstream)
        client.close()
        upstream.close()

    def close(self) -> None:
        for s in self.servers:
            s.close()
