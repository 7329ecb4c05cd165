"""What a router reports of itself (``ctrl/reported.py``): a pure-Python v2 router's network
interfaces (UpdateRouterInterfaces) and advertised control-channel listeners (hello header 1003)
reach the API's router details, and a tunneler-enabled edge router's identity."""

from __future__ import annotations

import pytest

from tests.ctrl.conftest import enroll_router, wait_for
from tests.ctrl.fake_router import f_int, f_str
from ziti_lite.ctrl import reported

ETH0 = {"name": "eth0", "hardwareAddress": "02:42:ac:11:00:02", "mtu": 1500, "index": 2,
        "flags": 0b110011, "addresses": ["10.0.0.2/24", "fe80::1/64"]}
LO = {"name": "lo", "hardwareAddress": "", "mtu": 65536, "index": 1, "flags": 0b100101, "addresses": []}


def interface(x: dict) -> bytes:
    return (f_str(1, x["name"]) + f_str(2, x["hardwareAddress"]) + f_int(3, x["mtu"]) + f_int(4, x["index"])
            + f_int(5, x["flags"]) + b"".join(f_str(6, a) for a in x["addresses"]))


def listeners(m: dict[str, list[str]]) -> bytes:
    return b"".join(f_str(1, f_str(1, addr) + b"".join(f_str(2, g) for g in groups)) for addr, groups in m.items())


# ------------------------------------------------------------------ fast: the conversions
def test_interfaces_read_the_flags_as_upstreams_api_does():
    eth0, lo = reported.interfaces([ETH0, LO])
    assert eth0 == {"name": "eth0", "hardwareAddress": "02:42:ac:11:00:02", "mtu": 1500, "index": 2, "isUp": True,
                    "isBroadcast": True, "isLoopback": False, "isMulticast": True, "isRunning": True,
                    "addresses": ["10.0.0.2/24", "fe80::1/64"]}
    assert lo["isLoopback"] and lo["isUp"] and not lo["isBroadcast"] and lo["addresses"] is None


def test_interfaces_come_back_in_the_order_of_upstreams_store():
    many = [{**LO, "name": f"if{i}"} for i in range(12)]
    assert [x["name"] for x in reported.interfaces(many)][:4] == ["if0", "if1", "if10", "if11"]


def test_ctrl_listeners_of_a_hello():
    assert reported.ctrl_listeners(None) is None and reported.ctrl_listeners(b"") is None
    assert reported.ctrl_listeners(listeners({"tls:a:1": ["ctrl.default"], "tls:b:2": []})) == {
        "tls:a:1": ["ctrl.default"], "tls:b:2": []}


# ------------------------------------------------------------------ live: a v2 router reports them
@pytest.mark.slow   # a live server with its control channel over TLS
def test_a_v2_router_reports_its_interfaces_and_ctrl_listeners(live):
    admin = live.admin()
    router = enroll_router(live, admin, "rep-1", isTunnelerEnabled=True,
                           ctrlChanListeners={"tls:set.by.admin:1": ["g"]})
    assert admin.get(f"/edge-routers/{router.id}").json()["data"]["interfaces"] is None
    r = router.connect()
    advertised = {"tls:10.0.0.2:6262": ["ctrl.default", "ctrl.high"]}
    r.hello_v2(router.id, extra={1003: listeners(advertised)})
    r.client_hello("127.0.0.1", 4671)
    assert wait_for(lambda: admin.get(f"/routers/{router.id}").json()["data"].get("ctrlChanListeners") == advertised)

    answer = r.request(1052, {}, f_str(1, interface(ETH0)) + f_str(1, interface(LO)))
    assert answer.content == 2 and answer.headers[2] == b"\x01" and answer.body == b"success"
    for path in (f"/edge-routers/{router.id}", f"/routers/{router.id}", f"/identities/{router.id}"):
        got = admin.get(path).json()["data"]["interfaces"]
        assert [x["name"] for x in got] == ["eth0", "lo"] and got[0]["isMulticast"] is True, path
    # the same report again changes nothing; a router without the header clears the listeners
    before = admin.get(f"/edge-routers/{router.id}").json()["data"]["updatedAt"]
    r.request(1052, {}, f_str(1, interface(ETH0)) + f_str(1, interface(LO)))
    assert admin.get(f"/edge-routers/{router.id}").json()["data"]["updatedAt"] == before
    r.close()
    assert r.wait_closed(5)
    again = router.connect()
    again.hello_v2(router.id)
    assert wait_for(lambda: "ctrlChanListeners" not in admin.get(f"/edge-routers/{router.id}").json()["data"])
    again.close()
