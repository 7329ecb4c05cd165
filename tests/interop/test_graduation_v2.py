"""Graduation with OpenZiti 2.0: a network built on ziti-lite moves to the real v2.0.3 controller
with the v2.0 CLI's ``ziti ops export`` / ``ziti ops import`` and back with ``ziti-lite import``,
nothing of it lost.

v2.0's export also writes each tunneler-enabled edge router's identity and the default admin
(v1.3.3's left them out); the way back reads them as 2.0's importer does (``exchange.py``). The
network is built with the v2.0 CLI on ziti-lite, exported from it, imported into
``ziti edge quickstart`` v2.0.3 (where ``ziti-lite apply --controller`` of the same file then
plans nothing), exported from there, imported into a fresh ziti-lite with
``ziti-lite import --db`` and exported again: the entities built, the router identity's and the
default admin's role attributes included, are the same at every step.

Needs the ``ziti`` v2.0.3 binary (the ``ziti2`` fixture: ``$ZITI_CLI_V2_0_3`` or
``~/.cache/ziti-lite/ziti-cli-v2.0.3/ziti``); skipped, saying why, without it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.conftest import start_quickstart
from tests.interop.test_ziti_cli_v2 import V2, Cli
from ziti_lite import testing

pytestmark = pytest.mark.interop

INTERCEPT = '{"protocols":["tcp"],"addresses":["grad.ziti"],"portRanges":[{"low":80,"high":80}]}'
HOST = '{"protocol":"tcp","address":"127.0.0.1","port":8080}'
ADMIN = "Default Admin"   # the default admin's name in both quickstarts and in ziti-lite

# the network, as a user builds it with the v2.0 CLI
BUILD: list[tuple[str, ...]] = [
    ("edge", "create", "config", "grad-intercept", "intercept.v1", INTERCEPT),
    ("edge", "create", "config", "grad-host", "host.v1", HOST),
    ("edge", "create", "service", "grad-web", "--configs", "grad-intercept,grad-host", "-a", "web"),
    ("edge", "create", "identity", "grad-alice", "-a", "staff"),
    ("edge", "create", "identity", "grad-bob", "-a", "staff,ops"),
    ("edge", "create", "edge-router", "grad-er", "-a", "branch", "--tunneler-enabled"),
    ("edge", "update", "identity", "grad-er", "-a", "hosts"),        # the router's own identity
    ("edge", "update", "identity", ADMIN, "-a", "grad-admins"),      # the default admin
    ("edge", "create", "service-policy", "grad-dial", "Dial", "--identity-roles", "#staff",
     "--service-roles", "#web"),
    ("edge", "create", "service-policy", "grad-bind", "Bind", "--identity-roles", "#hosts",
     "--service-roles", "@grad-web"),
    ("edge", "create", "edge-router-policy", "grad-erp", "--identity-roles", "#staff",
     "--edge-router-roles", "#branch"),
    ("edge", "create", "service-edge-router-policy", "grad-serp", "--service-roles", "#web",
     "--edge-router-roles", "@grad-er"),
]

# what an entity is, by kind: the fields compared (ids, times, tokens and routers' live state differ)
# (not isDefaultAdmin: v2.0.3's quickstart names its default admin "admin", and its importer creates
# the other network's, "Default Admin", as an admin identity without credentials; back in ziti-lite
# that name is the default admin again, its attributes set)
FIELDS = ("name", "roleAttributes", "typeId", "isAdmin", "authPolicy", "configs", "configType",
          "data", "encryptionRequired", "type", "semantic", "identityRoles", "serviceRoles", "edgeRouterRoles",
          "postureCheckRoles", "isTunnelerEnabled", "noTraversal", "disabled")


def ours(doc: dict) -> dict:
    """The built entities of an export (named grad-*, the default admin, the router's identity),
    by kind and name, their comparable fields, sets sorted."""
    out: dict = {}
    for kind, rows in doc.items():
        for row in rows:
            name = row.get("name", "")
            if not (name.startswith("grad-") or name == ADMIN):
                continue
            view = {}
            for k in FIELDS:
                v = row.get(k)
                view[k] = sorted(v) if isinstance(v, list) else v
            out.setdefault(kind, {})[name] = view
    return out


def cli_export(cli: Cli, path: Path) -> dict:
    cli.run("ops", "export", "-o", str(path))
    return json.loads(path.read_text())


def test_a_network_built_on_ziti_lite_moves_to_v2_and_back(ziti2, ziti_lite_template, tmp_path):
    password = ziti_lite_template.admin_password
    lite = testing.start(ziti_lite_template.copy(tmp_path / "built.db"), password)
    try:
        cli = Cli(ziti2, tmp_path / "home-lite")
        cli.run("edge", "login", lite.url, "-u", lite.admin_user, "-p", password, "-y")
        for args in BUILD:
            cli.run(*args)
        first = cli_export(cli, tmp_path / "from-lite.json")
    finally:
        lite.stop()
    built = ours(first)
    # the v2.0 export lists the router's identity and the default admin, with their attributes
    assert built["identities"]["grad-er"]["typeId"] == "Router"
    assert built["identities"]["grad-er"]["roleAttributes"] == ["hosts"]
    assert built["identities"][ADMIN]["roleAttributes"] == ["grad-admins"]
    assert set(built["servicePolicies"]) == {"grad-dial", "grad-bind"} and "grad-er" in built["edgeRouters"]

    real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
    try:
        upstream = Cli(ziti2, tmp_path / "home-real")
        upstream.run("edge", "login", real.url, "-u", real.admin_user, "-p", real.admin_password, "-y")
        upstream.run("ops", "import", str(tmp_path / "from-lite.json"))
        second = cli_export(upstream, tmp_path / "from-v2.json")
        # ziti-lite apply reads the same file against the real controller: nothing left to do
        r = subprocess.run([sys.executable, "-m", "ziti_lite", "apply", "--dry-run", "--controller", real.url,
                            "--username", real.admin_user, "--password", real.admin_password,
                            str(tmp_path / "from-lite.json")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "Plan: nothing to do" in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        real.stop()
    assert ours(second) == built, "the real v2.0.3 controller holds what ziti-lite held"

    # a fresh ziti-lite (serving: its embedded router is there, so the one of the file, of the
    # same default name, is found rather than created), the import beside it
    fresh_db = ziti_lite_template.copy(tmp_path / "fresh.db")
    back = testing.start(fresh_db, password)
    try:
        r = subprocess.run([sys.executable, "-m", "ziti_lite", "import", "--db", str(fresh_db),
                            str(tmp_path / "from-v2.json")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "updated identities: grad-er" in r.stderr and f"updated identities: {ADMIN}" in r.stderr
        again = Cli(ziti2, tmp_path / "home-back")
        again.run("edge", "login", back.url, "-u", back.admin_user, "-p", password, "-y")
        third = cli_export(again, tmp_path / "back.json")
    finally:
        back.stop()
    assert ours(third) == built, "the fresh ziti-lite holds what the real controller held"
    # and nothing came twice: one policy of each name, no plain identity for the router
    assert sorted(r["name"] for r in third["identities"] if r["name"] == "grad-er") == ["grad-er"]
    assert len([p for p in third["servicePolicies"] if p["name"].startswith("grad-")]) == 2
