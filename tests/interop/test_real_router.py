"""Real OpenZiti routers (``ziti router`` of each line present: v2.0.3, v1.6.20, v1.3.3) under
ziti-lite, with the real C SDK 0.29.3 and the Go SDK as hosts and dialers: a router created and enrolled
through the API comes online on ziti-lite's control channel, SDKs bind and dial through it only (the
controller runs without its embedded router), 10 MiB go each way with a checksum, FIN both ways;
revocations reach live connections; re-enrollment, a killed router and a restarted controller behave
as upstream's.

Each line's ``ziti`` binary is found as ``make interop`` finds it (its variable or the cache), else
that line's tests are skipped with the reason. Marked ``interop``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.edge.conftest import dialer, enroll, host, wait_for
from tests.edge.test_go_sdk import GoPeer, go_identity
from tests.enroll.conftest import running
from tests.interop.real_router import RealRouter, wait_online

pytestmark = pytest.mark.interop
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def lab(template_db, tmp_path_factory, router_bin):
    """ziti-lite with its control channel and no embedded router (one per router line)."""
    tmp = tmp_path_factory.mktemp("real-router")
    with running(template_db, tmp, edge=False, ctrl=True, ctrl_heartbeat_timeout=3.0) as handle:
        yield handle


@pytest.fixture(scope="module")
def router(lab, router_bin):
    admin = lab.admin()
    r = RealRouter(router_bin, Path(lab.tmp), "site-a", lab.ctl.ctrl_server.port, admin)
    r.enroll()
    t0 = time.monotonic()
    r.start()
    took = wait_online(admin, r.id, timeout=10)
    print(f"\nrouter {r.name} online {time.monotonic() - t0:.2f} s after `ziti router run` (API: {took:.2f} s)")
    yield r
    r.stop()


@pytest.fixture(scope="module")
def net(lab, router):
    """Two services (encrypted and plain), a host and a dialer identity, policies for the real router."""
    admin = lab.admin()
    ids = {}
    for name, enc in (("rr-enc", True), ("rr-plain", False)):
        ids[name] = admin.create("services", {"name": name, "encryptionRequired": enc, "roleAttributes": ["rr"]})
    for kind, role in (("Bind", "#rr-host"), ("Dial", "#rr-client")):
        ids[f"policy-{kind}"] = admin.create("service-policies", {
            "name": f"rr-{kind}", "type": kind, "semantic": "AnyOf", "identityRoles": [role], "serviceRoles": ["#rr"]})
    for name, role in (("rr-host", "rr-host"), ("rr-client", "rr-client")):
        ids[name], ids[name + ".file"] = enroll(lab, admin, name, [role])
    return admin, ids


def routers_of(admin, identity_id: str) -> set[str]:
    return {r["id"] for r in admin.get(f"/identities/{identity_id}/edge-routers").json()["data"]}


def test_router_online_and_listed_for_sdks(lab, router, net):
    admin, ids = net
    detail = admin.get(f"/edge-routers/{router.id}").json()["data"]
    assert detail["isOnline"] and detail["supportedProtocols"] == {"tls": f"tls://127.0.0.1:{router.edge_port}"}
    assert detail["versionInfo"]["os"] == "linux"
    assert router.id in routers_of(admin, ids["rr-client"])


@pytest.mark.parametrize("service", ["rr-enc", "rr-plain"])
def test_c_sdk_through_the_real_router(lab, router, net, peers, service):
    admin, ids = net
    h = host(peers, ids["rr-host.file"], service, "site-a")
    c = dialer(peers, ids["rr-client.file"])
    c.send(op="echo", service=service, line="hello through a real router")
    ev = c.next(kind="echo")
    assert ev["event"] == "echo" and ev["reply"] == "site-a:hello through a real router\n", ev
    assert c.next(kind="closed") == {"event": "closed", "rest": ""}          # FIN both ways
    assert h.next(kind="eof")["bytes"] == len("hello through a real router\n")
    terms = admin.get(f'/terminators?filter=service="{ids[service]}"').json()["data"]
    assert terms and {t["router"]["id"] for t in terms} == {router.id}
    c.send(op="bulk", service=service, size=10 * MiB)
    ev = c.next(timeout=180, kind="bulk")
    assert ev["event"] == "bulk" and ev["n"] == 10 * MiB and ev["got"] == ev["sent"], ev
    print(f"\nC SDK {service}: 10 MiB each way through the real router in {ev['after']:.2f} s")


@pytest.mark.parametrize("service", ["rr-enc", "rr-plain"])
def test_go_sdk_through_the_real_router(lab, router, net, go, service):
    admin, ids = net
    hfile, cfile = go_identity(ids["rr-host.file"]), go_identity(ids["rr-client.file"])
    h = go("host", hfile, service, "go-site-a")
    assert h.next(kind="bound")["event"] == "bound"
    d = go("dial", cfile, service, "hi")
    ev = d.next(kind="echo")
    assert ev["event"] == "echo" and ev["reply"] == "go-site-a:hi\n", ev
    assert d.next(kind="closed")["event"] == "closed"
    b = go("bulk", cfile, service, str(10 * MiB))
    ev = b.next(timeout=180, kind="bulk")
    assert ev["event"] == "bulk" and ev["n"] == 10 * MiB and ev["got"] == ev["sent"], ev
    print(f"\nGo SDK {service}: 10 MiB each way through the real router in {ev['after']:.2f} s")
    h.command("close")


@pytest.mark.parametrize("service", ["rr-enc", "rr-plain"])
def test_go_sdk_v1_9_through_the_real_router(lab, router, net, gopeer_v1, service):
    """The newest Go SDK: with OIDC where ``/version`` advertises it (every enrolled real router
    of v2.0 or later, so the router verifies the access token from the data model), else legacy."""
    admin, ids = net
    oidc = "OIDC_AUTH" in lab.client().get("/version").json()["data"]["capabilities"]
    v2 = all(v.startswith("v2.") for v in lab.ctl.router_lines.values())
    assert oidc == v2
    hfile, cfile = go_identity(ids["rr-host.file"]), go_identity(ids["rr-client.file"])
    h = GoPeer(gopeer_v1, "host", hfile, service, "go19")
    d = None
    try:
        ev = h.next(timeout=60, kind="bound")
        assert ev["event"] == "bound", (ev, router.tail())
        d = GoPeer(gopeer_v1, "dial", cfile, service, "hi")
        ev = d.next(timeout=60, kind="echo")
        assert ev["event"] == "echo" and ev["reply"] == "go19:hi\n", (ev, router.tail())
        logins = admin.client.get('/ziti-lite/v1/audit?filter=operation="authenticate" and outcome="success"'
                                  '&sort=id desc&limit=50', headers={"zt-session": admin.token})
        paths = {row["path"] for row in logins.json()["data"] if row.get("identityId") == ids["rr-client"]}
        assert any(p.startswith("/oidc/") for p in paths) == oidc, paths
    finally:
        h.stop()
        if d is not None:
            d.stop()


def held(peers, ids, name: str):
    """A host of rr-plain named ``name`` and a dialer holding one connection to it, open."""
    host(peers, ids["rr-host.file"], "rr-plain", name)
    c = dialer(peers, ids["rr-client.file"])
    c.send(op="hold", service="rr-plain", line=name)
    assert c.next(kind="echo")["event"] == "echo"
    return c


def test_route_path_names_the_real_router(lab, router, net, peers):
    admin, ids = net
    held(peers, ids, "rp")
    sessions = [s for s in admin.get('/sessions?filter=type="Dial"&limit=500').json()["data"]
                if s["identityId"] == ids["rr-client"]]
    paths = [admin.get(f"/sessions/{s['id']}/route-path").json()["data"]["routePath"] for s in sessions]
    assert [router.id] in paths
    # the router's connect events: the identities have an edge router connection
    wait_for(lambda: admin.get(f"/identities/{ids['rr-client']}").json()["data"]["hasEdgeRouterConnection"],
             timeout=15)


def test_logout_closes_live_connections_within_a_second(lab, router, net, peers):
    admin, ids = net
    c = held(peers, ids, "rev")
    t0 = time.monotonic()
    for s in admin.get("/api-sessions?limit=500").json()["data"]:
        if s["identityId"] == ids["rr-client"]:
            assert admin.delete(f"/api-sessions/{s['id']}").status_code == 200
    ev = c.next(timeout=10, kind="ended")
    took = time.monotonic() - t0
    assert ev["event"] == "ended" and took < 1.0, (ev, took)
    print(f"\nlogout: the live connection through the real router ended {took:.2f} s later")


def test_policy_removal_closes_live_connections_within_a_second(lab, router, net, peers):
    admin, ids = net
    _, path = enroll(lab, admin, "rr-revoked", ["rr-revoked"])
    policy = admin.create("service-policies", {"name": "rr-revoked-dial", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": ["#rr-revoked"], "serviceRoles": ["#rr"]})
    host(peers, ids["rr-host.file"], "rr-plain", "rev2")
    c = dialer(peers, path)
    c.send(op="hold", service="rr-plain", line="two")
    assert c.next(kind="echo")["event"] == "echo"
    t0 = time.monotonic()
    assert admin.delete(f"/service-policies/{policy}").status_code == 200
    ev = c.next(timeout=10, kind="ended")
    took = time.monotonic() - t0
    assert ev["event"] == "ended" and took < 1.0, (ev, took)
    print(f"\npolicy removal: the live connection through the real router ended {took:.2f} s later")


def test_a_tunneler_enabled_router_hosts_a_service_for_sdks(lab, router_bin, router, net, peers, tmp_path):
    """host mode: the router's own identity binds a service through a host.v1 config and
    dials a TCP server beside it; a C SDK dials that service through the same router (the other
    real router is disabled meanwhile: without router-to-router links a dial entering there
    could not reach the tunneler's terminator)."""
    import socket
    import threading
    admin, ids = net
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo_server() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(1024)
                conn.sendall(b"tcp-server:" + data)
    threading.Thread(target=echo_server, daemon=True).start()
    cfg = admin.create("configs", {"name": "rr-tunnel-host", "configTypeId": "NH5p4FpGR",
                                   "data": {"protocol": "tcp", "address": "127.0.0.1", "port": port}})
    svc = admin.create("services", {"name": "rr-tunneled", "encryptionRequired": True, "configs": [cfg],
                                    "roleAttributes": ["rr"]})
    tunneler = RealRouter(router_bin, Path(lab.tmp), "site-t", lab.ctl.ctrl_server.port, admin, tunneler=True)
    admin.create("service-policies", {"name": "rr-tunnel-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": [f"@{tunneler.id}"], "serviceRoles": [f"@{svc}"]})
    tunneler.enroll()
    tunneler.start()
    assert admin.patch(f"/edge-routers/{router.id}", json={"disabled": True}).status_code == 200
    try:
        wait_online(admin, tunneler.id, timeout=10)
        wait_for(lambda: [t for t in admin.get("/terminators?limit=500").json()["data"]
                          if t["serviceId"] == svc and t["binding"] == "tunnel"], timeout=30)
        c = dialer(peers, ids["rr-client.file"])
        # the terminator is listed as soon as the controller stored it; under load the tunneler may
        # still be setting up its hosting, so a first dial can be closed: a few attempts, as a client makes
        for _ in range(3):
            c.send(op="echo", service="rr-tunneled", line="through the tunneler")
            ev = c.next(timeout=30, kind="echo")
            if ev["event"] == "echo":
                break
            time.sleep(2)
        assert ev["event"] == "echo" and ev["reply"] == "tcp-server:through the tunneler\n", (ev, tunneler.tail())
    finally:
        tunneler.stop()
        server.close()
        assert admin.patch(f"/edge-routers/{router.id}", json={"disabled": False}).status_code == 200


def test_re_enroll_disconnects_and_the_old_certificate_is_refused(lab, router_bin, net):
    admin, ids = net
    r = RealRouter(router_bin, Path(lab.tmp), "site-re", lab.ctl.ctrl_server.port, admin)
    r.enroll()
    r.start()
    try:
        wait_online(admin, r.id, timeout=10)
        refused = lab.ctl.ctrl_server.refused
        assert admin.post(f"/edge-routers/{r.id}/re-enroll", json={}).status_code == 200
        wait_online(admin, r.id, online=False, timeout=2)
        # the router dials again with its old certificate (at once, then every few seconds): refused
        wait_for(lambda: lab.ctl.ctrl_server.refused > refused, timeout=15)
        assert not admin.get(f"/edge-routers/{r.id}").json()["data"]["isOnline"]
        r.stop()
        detail = admin.get(f"/edge-routers/{r.id}").json()["data"]
        assert detail["name"] == "site-re" and detail["roleAttributes"] == ["public"]
        r.enroll(detail["enrollmentJwt"])       # the new JWT: online again
        r.start()
        wait_online(admin, r.id, timeout=10)
    finally:
        r.stop()


def test_a_killed_or_silent_router_goes_offline_and_its_terminators_stay_as_upstream(lab, router_bin, router,
                                                                                    net, go):
    admin, ids = net
    r = RealRouter(router_bin, Path(lab.tmp), "site-k", lab.ctl.ctrl_server.port, admin, attrs=["site-k"])
    admin.create("edge-router-policies", {"name": "site-k-only", "semantic": "AnyOf",
                                          "identityRoles": ["#rr-host"], "edgeRouterRoles": ["#site-k"]})
    r.enroll()
    r.start()
    # the host binds one terminator (MaxTerminators 1) on the router it picks: site-k alone here
    assert admin.patch(f"/edge-routers/{router.id}", json={"disabled": True}).status_code == 200
    try:
        wait_online(admin, r.id, timeout=10)
        h = go("host", go_identity(ids["rr-host.file"]), "rr-plain", "k")
        assert h.next(kind="bound")["event"] == "bound"
        mine = lambda: [t for t in admin.get("/terminators?limit=500").json()["data"] if t["routerId"] == r.id]  # noqa: E731
        wait_for(mine, timeout=20)
        # SIGSTOP: the router no longer answers heartbeats; offline within the timeout (3 s here)
        r.stop(signal.SIGSTOP)
        took = wait_online(admin, r.id, online=False, timeout=lab.ctl.settings.ctrl_heartbeat_timeout + 3)
        print(f"\nsilent router offline after {took:.1f} s (heartbeat timeout "
              f"{lab.ctl.settings.ctrl_heartbeat_timeout:.0f} s)")
        os.killpg(r.proc.pid, signal.SIGCONT)
        wait_online(admin, r.id, timeout=15)    # it dials again by itself
        r.stop(signal.SIGKILL)
        took = wait_online(admin, r.id, online=False, timeout=2)
        print(f"killed router offline after {took:.2f} s")
        # upstream keeps a router's terminators while it is away; they are not offered to dials
        assert mine()
    finally:
        r.stop()
        assert admin.patch(f"/edge-routers/{router.id}", json={"disabled": False}).status_code == 200
        wait_online(admin, router.id, timeout=15)


def test_a_restarted_controller_gets_its_router_back(router_bin, template_db, tmp_path, peers):
    """``ziti-lite serve`` stopped and started again on the same ports: the router dials again by
    itself and comes online (its retry interval is 5 s)."""
    import shutil

    from ziti_lite import testing
    db = tmp_path / "restart.db"
    shutil.copy(template_db, db)
    port, ctrl_port = testing.free_port(), testing.free_port()

    def serve() -> testing.Controller:
        return testing.start(db, ADMIN_PASSWORD, edge=False, port=port, ctrl_port=ctrl_port)
    ctl = serve()
    try:
        admin = Admin(ctl)
        r = RealRouter(router_bin, tmp_path, "site-r", ctrl_port, admin)
        r.enroll()
        r.start()
        try:
            wait_online(admin, r.id, timeout=10)
            assert ctl.stop() == 0
            t0 = time.monotonic()
            ctl = serve()
            admin = Admin(ctl)
            took = wait_online(admin, r.id, timeout=20)
            print(f"\nrouter back online {time.monotonic() - t0:.1f} s after the controller was restarted"
                  f" (API answering after {time.monotonic() - t0 - took:.1f} s)")
        finally:
            r.stop()
    finally:
        ctl.stop()


class Admin:
    """The management API of a ``testing.Controller`` with the calls ``RealRouter`` makes."""

    def __init__(self, ctl):
        self.client = ctl.client

    def create(self, collection: str, body: dict) -> str:
        return self.client.create(collection, body)

    def get(self, path: str):
        return _Reply(self.client.get(path))


class _Reply:
    def __init__(self, reply):
        self.reply = reply

    def json(self) -> dict:
        return self.reply.body


def test_the_embedded_router_and_a_real_router_together(template_db, tmp_path_factory, router_bin, peers):
    """The embedded router and a real one in one network: a host bound through each (edge router
    policies give each host one router), a dialer that reaches both; every dial succeeds
    whichever router the dialer's SDK picks. (A dial entering one router reaches the terminators
    of that router: circuits across routers need router-to-router links.)"""
    with running(template_db, tmp_path_factory.mktemp("mixed"), edge=True, ctrl=True) as mixed:
        admin = mixed.admin()
        r = RealRouter(router_bin, Path(mixed.tmp), "site-m", mixed.ctl.ctrl_server.port, admin, attrs=["site-m"])
        r.enroll()
        r.start()
        try:
            wait_online(admin, r.id, timeout=10)
            embedded = mixed.ctl.edge_router.router_id
            for p in admin.get("/edge-router-policies").json()["data"]:       # this lab's own routing
                assert admin.delete(f"/edge-router-policies/{p['id']}").status_code == 200
            for name, identities, routers in (("mx-real", "#mx-real", f"@{r.id}"),
                                              ("mx-emb", "#mx-emb", f"@{embedded}"),
                                              ("mx-both", "#mx-client", "#all")):
                admin.create("edge-router-policies", {"name": name, "semantic": "AnyOf", "identityRoles": [identities],
                                                      "edgeRouterRoles": [routers]})
            svc = admin.create("services", {"name": "mx", "encryptionRequired": True, "roleAttributes": ["mx"]})
            for kind, role in (("Bind", "#mx-host"), ("Dial", "#mx-client")):
                admin.create("service-policies", {"name": f"mx-{kind}", "type": kind, "semantic": "AnyOf",
                                                  "identityRoles": [role], "serviceRoles": ["#mx"]})
            _, real_host = enroll(mixed, admin, "mx-host-real", ["mx-host", "mx-real"])
            _, emb_host = enroll(mixed, admin, "mx-host-emb", ["mx-host", "mx-emb"])
            _, cfile = enroll(mixed, admin, "mx-client", ["mx-client"])
            host(peers, real_host, "mx", "real")
            host(peers, emb_host, "mx", "embedded")

            def routers_with_terminators() -> bool:
                terms = admin.get("/terminators?limit=500").json()["data"]
                return {t["routerId"] for t in terms if t["serviceId"] == svc} == {embedded, r.id}
            wait_for(routers_with_terminators, timeout=30)
            c = dialer(peers, cfile)
            for i in range(4):
                c.send(op="echo", service="mx", line=f"mixed {i}")
                ev = c.next(kind="echo")
                assert ev["event"] == "echo" and ev["reply"].endswith(f":mixed {i}\n"), ev
                assert c.next(kind="closed")["event"] == "closed"
            c.send(op="bulk", service="mx", size=4 * MiB)
            ev = c.next(timeout=120, kind="bulk")
            assert ev["event"] == "bulk" and ev["got"] == ev["sent"], ev
        finally:
            r.stop()


def test_the_real_router_lab_example_runs(router_bin):
    """``examples/real_router_lab.py`` as a user runs it: ziti-lite, a real router, a hosted service."""
    import subprocess
    import sys
    example = Path(__file__).resolve().parents[2] / "examples" / "real_router_lab.py"
    r = subprocess.run([sys.executable, str(example), "--ziti", router_bin], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "lab-client got: echo from beside site-a: hello through a real router" in r.stdout
