"""A real ``ziti router`` v2.0.3 reports its network interfaces to ziti-lite (``ctrl/reported.py``):
they appear on the edge router's details, the fabric API's router and, the router being
tunneler-enabled, its identity, in upstream's ``interface`` shape. The router reports only to a
controller whose hello names v1.6.3 or later (its interface reporter's gate): while ziti-lite
names an older release (``ziti_lite.UPSTREAM_VERSION``) the test skips, saying so. The router's
check interval is set to a second (upstream's default: a minute). Marked ``interop``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.enroll.conftest import running
from tests.interop.real_router import RealRouter, wait_online
from ziti_lite import UPSTREAM_VERSION, semver

pytestmark = pytest.mark.interop


def test_a_v2_router_reports_its_interfaces(template_db, tmp_path_factory, ziti2):
    if not semver.satisfies(UPSTREAM_VERSION, ">=1.6.3"):
        pytest.skip(f"ziti-lite names v{UPSTREAM_VERSION} to routers: v2 routers report interfaces to v1.6.3+")
    with running(template_db, tmp_path_factory.mktemp("reports"), edge=False, ctrl=True,
                 ctrl_heartbeat_timeout=3.0) as lab:
        admin = lab.admin()
        router = RealRouter(ziti2, Path(lab.tmp), "reports-a", lab.ctl.ctrl_server.port, admin, tunneler=True)
        router.enroll()
        router.config.write_text(router.config.read_text() + "\ninterfaceDiscovery:\n  checkInterval: 1s\n")
        router.start()
        try:
            wait_online(admin, router.id, timeout=15)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not admin.get(f"/edge-routers/{router.id}").json()["data"][
                    "interfaces"]:
                time.sleep(0.5)
            reported = admin.get(f"/edge-routers/{router.id}").json()["data"]["interfaces"]
            assert reported, "no interfaces reported within 20 s"
            lo = next(x for x in reported if x["isLoopback"])
            assert lo["isUp"] and "127.0.0.1/8" in lo["addresses"] and lo["mtu"] > 0 and lo["index"] > 0
            assert set(lo) == {"name", "hardwareAddress", "mtu", "index", "isUp", "isBroadcast", "isLoopback",
                               "isMulticast", "isRunning", "addresses"}
            assert admin.get(f"/identities/{router.id}").json()["data"]["interfaces"] == reported
            assert admin.get(f"/routers/{router.id}").json()["data"]["interfaces"] == reported
        finally:
            router.stop()
