"""Circuits through a router, against a pure-Python router that answers Route as a real one
would: the dial's checks with upstream's codes and texts, Route's shape, retry on another
terminator, the answer's peer data, faults and confirmations answered with Unroute."""

from __future__ import annotations

import time

import pytest

from tests.ctrl.conftest import Collect, enroll_router
from tests.ctrl.fake_router import f_int, f_str, read_pb, string_slice, u32_map, u32_map_bytes
from tests.ctrl.test_terminators import build_net, create_v2

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


@pytest.fixture(scope="module")
def net(live):
    return build_net(live, "cc")


def dial(r, token: str, fps: list[str], pk: bytes | None = b"dialer-pk", instance: str = "") -> int:
    headers = {11: token.encode(), 14: b"api-session-token", 12: string_slice(fps), 13: instance.encode()}
    peer = {1008: b"caller"}
    if pk:
        peer[1003] = pk
    headers[10] = u32_map_bytes(peer)
    return r.send(20218, headers)


def route_of(m) -> dict:
    f = read_pb(m.body)
    egress = read_pb(f[3][0]) if 3 in f else {}
    forwards = [read_pb(x) for x in f.get(4, [])]
    return {"circuit": f[1][0].decode(), "attempt": f.get(2, [0])[0], "egress": egress, "forwards": forwards,
            "timeout": f.get(6, [0])[0]}


def route_result(r, route_msg, ok: bool, code: int = 0, text: str = "", peer: dict | None = None) -> None:
    route = route_of(route_msg)
    headers = {1101: route["attempt"].to_bytes(4, "little")}
    if ok:
        headers[1102] = b"\x01"
    else:
        headers[1103], headers[1104] = text.encode(), bytes([code])
    headers.update(peer or {})
    r.send(1022, headers, route["circuit"].encode(), reply_to=route_msg)


def test_a_dial_is_routed_and_answered_with_the_hosts_key(live, net):
    admin, ids, host, client, router = net
    r = router.online()
    bind = host.session(ids["enc"], "Bind")
    assert create_v2(r, "cc-t1", bind["token"], [host.fingerprint], pk=b"host-pk")["result"] == 0
    dialing = client.session(ids["enc"], "Dial")
    seq = dial(r, dialing["token"], [client.fingerprint])
    route_msg = r.expect(1005)
    route = route_of(route_msg)
    egress = route["egress"]
    assert egress[1][0] == b"edge" and egress[3][0] == b"cc-t1"
    ingress_id, egress_id = route["forwards"][0][1][0], route["forwards"][0][2][0]
    assert route["forwards"][0].get(3, [0])[0] == 1 and route["forwards"][1].get(3, [0])[0] == 0   # End, Start
    assert route["forwards"][1][1][0] == egress_id and egress[2][0] == egress_id
    assert 0 < route["timeout"] <= 10 * 10**9
    route_result(r, route_msg, ok=True)
    answer = r.expect_reply(seq)
    assert answer.content == 20219
    assert answer.headers[11].decode() == route["circuit"] and answer.headers[12] == ingress_id
    assert u32_map(answer.headers[10])[1003] == b"host-pk"
    sessions = admin.get(f"/sessions/{dialing['id']}/route-path").json()["data"]
    assert sessions["routePath"] == [router.id]
    # the end of the circuit: a fault from one end, Unroute back
    r.send(1004, {}, f_int(1, 0) + f_str(2, route["circuit"]))
    unroute = read_pb(r.expect(1006).body)
    assert unroute[1][0].decode() == route["circuit"] and unroute.get(2, [0])[0] == 0
    assert admin.get(f"/sessions/{dialing['id']}/route-path").json()["data"]["routePath"] == []
    # a circuit the controller does not know, confirmed by the router: unrouted now
    r.send(1034, {}, f_str(1, "ghost-circuit"))
    unroute = read_pb(r.expect(1006).body)
    assert unroute[1][0] == b"ghost-circuit" and unroute[2][0] == 1
    r.close()


