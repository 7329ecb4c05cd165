"""Fixtures for the control channel: a live ziti-lite (API, embedded router, control channel on
loopback) and routers created and enrolled through the API, as ``ziti router enroll`` does."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.conftest import CLIENT
from tests.ctrl.fake_router import FakeRouter
from tests.enroll.conftest import csr, running
from ziti_lite.events.bus import Subscriber
from ziti_lite.pki.ca import fingerprint


@pytest.fixture(scope="module")
def live(template_db, tmp_path_factory):
    """A live controller with its control channel (heartbeat timeout 2 s for the tests)."""
    with running(template_db, tmp_path_factory.mktemp("ctrl"), edge=True, ctrl=True,
                 ctrl_heartbeat_timeout=2.0) as handle:
        yield handle


def wait_for(check, timeout: float = 5.0) -> bool:
    """Poll ``check`` until it is true or ``timeout`` passes; its last verdict."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


def new_key() -> str:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


@dataclass
class Router:
    id: str
    name: str
    cert_pem: str
    key_pem: str
    port: int
    ca_pem: str

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.cert_pem)

    def connect(self, cert_pem: str | None = None, key_pem: str | None = None) -> FakeRouter:
        return FakeRouter.connect(self.port, cert_pem or self.cert_pem, key_pem or self.key_pem, self.ca_pem)

    def online(self, edge_port: int = 4444, link_listener: str | None = None) -> FakeRouter:
        """Connected, hello accepted, ClientHello sent: online in the API."""
        r = self.connect()
        result = r.hello(self.id, link_listener=link_listener)
        assert result.headers.get(2) == b"\x01", result.body
        r.client_hello("127.0.0.1", edge_port)
        return r


def enroll_router(live, admin, name: str, **body) -> Router:
    rid = admin.create("edge-routers", {"name": name, "roleAttributes": ["public"], **body})
    token = admin.get(f"/edge-routers/{rid}").json()["data"]["enrollmentToken"]
    key = new_key()
    r = live.client().post(f"{CLIENT}/enroll/erott?token={token}",
                           json={"certCsr": csr(key, rid), "serverCertCsr": csr(new_key(), rid)})
    assert r.status_code == 200, r.text
    return Router(rid, name, r.json()["data"]["cert"], key, live.ctl.ctrl_server.port, live.ca_bundle)


class Collect(Subscriber):
    """Every event the controller publishes, kept in a list (subscribe it to ``ctl.events``)."""

    def __init__(self):
        self.events: list[dict] = []

    def offer(self, namespace: str, line: bytes, event: dict) -> bool:
        self.events.append(event)
        return True
