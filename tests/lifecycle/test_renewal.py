"""Renewal of the controller's own certificates (``lifecycle/renewal.py``): when each one is
due, what a renewal writes (in one transaction) and that what the old certificates signed still
verifies under the new ones."""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from ziti_lite import clock
from ziti_lite.app import create_app
from ziti_lite.auth import oidc_tokens
from ziti_lite.auth.certs import controller_cas, previous_server_certs
from ziti_lite.config import Settings
from ziti_lite.ctrl.datamodel import DataModel
from ziti_lite.lifecycle import renewal
from ziti_lite.pki import ca

DAY = dt.timedelta(days=1)


def test_the_window_is_a_third_at_least_30_days_at_most_half():
    assert renewal.window(365 * DAY) == 365 * DAY / 3
    assert renewal.window(60 * DAY) == 30 * DAY          # a third would be 20 days
    assert renewal.window(10 * DAY) == 5 * DAY           # never renewed as soon as it is made
    assert renewal.window(3650 * DAY) == 3650 * DAY / 3


def _settings(ctl) -> list[str]:
    return renewal.hosts_for(ctl.settings)


def test_nothing_is_due_on_a_new_controller(ctl):
    before = dict(ctl.state)
    assert renewal.renew(ctl.store, _settings(ctl)) == []
    after = {k: v for k, v in ctl.store.conn.execute("SELECT key, value FROM controller")}
    assert after == before
    # the server certificate (365 days) is due when about 121.7 days are left
    at = renewal.renew_at(ctl.state["server_cert"])
    end = ca.cert_info(ctl.state["server_cert"])["not_after"]
    assert dt.timedelta(days=121) < end - at < dt.timedelta(days=122)
    assert renewal.next_renewal(ctl.state) == at


def test_in_its_window_the_server_certificate_is_renewed_with_its_key(ctl):
    old = ca.KeyPair(ctl.state["server_cert"], ctl.state["server_key"])
    now = renewal.renew_at(old.cert_pem) + dt.timedelta(minutes=1)
    done = renewal.renew(ctl.store, _settings(ctl), server_days=200, now=now)
    assert [(r.name, r.reason) for r in done] == [("server", "window")]
    renewal.apply(ctl, done)
    new = ca.KeyPair(ctl.state["server_cert"], ctl.state["server_key"])
    info = ca.cert_info(new.cert_pem)
    assert info["not_after"] > ca.cert_info(old.cert_pem)["not_after"]
    assert info["not_after"] - now == 200 * DAY
    assert new.key_pem == old.key_pem and new.fingerprint != old.fingerprint   # JWTs stay verifiable
    assert ca.verify_chain(new.cert_pem, [ctl.state["signer_cert"]], [ctl.state["root_cert"]], at=now, eku="server")
    assert ctl.cert_renewals == {"server": 1}
    assert ctl.store.value("SELECT value FROM controller WHERE key = 'server_renewed_at'") == clock.fmt(now)
    # a restart finds the renewed pair and nothing due
    assert renewal.renew(ctl.store, _settings(ctl), now=now) == []


def test_controllers_shows_the_renewed_server_certificate(ctl, admin):
    old = ctl.state["server_cert"]
    now = renewal.renew_at(old) + dt.timedelta(minutes=1)
    renewal.apply(ctl, renewal.renew(ctl.store, _settings(ctl), now=now))
    assert ctl.state["server_cert"] != old
    (c,) = admin.get("/controllers").json()["data"]
    assert c["certPem"] == ctl.state["server_cert"] and c["fingerprint"] == ca.fingerprint(ctl.state["server_cert"])


