"""A real client: the OpenZiti C SDK (0.29, from the ``openziti`` wheel) against a live ziti-lite
over TLS. It verifies the enrollment JWT against the server certificate, fetches the CA bundle,
sends its own CSR, then logs in with the issued certificate, loads its services and asks for a
Dial session (the connection itself then times out: ziti-lite runs no edge router data plane).

Skipped where the wheel is not installed (it exists for Linux x86_64 only)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from tests.enroll.conftest import fingerprint, issue, make_ca, register_ca

pytestmark = pytest.mark.slow   # the C SDK against a live server

pytest.importorskip("openziti", reason="the openziti wheel (C SDK) is not installed here")

RUNNER = os.path.join(os.path.dirname(__file__), "c_sdk_client.py")


def run_step(*args: str, timeout: float = 30) -> list[dict]:
    out = subprocess.run([sys.executable, RUNNER, *args], capture_output=True, text=True, timeout=timeout)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """The process's first output line, or "" when it prints none in time (the SDK can hang)."""
    ready = select.select([proc.stdout], [], [], timeout)[0]
    return proc.stdout.readline() if ready else ""


def wait_for(predicate, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture(scope="module")
def network(live):
    """A service the tag #sdk may dial, through one edge router shared by both router policies."""
    admin = live.admin()
    service = admin.create("services", {"name": "sdk-echo", "roleAttributes": ["sdk-demo"], "encryptionRequired": True})
    admin.create("service-policies", {"name": "sdk-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#sdk"], "serviceRoles": ["#sdk-demo"]})
    admin.create("edge-routers", {"name": "sdk-er", "roleAttributes": ["sdk-er"]})
    admin.create("edge-router-policies", {"name": "sdk-erp", "semantic": "AnyOf",
                                          "identityRoles": ["#sdk"], "edgeRouterRoles": ["#sdk-er"]})
    admin.create("service-edge-router-policies", {"name": "sdk-serp", "semantic": "AnyOf",
                                                  "serviceRoles": ["#sdk-demo"], "edgeRouterRoles": ["#sdk-er"]})
    return admin, service


def test_c_sdk_enrolls_logs_in_with_its_certificate_and_gets_a_dial_session(live, network, tmp_path):
    admin, service = network
    iid = admin.create("identities", {"name": "c-sdk-device", "type": "Device", "isAdmin": False,
                                      "roleAttributes": ["sdk"], "enrollment": {"ott": True}})
    jwt_file = tmp_path / "device.jwt"
    jwt_file.write_text(admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["jwt"])
    identity_file = tmp_path / "device.json"

    events = run_step("enroll", str(jwt_file), str(identity_file))
    assert events == [{"event": "enrolled", "ztAPI": live.url}], events
    identity = json.loads(identity_file.read_text())
    detail = admin.get(f"/identities/{iid}").json()["data"]
    assert detail["enrollment"] == {}
    assert detail["authenticators"]["cert"]["fingerprint"] == fingerprint(identity["id"]["cert"])
    assert "PRIVATE KEY" not in json.dumps(detail)

    # the same token a second time: the SDK reports the controller's refusal
    again = run_step("enroll", str(jwt_file), str(tmp_path / "again.json"))
    assert again and again[0]["event"] == "error", again
    assert not (tmp_path / "again.json").exists()

    assert_dials(admin, identity_file, iid, service, detail["authenticators"]["cert"]["id"])


def test_c_sdk_auto_enrolls_with_an_external_ca_certificate(live, network, keys, tmp_path):
    admin, service = network
    root = make_ca("C SDK Device Root", keys[0])
    ca_id = register_ca(admin, root, "sdk-ca", keys[1], identityRoles=["sdk"])
    jwt_file = tmp_path / "ca.jwt"
    jwt_file.write_text(admin.get(f"/cas/{ca_id}/jwt").text)
    key_file, cert_file = tmp_path / "device.key", tmp_path / "device.pem"
    key_file.write_text(keys[2])
    cert_file.write_text(issue(root, "camera-3", keys[2]))
    identity_file = tmp_path / "camera.json"

    events = run_step("enroll", str(jwt_file), str(identity_file), str(key_file), str(cert_file))
    assert events and events[0]["event"] == "enrolled", events
    found = admin.get('/identities?filter=name="sdk-ca-camera-3"').json()["data"]
    assert len(found) == 1 and found[0]["roleAttributes"] == ["sdk"]
    iid = found[0]["id"]
    cert_auth = admin.get(f"/identities/{iid}").json()["data"]["authenticators"]["cert"]
    assert cert_auth["fingerprint"] == fingerprint(cert_file.read_text())
    assert_dials(admin, identity_file, iid, service, cert_auth["id"])


def assert_dials(admin, identity_file, iid: str, service: str, authenticator_id: str) -> None:
    """Load the identity in the C SDK and dial ``service``: it logs in with its certificate and
    gets a Dial session (the dial itself cannot complete without an edge router process)."""
    proc = subprocess.Popen([sys.executable, RUNNER, "dial", str(identity_file), "sdk-echo"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = json.loads(_first_line(proc, timeout=30) or "{}")
        assert first == {"event": "loaded", "ok": True}
        # logged in with its certificate: the API session carries the C SDK's sdkInfo
        seen = wait_for(lambda: admin.get(f"/identities/{iid}").json()["data"])
        assert seen["hasApiSession"] is True
        assert seen["sdkInfo"]["type"] == "ziti-sdk-c" and seen["sdkInfo"]["version"].startswith("0.29")
        sessions = wait_for(lambda: [s for s in admin.get("/sessions").json()["data"]
                                     if s["identityId"] == iid and s["serviceId"] == service])
        assert sessions[0]["type"] == "Dial"
        mine = [a for a in admin.get("/api-sessions").json()["data"] if a["identityId"] == iid]
        assert len(mine) == 1 and mine[0]["authenticatorId"] == authenticator_id
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
