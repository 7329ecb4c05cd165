"""Bytes across the overlay with real SDKs: the OpenZiti C SDK 0.29 (``openziti`` wheel) binds a
service through ziti-lite's embedded edge router and another C SDK dials it.

Skipped where the wheel is not installed (it exists for Linux x86_64 only)."""

from __future__ import annotations

import pytest

from tests.edge.conftest import dialer, enroll, host, wait_for

pytestmark = pytest.mark.slow   # C SDK peers through a live edge router

pytest.importorskip("openziti", reason="the openziti wheel (C SDK) is not installed here")


@pytest.fixture(scope="module")
def net(edge):
    admin = edge.admin()
    ids = {}
    for name, encrypted in (("echo-enc", True), ("echo-plain", False), ("echo-costs", True), ("unbound", True),
                            ("revocable", True), ("healing", True)):
        ids[name] = admin.create("services", {"name": name, "encryptionRequired": encrypted,
                                              "roleAttributes": ["echo"]})
    admin.create("service-policies", {"name": "hosts-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": ["#host"], "serviceRoles": ["#echo"]})
    ids["dial-policy"] = admin.create("service-policies", {
        "name": "clients-dial", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#client"],
        "serviceRoles": ["#echo"]})
    ids["host1"], ids["host1.json"] = enroll(edge, admin, "host1", ["host"])
    ids["client1"], ids["client1.json"] = enroll(edge, admin, "client1", ["client"])
    return admin, ids


def terminators(admin, service_id: str) -> list[dict]:
    return admin.get(f'/terminators?filter=service="{service_id}"').json()["data"]


def bound(admin, service_id: str, n: int = 1) -> list[dict]:
    return wait_for(lambda: (lambda t: t if len(t) >= n else None)(terminators(admin, service_id)))


@pytest.mark.parametrize("service", ["echo-enc", "echo-plain"])
def test_bind_dial_echo_and_fin(edge, net, peers, service):
    admin, ids = net
    h = host(peers, ids["host1.json"], service, "h1")
    terms = bound(admin, ids[service])
    assert terms[0]["binding"] == "edge" and terms[0]["router"]["id"] == edge.ctl.edge_router.router_id
    assert terms[0]["hostId"] == ids["host1"] if "hostId" in terms[0] else True
    c = dialer(peers, ids["client1.json"])
    c.send(op="echo", service=service, line="ping-123")
    ev = c.next(kind="echo")
    assert ev["event"] == "echo" and ev["reply"] == "h1:ping-123\n", ev
    # FIN from the dialer reaches the host as EOF; the host's close reaches the dialer
    assert h.next(kind="eof") == {"event": "eof", "bytes": len("ping-123\n")}
    assert c.next(kind="closed") == {"event": "closed", "rest": ""}
    client = admin.get(f"/identities/{ids['client1']}").json()["data"]
    assert client["hasEdgeRouterConnection"] is True and client["edgeRouterConnectionStatus"] == "online"


def test_three_concurrent_dialers_and_ten_mebibytes_each_way(edge, net, peers):
    admin, ids = net
    host(peers, ids["host1.json"], "echo-enc", "h1")
    bound(admin, ids["echo-enc"])
    clients = [dialer(peers, ids["client1.json"]) for _ in range(3)]
    for i, c in enumerate(clients):
        c.send(op="echo", service="echo-enc", line=f"hello-{i}")
    for i, c in enumerate(clients):
        assert c.next(kind="echo")["reply"] == f"h1:hello-{i}\n"
        assert c.next(kind="closed")["event"] == "closed"   # not left queued for the loop below
    # 10 MiB from one dialer, echoed back by the host, compared by checksum
    clients[0].send(op="bulk", service="echo-enc", size=10 * 1024 * 1024)
    answered = 0
    while clients[0].events.empty():   # the REST API keeps answering while the router carries it
        assert admin.get("/version").status_code == 200
        answered += 1
    assert answered >= 1
    ev = clients[0].next(timeout=120, kind="bulk")
    assert ev["event"] == "bulk" and ev["n"] == 10 * 1024 * 1024 and ev["got"] == ev["sent"], ev