def test_replaced_server_certificates_stay_published_to_routers_after_a_restart(ctl):
    first = ctl.state["server_cert"]
    now = renewal.renew_at(first) + dt.timedelta(minutes=1)
    renewal.apply(ctl, renewal.renew(ctl.store, _settings(ctl), server_days=200, now=now))
    second = ctl.state["server_cert"]
    assert previous_server_certs(ctl) == [first]
    # a restart: a new controller process on the same file
    again = create_app(Settings(db=ctl.settings.db, admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    try:
        model = DataModel(SimpleNamespace(ctl=again.state.controller))   # type: ignore[arg-type]
        keys = model._public_keys()
        # both kids a session token may name, each a key that signs session tokens
        for pem in (first, second):
            assert ca.fingerprint(pem) in keys and ca.fingerprint(pem) in model._signing_kids
        # and /oidc/keys names the key under both, the current one first
        kids = [k["kid"] for k in oidc_tokens.jwks(again.state.controller)["keys"]]
        assert kids == [ca.fingerprint(second), ca.fingerprint(first)]
    finally:
        again.state.controller.store.close()
    # replaced ones that ended are dropped, and at most PREVIOUS_SERVER are kept
    later = now
    for _ in range(renewal.PREVIOUS_SERVER + 2):
        later = renewal.renew_at(ctl.state["server_cert"]) + dt.timedelta(minutes=1)
        renewal.apply(ctl, renewal.renew(ctl.store, _settings(ctl), server_days=200, now=later))
    kept = previous_server_certs(ctl)
    assert len(kept) <= renewal.PREVIOUS_SERVER and first not in kept
    assert all(renewal.validity(p)[1] > later for p in kept)


def test_the_signing_ca_is_reissued_under_the_root_and_what_it_signed_still_verifies(ctl):
    signer = ca.KeyPair(ctl.state["signer_cert"], ctl.state["signer_key"])
    leaf = ca.sign_csr(_csr(), signer, days=3650)
    now = renewal.renew_at(signer.cert_pem) + DAY
    done = renewal.renew(ctl.store, _settings(ctl), now=now)
    # root and signing CA were made together for as long; the server certificate is due long before
    assert [r.name for r in done] == ["root", "signer", "server"]
    renewal.apply(ctl, done)
    new_signer = ctl.state["signer_cert"]
    assert new_signer != signer.cert_pem
    assert ca.cert_info(new_signer)["not_after"] - now == ca.CA_DAYS * DAY
    # the old leaf verifies under the new signing CA and the root, and the old one is kept
    assert ca.verify_chain(leaf, [new_signer], [ctl.state["root_cert"]], at=now + DAY)
    assert json.loads(ctl.state["signer_cert_previous"]) == [signer.cert_pem]
    root = ca.cert_info(ctl.state["root_cert"])
    assert root["subject"] == root["issuer"] and root["not_after"] - now == ca.CA_DAYS * DAY
    assert ca.verify_chain(ctl.state["server_cert"], [new_signer], [ctl.state["root_cert"]], at=now, eku="server")
    assert signer.cert_pem in controller_cas(ctl)


def _csr() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    req = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf")]))
           .sign(key, hashes.SHA256()))
    return req.public_bytes(serialization.Encoding.PEM).decode()


def test_a_renewal_that_fails_midway_leaves_the_old_valid_pairs(ctl, monkeypatch):
    before = {k: v for k, v in ctl.store.conn.execute("SELECT key, value FROM controller")}
    now = renewal.renew_at(ctl.state["signer_cert"]) + DAY   # signer and server both due

    def broken(*a, **kw):
        raise OSError("disk gone")
    monkeypatch.setattr(ca, "issue_server_cert", broken)    # after the signer was re-issued
    with pytest.raises(OSError):
        renewal.renew(ctl.store, _settings(ctl), now=now)
    after = {k: v for k, v in ctl.store.conn.execute("SELECT key, value FROM controller")}
    assert after == before


def test_a_new_advertised_host_reissues_the_server_certificate_at_start(db_path):
    app = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                              advertise="ctrl.example.test"))
    ctl = app.state.controller
    try:
        assert renewal.sans_lack(ctl.state["server_cert"], ["ctrl.example.test", "127.0.0.1"]) == []
        assert ctl.cert_renewals == {"server": 1}
    finally:
        ctl.store.close()


def test_a_database_made_a_year_ago_renews_its_expired_server_certificate_at_start(tmp_path):
    db = tmp_path / "old.db"
    clock.advance(-400 * 86400)
    try:
        made = create_app(Settings(db=str(db), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
        old = made.state.controller.state["server_cert"]
        made.state.controller.store.close()
    finally:
        clock.reset()
    assert ca.cert_info(old)["not_after"] < clock.now()
    app = create_app(Settings(db=str(db), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    ctl = app.state.controller
    try:
        assert ctl.cert_renewals == {"server": 1}
        assert ca.cert_info(ctl.state["server_cert"])["not_after"] > clock.now() + 364 * DAY
    finally:
        ctl.store.close()


def test_server_cert_days_sets_the_validity_and_the_window_follows(tmp_path):
    from click.testing import CliRunner

    from ziti_lite.cli import cli
    assert "--server-cert-days" in CliRunner().invoke(cli, ["serve", "--help"]).output
    app = create_app(Settings(db=str(tmp_path / "short.db"), server_cert_days=90))
    ctl = app.state.controller
    try:
        info = ca.cert_info(ctl.state["server_cert"])
        assert info["not_after"] - info["not_before"] == 90 * DAY + dt.timedelta(hours=1)
        assert info["not_after"] - renewal.renew_at(ctl.state["server_cert"]) == 30 * DAY + dt.timedelta(hours=1) / 3
    finally:
        ctl.store.close()
