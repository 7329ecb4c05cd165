"""The interfaces a router reports (``ctrl/interfaces.py``): routers of v1.6.3 and later send
them to a controller that names the 2.0 line, and wait for a success result; the report replaces
the router's stored list (upstream's stored form), a malformed one closes only that channel."""

from __future__ import annotations

import json

import pytest

from tests.ctrl.conftest import enroll_router, wait_for
from tests.ctrl.fake_router import f_int, f_str
from ziti_lite import semver
from ziti_lite.routing import version

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


def interface(name: str, hw: str, mtu: int, index: int, flags: int, *addresses: str) -> bytes:
    body = f_str(1, name) + f_str(2, hw) + f_int(3, mtu) + f_int(4, index) + f_int(5, flags)
    return f_str(1, body + b"".join(f_str(6, a) for a in addresses))


def stored(live, rid: str) -> list:
    return json.loads(live.ctl.store.value("SELECT interfaces FROM routers WHERE id = ?", (rid,)))


def test_a_report_is_answered_and_replaces_the_stored_interfaces(live):
    assert semver.satisfies(version.VERSION.lstrip("v"), ">=1.6.3")   # real routers report (ControllersHaveMinVersion)
    admin = live.admin()
    router = enroll_router(live, admin, "if-router")
    r = router.online()
    report = (interface("lo", "", 65536, 1, 1 | 4 | 32, "127.0.0.1/8", "::1/128")
              + interface("eth0", "02:42:ac:11:00:02", 1500, 2, 1 | 2 | 16 | 32, "172.17.0.2/16"))
    answer = r.request(1052, {}, report)
    assert answer.content == 2 and answer.headers[2] == b"\x01"
    assert stored(live, router.id) == [
        {"name": "lo", "hardwareAddress": "", "mtu": 65536, "index": 1, "flags": 37,
         "addresses": ["127.0.0.1/8", "::1/128"]},
        {"name": "eth0", "hardwareAddress": "02:42:ac:11:00:02", "mtu": 1500, "index": 2, "flags": 51,
         "addresses": ["172.17.0.2/16"]}]
    answer = r.request(1052, {}, interface("eth1", "", 9000, 3, 0))   # a later report replaces the list
    assert answer.headers[2] == b"\x01"
    assert [i["name"] for i in stored(live, router.id)] == ["eth1"]
    other = enroll_router(live, admin, "if-other")
    other.online().send(1052, {}, b"\x0a\xff")   # a truncated report: that router's channel closes
    assert wait_for(lambda: not admin.get(f"/edge-routers/{other.id}").json()["data"]["isOnline"])
    assert admin.get(f"/edge-routers/{router.id}").json()["data"]["isOnline"]
    assert stored(live, router.id)[0]["name"] == "eth1"
