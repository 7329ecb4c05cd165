"""The real ``ziti`` CLI (v1.3.3) reading ziti-lite's fabric API (``/fabric/v1``) as an operator
does after ``ziti edge login``: ``ziti fabric list routers|links|terminators|circuits|services``
and ``ziti edge validate service-hosting`` (which reads ``/fabric/v1/terminators``), over a mesh
of two real routers (``ziti router`` of each line present, A private, B with a link listener) with
a live circuit across their link. Marked ``interop``; skipped without the ``ziti`` binary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.edge.conftest import dialer, enroll, host, wait_for
from tests.enroll.conftest import running
from tests.interop.real_router import RealRouter, wait_online
from tests.interop.test_ziti_cli import Cli

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def fabric_net(template_db, tmp_path_factory, router_bin):
    with running(template_db, tmp_path_factory.mktemp("fabric"), edge=False, ctrl=True) as handle:
        admin = handle.admin()
        for p in admin.get("/edge-router-policies").json()["data"]:     # each identity its own routers
            assert admin.delete(f"/edge-router-policies/{p['id']}").status_code == 200
        yield handle


def test_ziti_fabric_lists_and_validate_service_hosting(fabric_net, ziti_bin, router_bin, peers):
    admin = fabric_net.admin()
    tmp = Path(fabric_net.tmp)
    port = fabric_net.ctl.ctrl_server.port
    a = RealRouter(router_bin, tmp, "fab-a", port, admin, attrs=["fab-a"])
    b = RealRouter(router_bin, tmp, "fab-b", port, admin, attrs=["fab-b"], private=False)
    try:
        for r in (a, b):
            r.enroll()
            r.start()
            wait_online(admin, r.id, timeout=10)
        link = wait_for(lambda: next((x for x in fabric_net.ctl.ctrl_server.links.table.values()
                                      if {x.src, x.dst} == {a.id, b.id}), None), timeout=30)
        svc = admin.create("services", {"name": "fab-svc", "encryptionRequired": True, "roleAttributes": ["fab"]})
        for kind, role in (("Bind", "#fab-host"), ("Dial", "#fab-client")):
            admin.create("service-policies", {"name": f"fab-{kind}", "type": kind, "semantic": "AnyOf",
                                              "identityRoles": [role], "serviceRoles": ["#fab"]})
        for name, ident, router in (("fab-host-b", "#fab-host", "#fab-b"), ("fab-client-a", "#fab-client", "#fab-a")):
            admin.create("edge-router-policies", {"name": name, "semantic": "AnyOf", "identityRoles": [ident],
                                                  "edgeRouterRoles": [router]})
        host_id, hfile = enroll(fabric_net, admin, "fab-host", ["fab-host"])
        _, cfile = enroll(fabric_net, admin, "fab-client", ["fab-client"])
        host(peers, hfile, "fab-svc", "far")
        wait_for(lambda: [t for t in admin.get("/terminators?limit=500").json()["data"]
                          if t["serviceId"] == svc and t["routerId"] == b.id], timeout=20)
        c = dialer(peers, cfile)
        c.send(op="hold", service="fab-svc", line="held")
        assert c.next(kind="echo")["event"] == "echo"
        (circuit,) = fabric_net.ctl.ctrl_server.circuits.live.values()

        cli = Cli(ziti_bin, str(tmp / "cli-home"))
        assert "Token:" in cli.run("edge", "login", fabric_net.url, "-u", ADMIN_USER, "-p", ADMIN_PASSWORD, "-y")

        out = cli.run("fabric", "list", "routers", 'name in ["fab-a", "fab-b"]')
        assert "fab-a" in out and "fab-b" in out and "results: 1-2 of 2" in out, out
        rows = {name: next(line for line in out.splitlines() if f" {name} " in line) for name in ("fab-a", "fab-b")}
        for row in rows.values():                                            # online, "version on os/arch"
            assert " true " in row and " on linux/" in row, out
        assert "1: tls:127.0.0.1:" in rows["fab-b"] and "1: " not in rows["fab-a"], out   # B's link listener only

        out = cli.run("fabric", "list", "links")
        assert link.id in out and "fab-a" in out and "fab-b" in out and "Connected" in out, out
        assert "results: 1-1 of 1" in out, out

        out = cli.run("fabric", "list", "services", 'name="fab-svc"')
        assert svc in out and "smartrouting" in out and "results: 1-1 of 1" in out, out

        out = cli.run("fabric", "list", "terminators", f'service="{svc}"')
        assert "fab-svc" in out and "fab-b" in out and host_id in out and "results: 1-1 of 1" in out, out

        out = cli.run("fabric", "list", "circuits")
        assert circuit.id in out and "fab-svc" in out, out
        assert f"r/fab-a -> l/{link.id} -> r/fab-b" in out.replace("\n", ""), out

        data = json.loads(cli.run("fabric", "list", "links", f'id="{link.id}"', "-j"))
        assert data["data"][0]["sourceRouter"]["id"] in (a.id, b.id) and data["meta"]["pagination"]["totalCount"] == 1

        out = cli.run("edge", "validate", "service-hosting")
        assert f"service fab-svc ({svc}) hosted by fab-host ({host_id}) with 1 terminators" in out, out
    finally:
        for r in (a, b):
            r.stop()
