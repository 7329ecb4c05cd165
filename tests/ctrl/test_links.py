"""Links between routers against pure-Python routers: peers told of each other, link reports
(good, unknown, malformed), VerifyRouter, multi-hop Route with upstream's forwarding entries, and
link faults and a router lost mid-route handled without touching other circuits."""

from __future__ import annotations

import struct

import pytest

from tests.ctrl.conftest import Collect, enroll_router, wait_for
from tests.ctrl.fake_router import f_int, f_str, read_pb, varint
from tests.ctrl.test_circuits import dial, route_of, route_result
from tests.ctrl.test_terminators import Identity, create_v2

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


def peers_of(m) -> list[dict]:
    out = []
    for raw in read_pb(m.body).get(1, []):
        f = read_pb(raw)
        listeners = [read_pb(x).get(1, [b""])[0].decode() for x in f.get(4, [])]
        out.append({"id": f[1][0].decode(), "state": f.get(3, [0])[0], "listeners": listeners})
    return out


def report_link(r, lid: str, dst: str) -> None:
    r.send(1035, {}, f_str(1, f_str(1, lid) + f_str(2, dst) + f_str(3, "tls") + f_str(5, "tls:127.0.0.1:1")))


@pytest.fixture(scope="module")
def net(live):
    admin = live.admin()
    svc = admin.create("services", {"name": "lk-svc", "encryptionRequired": False, "roleAttributes": ["lk"]})
    for kind, role in (("Bind", "#lk-host"), ("Dial", "#lk-client")):
        admin.create("service-policies", {"name": f"lk-{kind}", "type": kind, "semantic": "AnyOf",
                                          "identityRoles": [role], "serviceRoles": ["#lk"]})
    return admin, svc, Identity(live, admin, "lk-host", ["lk-host"]), Identity(live, admin, "lk-client", ["lk-client"])


def test_peers_links_and_a_circuit_across_a_link(live, net):
    admin, svc, host, client = net
    ra, rb = enroll_router(live, admin, "lk-a"), enroll_router(live, admin, "lk-b")
    a = ra.online(link_listener="tls:127.0.0.1:7001")
    b = rb.online(link_listener="tls:127.0.0.1:7002")
    told = peers_of(a.expect(1050, where=lambda m: any(p["id"] == rb.id for p in peers_of(m))))
    assert told == [{"id": rb.id, "state": 0, "listeners": ["tls:127.0.0.1:7002"]}]
    assert any(p["id"] == ra.id and p["listeners"] == ["tls:127.0.0.1:7001"]
               for p in peers_of(b.expect(1050)))
    # the listening side verifies the dialer
    ok = b.request(1036, {}, f_str(1, ra.id) + f_str(2, ra.fingerprint))
    assert ok.content == 2 and ok.headers[2] == b"\x01"
    bad = b.request(1036, {}, f_str(1, ra.id) + f_str(2, "00" * 20))
    assert bad.headers[2] == b"\x00" and b"could not verify" in bad.body
    # link reports: a good one, then ones naming nobody or itself
    report_link(a, "link-ab", rb.id)
    report_link(a, "link-ghost", "no-such-router")
    report_link(a, "link-self", ra.id)
    table = live.ctl.ctrl_server.links.table
    assert wait_for(lambda: "link-ab" in table)
    assert "link-ghost" not in table and "link-self" not in table
    assert (table["link-ab"].src, table["link-ab"].dst) == (ra.id, rb.id)
    # a host on B, a dial entering A: Route to both, with upstream's forwarding entries
    bind = host.session(svc, "Bind")
    assert create_v2(b, "lk-term", bind["token"], [host.fingerprint])["result"] == 0
    sub = Collect()
    live.ctl.events.subscribe(sub)   # from the test's thread: the loop only appends to the list
    seq = dial(a, client.session(svc, "Dial")["token"], [client.fingerprint], pk=None)
    ra_route, rb_route = a.expect(1005), b.expect(1005)
    fa, fb = route_of(ra_route), route_of(rb_route)
    assert fa["circuit"] == fb["circuit"] and 3 not in read_pb(ra_route.body)       # no egress on the ingress
    ingress = fa["forwards"][0][1][0]
    assert [(x[1][0], x[2][0], x.get(3, [0])[0]) for x in fa["forwards"]] == [
        (ingress, b"link-ab", 2), (b"link-ab", ingress, 0)]
    egress = fb["egress"][2][0]
    assert fb["egress"][3][0] == b"lk-term"
    assert [(x[1][0], x[2][0], x.get(3, [0])[0]) for x in fb["forwards"]] == [
        (egress, b"link-ab", 2), (b"link-ab", egress, 1)]
    route_result(a, ra_route, ok=True)
    route_result(b, rb_route, ok=True)
    answer = a.expect_reply(seq)
    assert answer.content == 20219 and answer.headers[12] == ingress
    circuits = live.ctl.ctrl_server.circuits.live
    assert circuits[fa["circuit"]].path == [ra.id, rb.id]
    # the link faults: gone, and its circuit unrouted on both routers at once
    a.send(1004, {}, f_int(1, 2) + f_str(2, "link-ab"))
    assert wait_for(lambda: "link-ab" not in table)
    for r in (a, b):
        unroute = read_pb(r.expect(1006).body)
        assert unroute[1][0].decode() == fa["circuit"] and unroute[2][0] == 1
    assert fa["circuit"] not in circuits
    # its fabric.circuits events name the path: both routers, ingress first, and the link
    live.ctl.events.unsubscribe(sub)
    mine = [e for e in sub.events if e.get("circuit_id") == fa["circuit"]]
    assert [e["event_type"] for e in mine] == ["created", "deleted"]
    for e in mine:
        assert e["path"]["nodes"] == [ra.id, rb.id] and e["path"]["links"] == ["link-ab"] and e["link_count"] == 1
    # without the link B's terminator is out of A's reach
    answer = a.expect_reply(dial(a, client.session(svc, "Dial")["token"], [client.fingerprint], pk=None))
    assert answer.content == 20002 and answer.body.decode() == f"service {svc} has no terminators"
    a.close()
    b.close()