def test_the_lower_cost_host_wins(edge, net, peers):
    admin, ids = net
    _, cheap = enroll(edge, admin, "host-cheap", ["host"], defaultHostingCost=10)
    _, dear = enroll(edge, admin, "host-dear", ["host"], defaultHostingCost=500)
    host(peers, dear, "echo-costs", "dear")
    host(peers, cheap, "echo-costs", "cheap")
    terms = bound(admin, ids["echo-costs"], 2)
    assert sorted(t["cost"] for t in terms) == [10, 500]
    c = dialer(peers, ids["client1.json"])
    for i in range(4):
        c.send(op="echo", service="echo-costs", line=f"n{i}")
        assert c.next(kind="echo")["reply"] == f"cheap:n{i}\n"


def test_an_unbound_service_fails_the_dial_at_once(edge, net, peers):
    admin, ids = net
    assert terminators(admin, ids["unbound"]) == []
    c = dialer(peers, ids["client1.json"])
    c.send(op="echo", service="unbound", line="anyone?")
    ev = c.next(kind="echo")
    assert ev["event"] == "error", ev
    assert ev["after"] < 9, ev   # refused by the router, not the SDK's own 10 s connect timeout


def test_removing_the_dial_policy_closes_the_live_connection(edge, net, peers):
    admin, ids = net
    _, revoker = enroll(edge, admin, "client-revoker", ["revoker"])
    policy = admin.create("service-policies", {"name": "revoker-dial", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": ["#revoker"], "serviceRoles": ["@" + ids["revocable"]]})
    host(peers, ids["host1.json"], "revocable", "h1")
    bound(admin, ids["revocable"])
    c = dialer(peers, revoker)
    c.send(op="hold", service="revocable", line="still-there")
    assert c.next(kind="echo")["reply"] == "h1:still-there\n"
    assert admin.delete(f"/service-policies/{policy}").status_code == 200
    assert c.next(timeout=10, kind="ended")["event"] == "ended"


def test_logout_closes_the_channel(edge, net, peers):
    admin, ids = net
    iid, path = enroll(edge, admin, "client-logout", ["client"])
    host(peers, ids["host1.json"], "revocable", "h1")
    bound(admin, ids["revocable"])
    c = dialer(peers, path)
    c.send(op="hold", service="revocable", line="bye")
    assert c.next(kind="echo")["reply"] == "h1:bye\n"
    router = edge.ctl.edge_router
    assert router.has_connection(iid)
    for s in admin.get(f'/api-sessions?filter=identity="{iid}"').json()["data"]:
        assert admin.delete(f"/api-sessions/{s['id']}").status_code == 200
    assert c.next(timeout=10, kind="ended")["event"] == "ended"


def test_a_deleted_session_heals_through_invalid_session(edge, net, peers):
    admin, ids = net
    host(peers, ids["host1.json"], "healing", "h1")
    bound(admin, ids["healing"])
    c = dialer(peers, ids["client1.json"])
    c.send(op="echo", service="healing", line="one")
    assert c.next(kind="echo")["reply"] == "h1:one\n"
    mine = [s for s in admin.get(f'/sessions?filter=service="{ids["healing"]}" and type="Dial"').json()["data"]
            if s["identityId"] == ids["client1"]]
    assert mine
    for s in mine:
        assert admin.delete(f"/sessions/{s['id']}").status_code == 200
    c.send(op="echo", service="healing", line="two")
    assert c.next(kind="echo")["reply"] == "h1:two\n"
    again = [s for s in admin.get(f'/sessions?filter=service="{ids["healing"]}" and type="Dial"').json()["data"]
             if s["identityId"] == ids["client1"]]
    assert again and not {s["id"] for s in again} & {s["id"] for s in mine}
