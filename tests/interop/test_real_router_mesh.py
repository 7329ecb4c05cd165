"""Router-to-router links between real routers (``ziti router`` of each line present) under ziti-lite: routers
learn of their peers, build links, and circuits cross them. A host reaches only router B (with a
link listener), a dialer only router A (private: it dials B), and their bytes cross the A-B link;
when B goes, so do the link and the circuit, and new dials fail cleanly; three routers in a line
carry a dial through the middle one. Marked ``interop``; skipped without the ``ziti`` binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.edge.conftest import dialer, enroll, host, wait_for
from tests.enroll.conftest import running
from tests.interop.real_router import RealRouter, wait_online

pytestmark = pytest.mark.interop
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def mesh(template_db, tmp_path_factory, router_bin):
    with running(template_db, tmp_path_factory.mktemp("mesh"), edge=False, ctrl=True) as handle:
        admin = handle.admin()
        for p in admin.get("/edge-router-policies").json()["data"]:     # each identity its own routers
            assert admin.delete(f"/edge-router-policies/{p['id']}").status_code == 200
        yield handle


def links(ctl) -> list:
    return list(ctl.ctrl_server.links.table.values())


def start_all(admin, routers) -> None:
    for r in routers:
        r.enroll()
        r.start()
        wait_online(admin, r.id, timeout=10)


def across(mesh, admin, peers, name: str, host_router, client_router) -> tuple[str, str]:
    """A service ``name`` whose host may use only ``host_router`` and whose dialer only
    ``client_router`` (edge router policies by their role attributes); the host is bound and its
    terminator stands on its router. Returns (service id, the dialer's identity file)."""
    svc = admin.create("services", {"name": name, "encryptionRequired": True, "roleAttributes": [name]})
    for kind, role in (("Bind", f"#{name}-host"), ("Dial", f"#{name}-client")):
        admin.create("service-policies", {"name": f"{name}-{kind}", "type": kind, "semantic": "AnyOf",
                                          "identityRoles": [role], "serviceRoles": [f"#{name}"]})
    for side, router in (("host", host_router), ("client", client_router)):
        admin.create("edge-router-policies", {"name": f"{name}-{side}", "semantic": "AnyOf",
                                              "identityRoles": [f"#{name}-{side}"],
                                              "edgeRouterRoles": [f"@{router.id}"]})
    _, hfile = enroll(mesh, admin, f"{name}-host", [f"{name}-host"])
    _, cfile = enroll(mesh, admin, f"{name}-client", [f"{name}-client"])
    host(peers, hfile, name, "far")
    wait_for(lambda: [t for t in admin.get("/terminators?limit=500").json()["data"]
                      if t["serviceId"] == svc and t["routerId"] == host_router.id], timeout=20)
    return svc, cfile


def test_a_link_between_two_routers_carries_a_circuit(mesh, router_bin, peers):
    admin = mesh.admin()
    tmp = Path(mesh.tmp)
    a = RealRouter(router_bin, tmp, "mesh-a", mesh.ctl.ctrl_server.port, admin)
    b = RealRouter(router_bin, tmp, "mesh-b", mesh.ctl.ctrl_server.port, admin, private=False)
    try:
        start_all(admin, (a, b))
        wait_for(lambda: any({x.src, x.dst} == {a.id, b.id} for x in links(mesh.ctl)), timeout=30)
        _, cfile = across(mesh, admin, peers, "mesh-svc", host_router=b, client_router=a)
        c = dialer(peers, cfile)
        c.send(op="echo", service="mesh-svc", line="across the link")
        ev = c.next(kind="echo")
        assert ev["event"] == "echo" and ev["reply"] == "far:across the link\n", (ev, a.tail(), b.tail())
        assert c.next(kind="closed")["event"] == "closed"
        c.send(op="hold", service="mesh-svc", line="held")
        assert c.next(kind="echo")["event"] == "echo"
        sessions = [s for s in admin.get('/sessions?filter=type="Dial"&limit=500').json()["data"]]
        paths = [admin.get(f"/sessions/{s['id']}/route-path").json()["data"]["routePath"] for s in sessions]
        assert [a.id, b.id] in paths
        c2 = dialer(peers, cfile)
        c2.send(op="bulk", service="mesh-svc", size=10 * MiB)
        ev = c2.next(timeout=180, kind="bulk")
        assert ev["event"] == "bulk" and ev["n"] == 10 * MiB and ev["got"] == ev["sent"], ev
        print(f"\n10 MiB each way across the A-B link in {ev['after']:.2f} s")
        # the link's listening side (B, the host's router) goes: the link with it, the held connection
        # ends (A's router closes an unrouted connection after its close wait, 30 s, as upstream's),
        # new dials through A fail cleanly
        b.stop()
        wait_for(lambda: not links(mesh.ctl), timeout=5)
        assert not mesh.ctl.ctrl_server.circuits.live
        assert c.next(timeout=45, kind="ended")["event"] == "ended"
        c.send(op="echo", service="mesh-svc", line="no way through")
        assert c.next(timeout=30, kind="echo")["event"] == "error"
    finally:
        for r in (a, b):
            r.stop()


def test_three_routers_in_a_line_carry_a_dial_through_the_middle(mesh, router_bin, peers):
    """A and C are private (no link listener), B listens: links A-B and C-B only; a dial from A
    reaches a host on C through B."""
    admin = mesh.admin()
    tmp = Path(mesh.tmp)
    port = mesh.ctl.ctrl_server.port
    line = [RealRouter(router_bin, tmp, "line-a", port, admin), RealRouter(router_bin, tmp, "line-b", port, admin,
                                                                        private=False),
            RealRouter(router_bin, tmp, "line-c", port, admin)]
    a, b, c = line
    try:
        start_all(admin, line)

        def linked() -> bool:
            pairs = {frozenset((x.src, x.dst)) for x in links(mesh.ctl)}
            return {frozenset((a.id, b.id)), frozenset((b.id, c.id))} <= pairs
        wait_for(linked, timeout=30)
        assert frozenset((a.id, c.id)) not in {frozenset((x.src, x.dst)) for x in links(mesh.ctl)}
        _, cfile = across(mesh, admin, peers, "line-svc", host_router=c, client_router=a)
        d = dialer(peers, cfile)
        d.send(op="hold", service="line-svc", line="via b")
        ev = d.next(kind="echo")
        assert ev["event"] == "echo" and ev["reply"] == "far:via b\n", ev
        paths = [admin.get(f"/sessions/{s['id']}/route-path").json()["data"]["routePath"]
                 for s in admin.get('/sessions?filter=type="Dial"&limit=500').json()["data"]]
        assert [a.id, b.id, c.id] in paths
    finally:
        for r in line:
            r.stop()


@pytest.mark.parametrize("dialing,hosting", [("v2.0.3", "v1.6.20"), ("v1.6.20", "v2.0.3")])
def test_a_v2_and_a_v1_6_router_linked_carry_a_circuit(template_db, tmp_path_factory, ziti_bin_lines, peers,
                                                        dialing, hosting):
    """Upstream says 2.x routers work with older ones: a v2.0.3 and a v1.6.20 router under one
    ziti-lite link up, and a dial entering either reaches a host on the other."""
    missing = [v for v in (dialing, hosting) if v not in ziti_bin_lines]
    if missing:
        pytest.skip(f"no ziti binary of {', '.join(missing)}")
    with running(template_db, tmp_path_factory.mktemp("mixed-lines"), edge=False, ctrl=True) as lab:
        admin = lab.admin()
        for p in admin.get("/edge-router-policies").json()["data"]:
            assert admin.delete(f"/edge-router-policies/{p['id']}").status_code == 200
        tmp, port = Path(lab.tmp), lab.ctl.ctrl_server.port
        a = RealRouter(ziti_bin_lines[dialing], tmp, "lines-a", port, admin)
        b = RealRouter(ziti_bin_lines[hosting], tmp, "lines-b", port, admin, private=False)
        try:
            start_all(admin, (a, b))
            wait_for(lambda: any({x.src, x.dst} == {a.id, b.id} for x in links(lab.ctl)), timeout=30)
            _, cfile = across(lab, admin, peers, "lines-svc", host_router=b, client_router=a)
            c = dialer(peers, cfile)
            c.send(op="echo", service="lines-svc", line=f"from {dialing} to {hosting}")
            ev = c.next(kind="echo")
            assert ev["event"] == "echo" and ev["reply"] == f"far:from {dialing} to {hosting}\n", \
                (ev, a.tail(), b.tail())
            c.send(op="bulk", service="lines-svc", size=4 * MiB)
            ev = c.next(timeout=120, kind="bulk")
            assert ev["event"] == "bulk" and ev["got"] == ev["sent"], ev
        finally:
            a.stop()
            b.stop()
