"""Interop with the newest OpenZiti Go SDK (github.com/openziti/sdk-golang v1.9.0, pinned in
``tests/edge/go_sdk/go.v1.mod``), which logs in through OIDC when ``/version`` advertises
``OIDC_AUTH``: the controller's requests show ``/oidc`` used and ``/authenticate`` not; the SDK
lists services, binds and dials through the embedded router with its access tokens, and keeps
working across several access-token lifetimes (it refreshes by token exchange); a TOTP-enrolled
identity with a code provider takes TOTP tokens (``POST /current-api-session/totp-token``) to dial
behind an MFA posture check.

The peer is ``tests/edge/go_sdk``'s program built against that version (``test_go_sdk.gopeer_v1``);
skipped where ``go`` is missing or the build fails."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from tests.auth.conftest import code, secret_of
from tests.conftest import CLIENT
from tests.edge.conftest import enroll, running, wait_for
from tests.edge.test_go_sdk import GoPeer, go_identity, gopeer_v1  # noqa: F401 - gopeer_v1 is a fixture
from ziti_lite import clock

pytestmark = pytest.mark.interop

ACCESS_SECONDS = 20     # short access tokens: the run outlives several


@pytest.fixture(scope="module")
def oidc_edge(template_db, tmp_path_factory):
    with running(template_db, tmp_path_factory.mktemp("oidc-edge"), edge=True,
                 oidc_access_seconds=ACCESS_SECONDS) as handle:
        yield handle


def logins(admin, identity_id: str) -> list[tuple[str, str]]:
    """(path, outcome) of every login of the identity, from the audit trail."""
    r = admin.client.get(f'/ziti-lite/v1/audit?filter=operation="authenticate" and identityId="{identity_id}"'
                         "&limit=500", headers={"zt-session": admin.token})
    assert r.status_code == 200, r.text
    return [(row["path"], row["outcome"]) for row in r.json()["data"]]


def test_go_sdk_v1_9_logs_in_through_oidc_binds_dials_and_refreshes(oidc_edge, gopeer_v1):  # noqa: F811
    edge = oidc_edge
    admin = edge.admin()
    assert "OIDC_AUTH" in admin.client.get("/version").json()["data"]["capabilities"]
    sid = admin.create("services", {"name": "oidc-echo", "encryptionRequired": True, "roleAttributes": ["oe"]})
    admin.create("service-policies", {"name": "oe-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": ["#oe-host"], "serviceRoles": ["#oe"]})
    admin.create("service-policies", {"name": "oe-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#oe-client"], "serviceRoles": ["#oe"]})
    host_id, host_file = enroll(edge, admin, "oe-host", ["oe-host"])
    client_id, client_file = enroll(edge, admin, "oe-client", ["oe-client"])
    peers: list[GoPeer] = []
    try:
        host = GoPeer(gopeer_v1, "host", go_identity(host_file), "oidc-echo", "o1")
        peers.append(host)
        ev = host.next(kind="bound", timeout=60)
        assert ev["event"] == "bound", ev.get("log", ev)
        wait_for(lambda: admin.get(f'/terminators?filter=service="{sid}"').json()["data"] or None)
        started = time.monotonic()
        rounds = 0
        # dial again and again across more than two access-token lifetimes: the host's channel and
        # its terminator stay, each new dialer logs in through OIDC
        while time.monotonic() - started < 2.5 * ACCESS_SECONDS:
            c = GoPeer(gopeer_v1, "dial", go_identity(client_file), "oidc-echo", f"ping{rounds}")
            peers.append(c)
            ev = c.next(kind="echo", timeout=60)
            assert ev["event"] == "echo" and ev["reply"] == f"o1:ping{rounds}\n", ev.get("log", ev)
            rounds += 1
            time.sleep(5)
        assert admin.get(f'/terminators?filter=service="{sid}"').json()["data"], "the host lost its terminator"
        r = admin.get(f'/api-sessions?filter=identity="{host_id}"')   # upstream's symbol
        assert r.status_code == 200 and r.json()["data"], r.text   # its token-based API session lives on
        # the host refreshed by token exchange (rotating its refresh token onto the revocation list)
        # and never logged in again
        assert edge.ctl.oidc.grants["urn:ietf:params:oauth:grant-type:token-exchange"] >= 2
        assert edge.ctl.store.value("SELECT count(*) FROM revocations") >= 1
        assert len(logins(admin, host_id)) == 1
        assert rounds >= 3
        # every login went through /oidc: none through /authenticate
        for iid, least in ((host_id, 1), (client_id, rounds)):
            seen = logins(admin, iid)
            assert len(seen) >= least and all(p.startswith("/oidc/login/") and o == "success" for p, o in seen), seen
    finally:
        for p in peers:
            p.stop()


@pytest.fixture(scope="module")
def totp_edge(template_db, tmp_path_factory):
    """A live controller with upstream's access-token lifetime (the test below moves no clock)."""
    with running(template_db, tmp_path_factory.mktemp("totp-edge"), edge=True) as handle:
        yield handle


