"""The hello of every router line on one port: v2.0 routers' grouped channel (group secret,
connection id, capabilities in 1002, a later ``ctrl.high`` underlay joining its group, a
reconnect keeping its secret) beside v1 routers, and bad hellos refused on their connection only."""

from __future__ import annotations

import pytest

from tests.ctrl.conftest import enroll_router, wait_for
from tests.ctrl.fake_router import f_str, read_pb

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


@pytest.fixture(scope="module")
def admin(live):
    return live.admin()


def online(admin, rid: str) -> bool:
    return admin.get(f"/edge-routers/{rid}").json()["data"]["isOnline"]


def caps(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def test_a_v2_router_gets_a_group_secret_and_the_capabilities_it_requires(live, admin):
    router = enroll_router(live, admin, "v2-hello")
    r = router.connect()
    result = r.hello_v2(router.id, link_listener="tls:127.0.0.1:7001")
    assert result.headers[2] == b"\x01"
    secret, conn_id = result.headers[10], result.headers[0]
    assert len(secret) == 16 and conn_id                               # a new group: generated
    assert caps(result.headers[1002]) & (1 << 6)                       # JWT legacy sessions: required
    assert caps(result.headers[1002]) & (1 << 5)                       # grouped channel: a ctrl.high may join
    assert caps(result.headers[12]) == 0b1010                          # what v1 routers read, unchanged
    assert result.headers[4].decode().startswith("v2.0.3|") and result.headers[8] == live.ctl.instance_id.encode()
    assert result.headers[9] == b"\x01" and result.headers[7] == b"ctrl.default"
    r.client_hello("127.0.0.1", 4601)
    assert wait_for(lambda: online(admin, router.id))
    # the listener came from header 1000 (v2), not 10 (the group secret there)
    ch = live.ctl.ctrl_server.routers[router.id]
    assert [x["address"] for x in ch.listeners] == ["tls:127.0.0.1:7001"]
    assert router.id in live.ctl.ctrl_server.links.capable              # v2 routers manage links

    # the high-priority underlay joins the group: what it carries is the router's
    high = router.connect()
    joined = high.hello_v2(router.id, first=False, underlay="ctrl.high", connection_id=conn_id.decode(),
                           secret=secret)
    assert joined.headers[2] == b"\x01" and joined.headers[10] == secret and joined.headers[0] == conn_id
    assert live.ctl.ctrl_server.routers[router.id] is ch and len(ch.underlays) == 1
    seq = high.send(1038, {}, f_str(1, "no-such-terminator"))           # RemoveTerminators: a Result
    answer = r.expect(2, where=lambda m: m.reply_for == seq)             # (we answer on the first underlay)
    assert answer.headers[2] == b"\x01"
    # losing the later underlay keeps the router online; losing the first ends the group
    high.close()
    assert wait_for(lambda: not ch.underlays)
    assert online(admin, router.id)
    again = router.connect()
    again.hello_v2(router.id, first=False, underlay="ctrl.high", connection_id=conn_id.decode(), secret=secret)
    r.close()
    assert again.wait_closed(5)
    assert wait_for(lambda: not online(admin, router.id))


def test_a_later_underlay_must_name_its_group_and_secret(live, admin):
    router = enroll_router(live, admin, "v2-wrong-secret")
    r = router.connect()
    result = r.hello_v2(router.id)
    r.client_hello("127.0.0.1", 4602)
    conn_id, secret = result.headers[0].decode(), result.headers[10]
    for name, kwargs in (("wrong secret", {"connection_id": conn_id, "secret": b"x" * 16}),
                         ("unknown group", {"connection_id": "nope", "secret": secret}),
                         ("no group", {})):
        bad = router.connect()
        refused = bad.hello_v2(router.id, first=False, underlay="ctrl.high", **kwargs)
        assert refused.headers[2] == b"\x00", name
        assert bad.wait_closed(5), name
    other = enroll_router(live, admin, "v2-wrong-secret-other")   # one router, one group: not another's
    bad = other.connect()
    refused = bad.hello_v2(other.id, first=False, underlay="ctrl.high", connection_id=conn_id, secret=secret)
    assert refused.headers[2] == b"\x00"
    assert online(admin, router.id) and not r.closed.is_set()


def test_a_reconnecting_v2_router_keeps_its_secret(live, admin):
    router = enroll_router(live, admin, "v2-reconnect")
    r = router.connect()
    first = r.hello_v2(router.id)
    r.client_hello("127.0.0.1", 4603)
    assert wait_for(lambda: online(admin, router.id))
    conn_id, secret = first.headers[0].decode(), first.headers[10]
    r.close()
    back = router.connect()
    result = back.hello_v2(router.id, connection_id=f"{conn_id}-2", secret=secret)   # first of a new group
    assert result.headers[2] == b"\x01"
    assert result.headers[10] == secret and result.headers[0].decode() == f"{conn_id}-2"
    back.client_hello("127.0.0.1", 4603)
    assert wait_for(lambda: online(admin, router.id))


def test_v1_and_v2_routers_are_online_together(live, admin):
    old, new = enroll_router(live, admin, "mixed-v1"), enroll_router(live, admin, "mixed-v2")
    v1 = old.online(edge_port=4604, link_listener="tls:127.0.0.1:7004")
    v2 = new.connect()
    v2.hello_v2(new.id, link_listener="tls:127.0.0.1:7005")
    v2.client_hello("127.0.0.1", 4605)
    assert wait_for(lambda: online(admin, old.id) and online(admin, new.id))
    # each is told of the other as a link peer, listeners read from the header its line uses
    for r, peer, address in ((v1, new.id, "tls:127.0.0.1:7005"), (v2, old.id, "tls:127.0.0.1:7004")):
        m = r.expect(1050, where=lambda m, peer=peer: peer.encode() in m.body)
        change = next(c for c in map(read_pb, read_pb(m.body)[1]) if c[1][0].decode() == peer)
        listener = read_pb(change[4][0])
        assert listener[1][0].decode() == address


def test_a_v1_hello_answer_carries_no_group(live, admin):
    router = enroll_router(live, admin, "v1-no-group")
    r = router.connect()
    result = r.hello(router.id)
    assert 10 not in result.headers and 1002 not in result.headers and 9 not in result.headers
