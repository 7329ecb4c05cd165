"""The control channel's listener against a pure-Python router: who is let in, what the hello
answers, when a router is online in the API and when it stops being, and bad routers refused
one by one while the API and the other routers carry on."""

from __future__ import annotations

import ssl
import struct
import time

import pytest

from tests.ctrl.conftest import enroll_router, new_key, wait_for
from tests.ctrl.fake_router import MAGIC, FakeRouter, frame, read_pb
from tests.enroll.conftest import issue, make_ca
from ziti_lite import UPSTREAM_VERSION

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


def online(admin, rid: str) -> bool:
    return admin.get(f"/edge-routers/{rid}").json()["data"]["isOnline"]


@pytest.fixture(scope="module")
def admin(live):
    return live.admin()


def test_a_router_comes_online_and_goes_offline_when_it_closes(live, admin):
    router = enroll_router(live, admin, "ctrl-basic")
    r = router.connect()
    result = r.hello(router.id)
    assert result.content == 2 and result.headers[2] == b"\x01"
    assert result.headers[8] == live.ctl.instance_id.encode()
    assert result.headers[4].decode().split("|")[0] == "v" + UPSTREAM_VERSION   # mandatory for the router
    assert result.headers[12] == bytes([0b1010])                         # CreateTerminatorV2, CreateCircuitV2
    server_hello = r.expect(20000)
    assert strings_of(server_hello.body, 1) == ["v" + UPSTREAM_VERSION]
    assert not online(admin, router.id)                                  # not before its ClientHello
    r.client_hello("127.0.0.1", 4567, server_hello)
    assert wait_for(lambda: online(admin, router.id))
    detail = admin.get(f"/edge-routers/{router.id}").json()["data"]
    assert detail["hostname"] == "127.0.0.1" and detail["syncStatus"] == "SYNC_DONE"
    assert detail["supportedProtocols"] == {"tls": "tls://127.0.0.1:4567"}
    assert detail["versionInfo"] == {"version": "v1.3.3", "revision": "fake", "buildDate": "2026-01-01",
                                     "os": "linux", "arch": "amd64"}
    listed = admin.get('/edge-routers?filter=online=true').json()["data"]   # upstream's symbol
    assert router.id in {x["id"] for x in listed}
    health = live.client().get("/health-checks").json()["data"]
    ctrl = next(c for c in health["checks"] if c["id"] == "ctrl.listener")
    assert ctrl["healthy"] and "ctrl-basic" in ctrl["details"]
    assert "ziti_lite_ctrl_routers 1" in live.client().get("/metrics").text
    r.close()
    assert wait_for(lambda: not online(admin, router.id), 2)


def strings_of(body: bytes, num: int) -> list[str]:
    return [v.decode() for v in read_pb(body).get(num, [])]


def test_heartbeats_are_answered_and_a_silent_router_goes_offline(live, admin):
    router = enroll_router(live, admin, "ctrl-beat")
    r = router.online()
    r.answer_heartbeats = False
    assert wait_for(lambda: online(admin, router.id))
    stamp = struct.pack("<Q", 123456789)
    r.send(5, {5: stamp})
    answer = r.expect(5, where=lambda m: 6 in m.headers)
    assert answer.headers[6] == stamp
    ours = r.expect(5, timeout=12, where=lambda m: 5 in m.headers)      # the controller's own heartbeat
    assert len(ours.headers[5]) == 8
    # never answering ours: closed within the heartbeat timeout (2 s in these tests)
    assert r.wait_closed(8)
    assert wait_for(lambda: not online(admin, router.id), 2)


def test_a_second_connection_replaces_the_first(live, admin):
    router = enroll_router(live, admin, "ctrl-twice")
    first = router.online()
    assert wait_for(lambda: online(admin, router.id))
    second = router.online()
    assert first.wait_closed(3)
    time.sleep(0.3)
    assert online(admin, router.id) and not second.closed.is_set()
    second.close()


@pytest.mark.parametrize("case", ["unknown id", "other router's certificate", "disabled", "not enrolled"])
def test_routers_that_may_not_connect_are_refused_with_a_reason(live, admin, case):
    router = enroll_router(live, admin, f"ctrl-refused-{case.replace(' ', '-').replace(chr(39), '')}")
    other = enroll_router(live, admin, f"ctrl-other-{case.replace(' ', '-').replace(chr(39), '')}")
    rid = router.id
    if case == "unknown id":
        rid = "no-such-router"
    elif case == "other router's certificate":
        rid = other.id
    elif case == "disabled":
        assert admin.patch(f"/edge-routers/{rid}", json={"disabled": True}).status_code == 200
    elif case == "not enrolled":
        rid = admin.create("edge-routers", {"name": f"ctrl-unenrolled-{time.time_ns()}"})
    r = router.connect()
    result = r.hello(rid)
    assert result.headers.get(2) == b"\x00" and result.body
    assert r.wait_closed(3)
    assert not online(admin, router.id) and (rid == "no-such-router" or not online(admin, rid))
    assert admin.get("/version").status_code == 200


