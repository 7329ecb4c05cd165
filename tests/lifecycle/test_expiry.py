"""What ends when (``lifecycle/expiry.py``): the controller's certificates, the soonest identity
and router certificates, the server certificate's health state, and ``ziti-lite check``'s list."""

from __future__ import annotations

import datetime as dt

from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.enroll.conftest import csr
from ziti_lite import clock
from ziti_lite.cli import cli
from ziti_lite.lifecycle import expiry, renewal
from ziti_lite.pki import ca

DAY = 86400


def enrolled(anon, admin, name: str) -> str:
    iid = admin.create("identities", {"name": name, "type": "Device", "isAdmin": False, "enrollment": {"ott": True}})
    token = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["token"]
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=csr(key, iid),
                         headers={"content-type": "application/x-pem-file"})
    assert r.status_code == 200, r.text
    return iid


def test_the_soonest_identity_certificate_follows_the_database(anon, admin, ctl):
    assert expiry.soonest(ctl.store, "identity") is None
    first = enrolled(anon, admin, "first")
    clock.advance(10 * DAY)
    admin = anon.login()        # the first admin session expired meanwhile
    enrolled(anon, admin, "second")
    soonest = expiry.soonest(ctl.store, "identity")
    assert soonest is not None and soonest.id == first and soonest.name == "first"
    assert abs(soonest.seconds_left() - (365 - 10) * DAY) < 120
    admin.delete(f"/identities/{first}")
    soonest = expiry.soonest(ctl.store, "identity")     # the cache saw the change
    assert soonest is not None and soonest.name == "second"


def test_server_state_ok_then_warning_then_failing(ctl):
    pem = ctl.state["server_cert"]
    end = ca.cert_info(pem)["not_after"]
    assert expiry.server_state(ctl.state)[0] == "ok"
    assert expiry.server_state(ctl.state, renewal.renew_at(pem) + dt.timedelta(seconds=1))[0] == "warning"
    level, text = expiry.server_state(ctl.state, end + dt.timedelta(seconds=1))
    assert level == "failing" and "restart ziti-lite serve" in text


def test_check_lists_certificates_that_end_within_30_days(anon, admin, ctl, db_path):
    iid = enrolled(anon, admin, "laptop-of-ana")
    r = CliRunner().invoke(cli, ["check", "--db", str(db_path)])
    assert r.exit_code == 0 and "0 certificate(s) end within 30 days" in r.output, r.output
    clock.advance(340 * DAY)      # the identity's certificate (365 days) and the server's have 25 days left
    r = CliRunner().invoke(cli, ["check", "--db", str(db_path)])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.output.splitlines() if line.startswith("certificate:")]
    assert len(lines) == 2, r.output
    assert lines[0].startswith("certificate: the controller's TLS server certificate ends in 25.")
    assert lines[1].startswith(f"certificate: identity 'laptop-of-ana' ({iid}) ends in 25.")
    auth = ctl.store.value("SELECT id FROM authenticators WHERE identity_id = ?", (iid,))
    assert "extend" in lines[1] and f"ziti edge delete authenticator {auth}, then" in lines[1]
    assert f"ziti edge create enrollment ott {iid}" in lines[1]
    assert "2 certificate(s) end within 30 days" in r.output
    clock.advance(30 * DAY)
    r = CliRunner().invoke(cli, ["check", "--db", str(db_path), "--cert-days", "0"])
    assert f"certificate: identity 'laptop-of-ana' ({iid}) ended 5.0 days ago" in r.output


def test_a_costly_pass_is_made_again_at_most_once_a_refresh(anon, admin, ctl, monkeypatch):
    first = enrolled(anon, admin, "first")
    enrolled(anon, admin, "second")
    monkeypatch.setattr(expiry, "CHEAP", -1.0)     # every pass counts as costly (a large network)
    assert expiry.soonest(ctl.store, "identity").id == first
    admin.delete(f"/identities/{first}")
    assert expiry.soonest(ctl.store, "identity").id == first      # within the refresh period: the last answer
    monkeypatch.setattr(expiry, "REFRESH", 0.0)
    assert expiry.soonest(ctl.store, "identity").name == "second"


def _key() -> str:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


def test_router_certificates_in_metrics_and_check(anon, admin, ctl, db_path):
    rid = admin.create("edge-routers", {"name": "branch-7"})
    token = admin.get(f"/edge-routers/{rid}").json()["data"]["enrollmentToken"]
    r = anon.client.post(f"/enroll?method=erott&token={token}",
                         json={"certCsr": csr(_key(), rid), "serverCertCsr": csr(_key(), rid)})
    assert r.status_code == 200, r.text
    end = ca.cert_info(r.json()["data"]["cert"])["not_after"]
    soonest = expiry.soonest(ctl.store, "router")
    assert soonest is not None and (soonest.id, soonest.not_after) == (rid, end)
    text = anon.client.get("/metrics").text
    assert f'ziti_lite_certificate_expiry_seconds{{certificate="router",id="{rid}"}}' in text
    clock.advance(350 * DAY)
    r = CliRunner().invoke(cli, ["check", "--db", str(db_path)])
    line = next(x for x in r.output.splitlines() if "router 'branch-7'" in x)
    assert f"({rid}) ends in 15." in line and f"ziti edge re-enroll edge-router {rid}" in line
