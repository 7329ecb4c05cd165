"""Fixtures for the data plane: a real ziti-lite with its embedded edge router on loopback,
identities enrolled through the API, and real C SDK peers (``sdk_peer.py``) in subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import pytest

from tests.enroll.conftest import csr, keys, running  # noqa: F401 - keys is a fixture

PEER = os.path.join(os.path.dirname(__file__), "sdk_peer.py")


@pytest.fixture(scope="module")
def edge(template_db, tmp_path_factory):
    """A live controller whose embedded edge router listens on a loopback port."""
    with running(template_db, tmp_path_factory.mktemp("edge"), edge=True) as handle:
        yield handle


def enroll(edge, admin, name: str, attrs=(), key_pem: str | None = None, **extra) -> tuple[str, str]:
    """Create an identity and enroll it with a CSR over the API; write the identity file an SDK
    loads. Returns (identity id, path of the identity file)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    if key_pem is None:
        key_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption()).decode()
    iid = admin.create("identities", {"name": name, "type": "Device", "isAdmin": False, "roleAttributes": list(attrs),
                                      "enrollment": {"ott": True}, **extra})
    token = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["token"]
    r = httpx.post(f"{edge.url}/enroll?method=ott&token={token}", content=csr(key_pem, iid),
                   headers={"content-type": "application/x-pem-file", "accept": "application/x-pem-file"},
                   verify=False, timeout=10)
    assert r.status_code == 200, r.text
    path = os.path.join(edge.tmp, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"ztAPI": edge.url, "id": {"cert": r.text, "key": key_pem, "ca": edge.ca_bundle}}, f)
    return iid, path


class Peer:
    """One SDK process; its JSON events arrive on a queue."""

    def __init__(self, *args: str):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="sdk-peer-", suffix=".log", delete=False)
        env = {**os.environ, "ZITI_LOG": os.environ.get("ZITI_LOG", "3")}
        self.proc = subprocess.Popen([sys.executable, PEER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1, env=env)
        self.events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with self.proc.stdout as out:
            for line in out:
                if line.startswith("{"):
                    self.events.put(json.loads(line))
        try:
            with open(self.log.name) as f:
                tail = f.read()[-3000:]
        except OSError:  # stopped and removed meanwhile
            tail = ""
        self.events.put({"event": "exited", "log": tail})

    def next(self, timeout: float = 30, kind: str | None = None) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {kind or 'event'} from the SDK peer in {timeout} s")
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if kind is None or ev["event"] in (kind, "error", "exited"):
                return ev

    def send(self, **cmd) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        with contextlib.suppress(OSError):   # a line the killed peer never read
            self.proc.stdin.close()
        self.log.close()
        os.unlink(self.log.name)


@pytest.fixture
def peers():
    started: list[Peer] = []

    def start(*args: str) -> Peer:
        p = Peer(*args)
        started.append(p)
        return p
    yield start
    for p in started:
        p.stop()


def host(peers, identity_file: str, service: str, name: str = "host") -> Peer:
    p = peers("host", identity_file, service, name)
    ev = p.next(kind="bound")
    assert ev == {"event": "bound"}, ev.get("log", ev)
    return p


def dialer(peers, identity_file: str) -> Peer:
    p = peers("dial", identity_file)
    ev = p.next(kind="loaded")
    assert ev == {"event": "loaded", "ok": True}, ev.get("log", ev)
    return p


def wait_for(predicate, timeout: float = 20, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")