def test_a_certificate_of_another_ca_fails_the_handshake(live, admin):
    router = enroll_router(live, admin, "ctrl-stranger")
    keys = [new_key(), new_key()]
    stranger = make_ca("Stranger CA", keys[0])
    refused = live.ctl.ctrl_server.refused
    for cert, key in ((issue(stranger, router.id, keys[1]), keys[1]), (None, None)):   # no certificate at all
        with pytest.raises((ssl.SSLError, ConnectionError, OSError, AssertionError)):
            FakeRouter.connect(router.port, cert, key, router.ca_pem).hello(router.id)
    assert not online(admin, router.id)
    assert live.ctl.ctrl_server.refused == refused + 2


@pytest.mark.parametrize("case", ["bad magic", "oversized", "message before hello", "bad client hello",
                                  "bad protobuf", "no hello"])
def test_malformed_input_closes_only_that_channel(live, admin, case, monkeypatch):
    good = enroll_router(live, admin, f"ctrl-good-{case.replace(' ', '-')}")
    keep = good.online()
    assert wait_for(lambda: online(admin, good.id))
    bad = enroll_router(live, admin, f"ctrl-bad-{case.replace(' ', '-')}")
    r = bad.connect()
    if case == "bad magic":
        r.raw(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 20)
    elif case == "oversized":
        r.raw(MAGIC + struct.pack("<iiII", 0, -1, 0, 50_000_000))
    elif case == "message before hello":
        r.send(20001, {}, b"")
    elif case == "bad client hello":
        assert r.hello(bad.id).headers[2] == b"\x01"
        r.send(20001, {}, b"\xff\xff\xff", reply_to=r.expect(20000))
    elif case == "bad protobuf":
        assert r.hello(bad.id).headers[2] == b"\x01"
        r.client_hello("127.0.0.1", 4000)
        r.send(20216, {}, b"\x0a\xff\xff\xff\x0f")        # a length past the end
    elif case == "no hello":
        monkeypatch.setattr("ziti_lite.ctrl.server.HELLO_SECONDS", 0.5)
        r.raw(frame(5, 1, {}))                            # a heartbeat is no hello
    assert r.wait_closed(5), case
    assert not online(admin, bad.id)
    # the other router and the API carry on
    assert online(admin, good.id) and not keep.closed.is_set()
    keep.send(5, {5: struct.pack("<Q", 1)})
    assert keep.expect(5, where=lambda m: 6 in m.headers)
    keep.close()


def test_disable_delete_and_re_enroll_disconnect_a_router(live, admin):
    for action in ("disable", "delete", "re-enroll"):
        router = enroll_router(live, admin, f"ctrl-gone-{action}")
        r = router.online()
        assert wait_for(lambda: online(admin, router.id))
        if action == "disable":
            assert admin.patch(f"/edge-routers/{router.id}", json={"disabled": True}).status_code == 200
        elif action == "delete":
            assert admin.delete(f"/edge-routers/{router.id}").status_code == 200
        else:
            assert admin.post(f"/edge-routers/{router.id}/re-enroll", json={}).status_code == 200
        assert r.wait_closed(3), action
        if action == "re-enroll":   # the old certificate is refused until it enrolls again
            again = router.connect()
            assert again.hello(router.id).headers[2] == b"\x00"
            detail = admin.get(f"/edge-routers/{router.id}").json()["data"]
            assert detail["name"] == router.name and detail["roleAttributes"] == ["public"]
            assert detail["isOnline"] is False and detail["enrollmentJwt"]


def test_router_enrollment_jwts_name_the_control_channel(live, admin):
    import jwt as pyjwt
    rid = admin.create("edge-routers", {"name": "ctrl-jwt"})
    claims = pyjwt.decode(admin.get(f"/edge-routers/{rid}").json()["data"]["enrollmentJwt"],
                          options={"verify_signature": False})
    assert claims["em"] == "erott" and claims["ctrls"] == [f"tls:127.0.0.1:{live.ctl.ctrl_server.port}"]
    iid = admin.create("identities", {"name": "ctrl-jwt-id", "type": "Device", "isAdmin": False,
                                      "enrollment": {"ott": True}})
    jwt = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["jwt"]
    assert pyjwt.decode(jwt, options={"verify_signature": False})["ctrls"] is None