def test_a_failed_route_tries_the_next_terminator_and_an_invalid_one_is_deleted(live, net):
    admin, ids, host, client, router = net
    r = router.online()
    bind = host.session(ids["svc"], "Bind")
    for tid, cost in (("cc-a", 1), ("cc-b", 2)):
        assert create_v2(r, tid, bind["token"], [host.fingerprint], cost=cost)["result"] == 0
    seq = dial(r, client.session(ids["svc"], "Dial")["token"], [client.fingerprint])
    first = r.expect(1005)
    assert route_of(first)["egress"][3][0] == b"cc-a"          # the lower cost first
    route_result(r, first, ok=False, code=1, text="no such terminator")
    second = r.expect(1005)
    assert route_of(second)["egress"][3][0] == b"cc-b" and route_of(second)["attempt"] == 1
    route_result(r, second, ok=True, peer={1111: b"from-the-host"})
    answer = r.expect_reply(seq)
    assert answer.content == 20219 and u32_map(answer.headers[10]).get(1111) == b"from-the-host"
    assert admin.get("/terminators/cc-a").status_code == 404      # invalid terminators go, as upstream
    assert admin.get("/terminators/cc-b").status_code == 200
    r.close()


def test_dial_refusals_carry_upstreams_codes_and_texts(live, net):
    admin, ids, host, client, router = net
    r = router.online()
    bind = host.session(ids["enc"], "Bind")
    assert create_v2(r, "cc-enc-t", bind["token"], [host.fingerprint])["result"] == 0
    dialing = client.session(ids["enc"], "Dial")
    cases = [
        (("no-such-session", [client.fingerprint]), {}, 3, "Invalid Session"),
        ((dialing["token"], ["0000"]), {}, 2, "invalid api session"),
        ((bind["token"], [host.fingerprint]), {}, 4, "incorrect session type"),
        ((dialing["token"], [client.fingerprint]), {"pk": None}, 11,
         "encryption required on service, initiator did not send public header"),
    ]
    for args, kw, code, text in cases:
        answer = r.expect_reply(dial(r, *args, **kw))
        assert answer.content == 20002 and answer.body.decode() == text, (args, answer.body)
        assert int.from_bytes(answer.headers[1014], "little") == code
    plain = client.session(ids["svc"], "Dial")
    mine = [t["id"] for t in admin.get("/terminators?limit=500").json()["data"] if t["serviceId"] == ids["svc"]]
    assert admin.delete(f"/terminators/{mine[0]}").status_code == 400     # the router's own: system entities
    assert r.request(1038, {}, b"".join(f_str(1, t) for t in mine)).headers[2] == b"\x01"
    answer = r.expect_reply(dial(r, plain["token"], [client.fingerprint]))
    assert answer.content == 20002 and answer.body.decode() == f"service {ids['svc']} has no terminators"
    # a router the policies do not allow for the identity
    other = enroll_router(live, admin, "cc-other", roleAttributes=["cc-private"])
    o = other.online()
    answer = o.expect_reply(dial(o, dialing["token"], [client.fingerprint]))
    assert answer.body.decode() == "invalid edge router for session"
    assert int.from_bytes(answer.headers[1014], "little") == 5
    o.close()
    r.close()


def test_real_routers_and_their_circuits_are_events(live, net):
    """fabric.routers and fabric.circuits events, through the events module's one call each."""
    admin, ids, host, client, router = net
    bus = live.ctl.events
    sub = Collect()
    bus.subscribe(sub)   # from the test's thread: the loop only appends to the list
    try:
        r = router.online()
        bind = host.session(ids["svc"], "Bind")
        assert create_v2(r, "cc-ev", bind["token"], [host.fingerprint])["result"] == 0
        seq = dial(r, client.session(ids["svc"], "Dial")["token"], [client.fingerprint])
        route_msg = r.expect(1005)
        route_result(r, route_msg, ok=True)
        assert r.expect_reply(seq).content == 20219
        cid = route_of(route_msg)["circuit"]
        r.send(1004, {}, f_int(1, 0) + f_str(2, cid))
        r.expect(1006)
        r.close()
        deadline = time.monotonic() + 3
        kinds = []
        while time.monotonic() < deadline:
            kinds = [(e["namespace"], e.get("event_type")) for e in sub.events
                     if e.get("router_id") == router.id or e.get("circuit_id") == cid]
            if ("fabric.routers", "router-offline") in kinds:
                break
        assert ("fabric.routers", "router-online") in kinds and ("fabric.routers", "router-offline") in kinds
        assert ("fabric.circuits", "created") in kinds and ("fabric.circuits", "deleted") in kinds
    finally:
        bus.unsubscribe(sub)
