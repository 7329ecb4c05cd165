"""The handshake's part in client-certificate checks (``ziti_lite/tls.py``); what the app then
decides is covered over live TLS in ``tests/enroll/test_live_tls.py``."""

from __future__ import annotations

import ssl

from ziti_lite import tls
from ziti_lite.lifecycle import contexts


def test_the_context_lets_every_chain_through_and_asks_for_one(ctl):
    context = contexts.ssl_context(ctl.state)
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert tls._accepts_any(context)
    # nothing is trusted at the TLS layer: the application checks every chain itself
    assert context.cert_store_stats()["x509_ca"] == 0
    tls.trust(ctl, ctl.state["root_cert"])  # no-op on such a context (ctl has none here)
    assert context.cert_store_stats()["x509_ca"] == 0


def test_without_the_callback_the_handshake_checks_controller_and_registered_cas(ctl, monkeypatch):
    def unavailable():
        raise OSError("no libssl here")
    monkeypatch.setattr(tls, "_libssl", unavailable)
    context = contexts.ssl_context(ctl.state, [ctl.state["root_cert"]])
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert not tls._accepts_any(context)
    assert context.cert_store_stats()["x509_ca"] == 2  # root and signing CA (the extra is the root again)
    contexts.register(ctl, context)
    from tests.pki.conftest import make_ca
    tls.trust(ctl, make_ca("Registered later").cert_pem)
    assert context.cert_store_stats()["x509_ca"] == 3


def test_installing_twice_or_resetting_the_mode_keeps_the_callback():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    assert tls.accept_any_client_chain(context)
    context.verify_mode = ssl.CERT_OPTIONAL   # CPython keeps the callback
    assert tls.accept_any_client_chain(context)


def test_a_context_with_someone_elses_callback_is_left_alone(monkeypatch):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    monkeypatch.setattr(tls, "_CHAIN_OK_ADDRESS", -1)  # as if _chain_ok were another callback
    assert tls.accept_any_client_chain(context)       # none installed yet: fine
    assert tls.accept_any_client_chain(context) is False