def _enroll_totp(edge, identity_file: str) -> str:
    """TOTP enrollment of the identity of ``identity_file`` (through its certificate): the secret."""
    with open(identity_file) as f:
        ident = json.load(f)["id"]
    c, r = edge.cert_login(ident["cert"], ident["key"])
    assert r.status_code == 200, r.text
    h = {"zt-session": r.json()["data"]["token"]}
    assert c.post(CLIENT + "/current-identity/mfa", headers=h).status_code == 201
    secret = secret_of(c.get(CLIENT + "/current-identity/mfa", headers=h).json()["data"])
    r = c.post(CLIENT + "/current-identity/mfa/verify", json={"code": code(secret)}, headers=h)
    assert r.status_code == 200, r.text
    assert c.delete(CLIENT + "/current-api-session", headers=h).status_code == 200   # the SDK's is the only one
    return secret


def test_go_sdk_v1_9_takes_a_totp_token_to_dial_behind_an_mfa_posture_check(totp_edge, gopeer_v1, monkeypatch):  # noqa: F811
    """An OIDC-logged-in, TOTP-enrolled identity with a code provider dials a service whose dial
    policy has an MFA check with a timeout: the SDK gives its code at login, and when the check's
    timeout nears (here: the login's pass has run out) asks for a TOTP token before dialing, as it
    does against v2.0.3; the token is what lets the dial through."""
    edge = totp_edge
    admin = edge.admin()
    sid = admin.create("services", {"name": "totp-echo", "encryptionRequired": True, "roleAttributes": ["te"]})
    admin.create("posture-checks", {"name": "te-mfa", "typeId": "MFA", "timeoutSeconds": 120,
                                    "roleAttributes": ["te-mfa"]})
    admin.create("service-policies", {"name": "te-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": ["#te-host"], "serviceRoles": ["#te"]})
    admin.create("service-policies", {"name": "te-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#te-client"], "serviceRoles": ["#te"],
                                      "postureCheckRoles": ["#te-mfa"]})
    _, host_file = enroll(edge, admin, "te-host", ["te-host"])
    client_id, client_file = enroll(edge, admin, "te-client", ["te-client"])
    secret = _enroll_totp(edge, client_file)
    peers: list[GoPeer] = []
    try:
        host = GoPeer(gopeer_v1, "host", go_identity(host_file), "totp-echo", "t")
        peers.append(host)
        ev = host.next(kind="bound", timeout=60)
        assert ev["event"] == "bound", ev.get("log", ev)
        wait_for(lambda: admin.get(f'/terminators?filter=service="{sid}"').json()["data"] or None)
        monkeypatch.setenv("ZITI_TOTP_SECRET", secret)
        dialer = GoPeer(gopeer_v1, "totpdial", go_identity(client_file), "totp-echo", "mfa")
        peers.append(dialer)
        ev = dialer.next(kind="authenticated", timeout=60)
        assert ev["event"] == "authenticated", ev.get("log", ev)
        store = edge.ctl.store
        (session,) = store.all("SELECT id, mfa_passed_at FROM api_sessions WHERE identity_id = ?", (client_id,))
        assert session["mfa_passed_at"], "the OIDC login gave no TOTP code"
        # the login's pass has run out: only a fresh TOTP (a token) lets the dial through now
        stale = clock.fmt(clock.now() - dt.timedelta(seconds=200))
        with store.write():
            store.execute("UPDATE api_sessions SET mfa_passed_at = ? WHERE id = ?", (stale, session["id"]))
        dialer.command("dial 0")
        ev = dialer.next(kind="echo", timeout=60)
        assert ev["event"] == "echo" and ev["reply"] == "t:mfa\n", ev.get("log", ev)
        passed = store.value("SELECT mfa_passed_at FROM api_sessions WHERE id = ?", (session["id"],))
        assert clock.parse(passed) > clock.now() - dt.timedelta(seconds=60)
        # the SDK logged in through OIDC (the /authenticate login is the TOTP enrollment's above)
        assert ("/oidc/login/cert", "success") in logins(admin, client_id), logins(admin, client_id)
    finally:
        for p in peers:
            p.stop()