def test_a_router_lost_mid_route_fails_the_circuit_cleanly(live, net):
    admin, svc, host, client = net
    ra, rb = enroll_router(live, admin, "lk-c"), enroll_router(live, admin, "lk-d")
    a = ra.online(link_listener="tls:127.0.0.1:7003")
    b = rb.online(link_listener="tls:127.0.0.1:7004")
    report_link(a, "link-cd", rb.id)
    assert wait_for(lambda: "link-cd" in live.ctl.ctrl_server.links.table)
    bind = host.session(svc, "Bind")
    assert create_v2(b, "lk-term-2", bind["token"], [host.fingerprint])["result"] == 0
    seq = dial(a, client.session(svc, "Dial")["token"], [client.fingerprint], pk=None)
    a.expect(1005)
    b.expect(1005)
    b.close()                                    # the egress router goes before it answers
    answer = a.expect_reply(seq, timeout=12)
    assert answer.content == 20002 and "retries creating circuit" in answer.body.decode()
    assert wait_for(lambda: "link-cd" not in live.ctl.ctrl_server.links.table)
    # peers hear that it went
    gone = peers_of(a.expect(1050, where=lambda m: any(p["id"] == rb.id and p["state"] == 1 for p in peers_of(m))))
    assert gone
    # a malformed link report closes only the reporting channel
    a.send(1035, {}, b"\x0a\xff\xff\xff\x0f")
    assert a.wait_closed(3)


def test_a_link_fault_reroutes_a_circuit_when_another_path_exists(live, net):
    """A-C directly (cost 1 + 10) beats A-B-C (22); when A-C faults the circuit is rerouted over B
    (upstream's reroute attempt number, no egress part: the routers keep the circuit's ends)."""
    admin, svc, host, client = net
    rs = [enroll_router(live, admin, f"lk-tri-{n}") for n in "abc"]
    a, b, c = (r.online(link_listener=f"tls:127.0.0.1:{7010 + i}") for i, r in enumerate(rs))
    report_link(a, "tri-ab", rs[1].id)
    report_link(a, "tri-ac", rs[2].id)
    report_link(b, "tri-bc", rs[2].id)
    table = live.ctl.ctrl_server.links.table
    assert wait_for(lambda: {"tri-ab", "tri-ac", "tri-bc"} <= set(table))
    bind = host.session(svc, "Bind")
    assert create_v2(c, "lk-tri-term", bind["token"], [host.fingerprint])["result"] == 0
    seq = dial(a, client.session(svc, "Dial")["token"], [client.fingerprint], pk=None)
    routes = {name: r.expect(1005) for name, r in (("a", a), ("c", c))}
    route_result(a, routes["a"], ok=True)
    route_result(c, routes["c"], ok=True)
    assert a.expect_reply(seq).content == 20219
    cid = route_of(routes["a"])["circuit"]
    circuit = live.ctl.ctrl_server.circuits.live[cid]
    assert circuit.path == [rs[0].id, rs[2].id] and circuit.links == ["tri-ac"]
    c.send(1004, {}, f_int(1, 2) + f_str(2, "tri-ac"))
    for r in (a, b, c):
        rr = read_pb(r.expect(1005).body)
        assert rr[1][0].decode() == cid and rr[2][0] == 99969996 and 3 not in rr
    assert circuit.path == [rs[0].id, rs[1].id, rs[2].id] and circuit.links == ["tri-ab", "tri-bc"]
    for r in (a, b, c):
        r.close()


def test_link_latencies_from_the_routers_metrics_enter_the_path_cost(live, net):
    """Upstream's link cost: static 1 + both ends' mean link latency and queue time in ms."""
    def histogram(name: str, mean_ns: float) -> bytes:
        entry = f_str(1, name) + f_str(2, f_int(1, 10) + varint(3 << 3 | 1) + struct.pack("<d", mean_ns))
        return f_str(8, entry)
    admin, *_ = net
    ra, rb = enroll_router(live, admin, "lk-lat-a"), enroll_router(live, admin, "lk-lat-b")
    a = ra.online(link_listener="tls:127.0.0.1:7021")
    b = rb.online(link_listener="tls:127.0.0.1:7022")
    report_link(a, "lat-ab", rb.id)
    table = live.ctl.ctrl_server.links.table
    assert wait_for(lambda: "lat-ab" in table) and table["lat-ab"].cost == 1
    a.send(1007, {}, f_str(2, ra.id) + histogram("link.lat-ab.latency", 4_000_000)
           + histogram("link.lat-ab.queue_time", 1_000_000) + histogram("link.other.latency", 9e9))
    b.send(1007, {}, f_str(2, rb.id) + histogram("link.lat-ab.latency", 3_000_000))
    assert wait_for(lambda: (table["lat-ab"].src_latency, table["lat-ab"].dst_latency) == (5_000_000, 3_000_000))
    assert table["lat-ab"].cost == 1 + 5 + 3
    cost, path, _ = live.ctl.ctrl_server.links.path(ra.id, rb.id)
    assert path == [ra.id, rb.id] and cost == 9 + 10          # the link, then router B's minimum cost
    a.close()
    b.close()
