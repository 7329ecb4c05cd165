"""Renewal without a restart, on a real server: the controller's clock is moved past the renewal
point of the running server; new TLS handshakes (API port and edge router) get a new
certificate with a later end, a keep-alive connection opened before keeps working, an SDK channel
connected to the embedded router stays connected, and a restart keeps the renewed pair."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
import struct
import time

import httpx
import pytest

from tests.edge import client as ec
from tests.edge.conftest import enroll
from tests.enroll.conftest import running
from tests.test_observe import parse_metrics
from ziti_lite import clock
from ziti_lite.app import create_app
from ziti_lite.config import Settings
from ziti_lite.lifecycle import renewal
from ziti_lite.pki import ca

pytestmark = pytest.mark.slow   # a live server over TLS and a wait for the janitor's timer


NO_CHECK_TIME = 0x200000   # OpenSSL's X509_V_FLAG_NO_CHECK_TIME


def verifying(bundle: str, identity: ec.Identity | None = None) -> ssl.SSLContext:
    """A client context that verifies the chain and the host name against ``bundle`` but not the
    dates: the controller's clock is moved, the machine's is not (the renewed certificate starts
    in the machine's future)."""
    context = ec.tls_context(identity, bundle)
    context.verify_flags |= NO_CHECK_TIME
    return context


def presented(port: int, bundle: str, alpn: list[str] | None = None) -> str:
    """The certificate a new TLS handshake on ``port`` presents (verified against ``bundle``)."""
    context = verifying(bundle)
    if alpn:
        context.set_alpn_protocols(alpn)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return ssl.DER_cert_to_PEM_cert(tls.getpeercert(binary_form=True))


def on_loop(ctl, fn) -> None:
    """Run ``fn`` on the server's event loop and wait for it: the clock moves between two of the
    loop's callbacks, never inside one (the router marks its connected sessions active first)."""
    loop = ctl.edge_router.server.get_loop()
    done = asyncio.run_coroutine_threadsafe(_call(fn), loop)
    done.result(10)


async def _call(fn) -> None:
    fn()


def test_the_clock_moved_past_the_renewal_point_of_a_running_server(template_db, tmp_path):
    with running(template_db, tmp_path, edge=True, idle_timeout=120.0) as live:
        ctl = live.ctl
        admin = live.admin()
        edge_port = ctl.edge_router.port
        old = presented(live.port, live.ca_bundle)
        assert old.strip() == ctl.state["server_cert"].strip()
        assert presented(edge_port, live.ca_bundle, ["ziti-edge"]).strip() == old.strip()
        # an SDK channel on the embedded router, and a keep-alive HTTPS connection, both opened before
        _, path = enroll(live, admin, "renewal-sdk")
        with open(path) as f:
            d = json.load(f)["id"]
        ident = ec.Identity(d["cert"], d["key"], d["ca"])
        http_client, r = live.cert_login(ident.cert_pem, ident.key_pem)
        assert r.status_code == 200, r.text
        token = r.json()["data"]["token"]
        keep = http.client.HTTPSConnection("127.0.0.1", live.port,
                                           context=ssl.create_default_context(cadata=live.ca_bundle), timeout=10)
        keep.request("GET", "/edge/client/v1/version")
        assert keep.getresponse().read() and keep.sock.getpeercert(binary_form=True) == ssl.PEM_cert_to_DER_cert(old)
        kept_socket = keep.sock
        offset: list[float] = []

        async def scenario() -> str:
            channel = await ec.EdgeClient.open("127.0.0.1", edge_port, ident)
            hello = await channel.hello(token)
            assert hello.content == ec.RESULT and hello.headers[ec.RESULT_SUCCESS] == b"\x01"
            assert await probe(channel)

            # -- move the controller's clock past the renewal point (the janitor renews within 5 s)
            moved = (renewal.renew_at(old) - clock.now()).total_seconds() + 3600
            offset.append(moved)
            on_loop(ctl, lambda: (clock.advance(moved), ctl.edge_router.reconcile()))
            deadline = time.monotonic() + 30
            new = old
            while new == old:
                assert time.monotonic() < deadline, "the server certificate was not renewed"
                await asyncio.sleep(0.2)
                new = await asyncio.to_thread(presented, live.port, live.ca_bundle)
            assert ca.cert_info(new)["not_after"] > ca.cert_info(old)["not_after"]
            assert ca.cert_info(new)["not_after"] > clock.now() + renewal.window(ca.cert_info(new)["not_after"]
                                                                               - ca.cert_info(new)["not_before"])
            edge_new = await asyncio.to_thread(presented, edge_port, live.ca_bundle, ["ziti-edge"])
            assert edge_new == new     # both listeners reloaded

            # the SDK's channel made before the renewal is still up and answered
            assert await probe(channel) and not channel.closed.is_set()
            await channel.close()
            # a new SDK channel gets the new certificate and is accepted
            reader, writer = await asyncio.open_connection("127.0.0.1", edge_port, ssl=verifying(live.ca_bundle, ident),
                                                           server_hostname="127.0.0.1")
            again = ec.EdgeClient(reader, writer)
            assert again.writer.get_extra_info("ssl_object").getpeercert(binary_form=True) \
                == ssl.PEM_cert_to_DER_cert(new)
            hello = await again.hello(token)
            assert hello.headers[ec.RESULT_SUCCESS] == b"\x01"
            await again.close()
            return new

        new = asyncio.run(asyncio.wait_for(scenario(), 90))
        # the keep-alive connection made before the renewal: same socket, old certificate, answers
        keep.request("GET", "/edge/client/v1/version")
        reply = keep.getresponse()
        assert reply.status == 200 and json.loads(reply.read())["data"]["apiVersions"]
        assert keep.sock is kept_socket and keep.sock.getpeercert(binary_form=True) == ssl.PEM_cert_to_DER_cert(old)
        keep.close()
        # (a new connection: the renewed certificate starts in the machine's future, see verifying)
        http_client = httpx.Client(base_url=live.url, verify=verifying(live.ca_bundle), timeout=10)
        live.clients.append(http_client)
        m = parse_metrics(http_client.get("/metrics").text)
        assert m['ziti_lite_certificate_renewals_total{certificate="server"}'] == 1
        left = m['ziti_lite_certificate_expiry_seconds{certificate="server"}']
        assert abs(left - (ca.cert_info(new)["not_after"] - clock.now()).total_seconds()) < 60
        health = http_client.get("/health-checks").json()["data"]
        cert_check = {c["id"]: c for c in health["checks"]}["tls.server-certificate"]
        assert cert_check["healthy"] and "warning" not in cert_check
        db = ctl.settings.db
    # a restart (the clock still moved) keeps the renewed pair and renews nothing
    clock.advance(offset[0])
    try:
        app = create_app(Settings(db=db))
        restarted = app.state.controller
        assert restarted.state["server_cert"].strip() == new.strip() and restarted.cert_renewals == {}
        restarted.store.close()
    finally:
        clock.reset()


async def probe(channel: ec.EdgeClient) -> bool:
    r = await channel.request(ec.LATENCY, {128: struct.pack("<Q", 7)}, timeout=5)
    return r.content == ec.RESULT and r.headers.get(128) == struct.pack("<Q", 7)


def test_a_database_made_a_year_ago_starts_renews_and_serves(tmp_path, template_db):
    db = tmp_path / "year-old.db"
    clock.advance(-400 * 86400)
    try:
        made = create_app(Settings(db=str(db)))
        expired = made.state.controller.state["server_cert"]
        made.state.controller.store.close()
    finally:
        clock.reset()
    assert ca.cert_info(expired)["not_after"] < clock.now()
    with running(template_db, tmp_path, db=db) as live:
        # the CA bundle was fetched over the new certificate, verified with the machine's clock
        fresh = presented(live.port, live.ca_bundle)
        assert fresh != expired and ca.cert_info(fresh)["not_after"] > clock.now()
        assert live.client().get("/edge/client/v1/version").status_code == 200
        m = parse_metrics(live.client().get("/metrics").text)
        assert m['ziti_lite_certificate_renewals_total{certificate="server"}'] == 1
