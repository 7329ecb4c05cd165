"""``ziti-lite apply`` / ``test`` / ``why`` against the real OpenZiti controller (v1.3.3, run by
``ziti edge quickstart --no-router``): the same file gives the same network there as on a
ziti-lite database, a second apply plans nothing, a failing test or an invalid entity changes
nothing, and ``why`` says at least what ``ziti edge policy-advisor identities -q`` says.

The ``ziti`` binary is the one ``test_ziti_cli.py`` finds (skipped without it). Marked
``interop``: ``make interop`` runs it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.interop.test_ziti_cli import ANSI
from tests.netcode.conftest import EXAMPLE, export_of, fresh_db, invoke, write  # noqa: F401  (a fixture)
from ziti_lite import exchange
from ziti_lite.netcode import plan
from ziti_lite.netcode.remote import RemoteApi

pytestmark = pytest.mark.interop


def on(oz, *args):
    """``ziti-lite ARGS[0] --controller`` the real controller (tests/interop/conftest.py's quickstart)."""
    return invoke(args[0], "--controller", oz.url, "--username", oz.admin_user, "--password", oz.admin_password,
                  *args[1:])


def file_view(doc: dict, file: dict) -> dict:
    """A network's export seen through a file: its kinds, and of each entity the fields it gives."""
    out = {}
    for kind, rows in file.items():
        fields = {k for r in rows for k in r} - {"enrollment"}
        out[kind] = sorted(({k: plan.canonical(kind, k, e.get(k)) for k in fields} for e in doc[kind]),
                           key=lambda e: e["name"])
    return out


def test_the_same_file_gives_the_same_network_on_openziti_and_ziti_lite(openziti, fresh_db, tmp_path,  # noqa: F811
                                                                        ziti_bin):
    url, home = openziti.url, Path(openziti.home)
    r = on(openziti, "apply", "--dry-run", "--prune", EXAMPLE)
    assert r.exit_code == 2 and "Plan: 8 to create" in r.output and "tests: 5 of 5 pass" in r.output, r.output
    r = on(openziti, "apply", "--prune", EXAMPLE)
    assert r.exit_code == 0 and "applied 8 change(s)" in r.output, r.output
    r = on(openziti, "apply", "--prune", EXAMPLE)
    assert r.exit_code == 0 and "Plan: nothing to do" in r.output, r.output
    assert on(openziti, "test", EXAMPLE).exit_code == 0

    assert invoke("apply", "--db", fresh_db, "--prune", EXAMPLE).exit_code == 0
    api = RemoteApi(url, openziti.admin_user, openziti.admin_password)
    try:
        live = exchange.export(api)
    finally:
        api.close()
    file = {k: v for k, v in yaml.safe_load(EXAMPLE.read_text()).items() if k != "tests"}
    assert file_view(live, file) == file_view(export_of(fresh_db), file)

    # an edit: planned field by field, applied, then nothing left to do
    edited = yaml.safe_load(EXAMPLE.read_text())
    edited["servicePolicies"][1]["identityRoles"] = ["#echo-clients", "#guests"]
    edited["tests"][3] = {"identity": "visitor", "service": "echo", "can": "dial"}
    f = write(tmp_path / "edited.json", edited)
    r = on(openziti, "apply", f)
    assert r.exit_code == 0 and '    identityRoles: ["#echo-clients"] -> ["#echo-clients", "#guests"]' in r.output
    assert "Plan: nothing to do" in on(openziti, "apply", f).output

    # why vs upstream's policy advisor
    cli_home = home / "cli"
    cli_home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_")}, "HOME": str(cli_home)}
    login = ["-u", openziti.admin_user, "-p", openziti.admin_password, "-y"]
    subprocess.run([ziti_bin, "edge", "login", url.removeprefix("https://"), *login],
                   env=env, capture_output=True, check=True, timeout=60)
    advisor = ANSI.sub("", subprocess.run([ziti_bin, "edge", "policy-advisor", "identities", "-q", "visitor", "echo"],
                                          env=env, capture_output=True, text=True, timeout=60).stdout)
    assert "Dial: Y Bind: N" in advisor and "Identity has no edge routers assigned" in advisor, advisor
    r = on(openziti, "why", "visitor", "echo")
    assert r.exit_code == 0, r.output
    assert "policy advice: dial allowed, bind not allowed, 0 identity router(s), 0 service router(s)" in r.output
    assert "edge router policies of the identity: none -> 0 router(s)" in r.output
    assert r.output.splitlines()[-1] == ("verdict: visitor cannot dial echo:"
                                         " the identity and the service share no edge router")


def test_refusals_change_nothing_on_openziti(openziti, tmp_path):
    url = openziti.url
    api = RemoteApi(url, openziti.admin_user, openziti.admin_password)
    try:
        before = exchange.export(api)
        doc = yaml.safe_load(EXAMPLE.read_text())
        doc["tests"].append({"identity": "echo-host", "service": "echo", "cannot": "bind"})
        r = on(openziti, "apply", write(tmp_path / "a.json", doc))
        assert r.exit_code == 1 and "FAILED echo-host cannot bind echo" in r.output, r.output
        doc = yaml.safe_load(EXAMPLE.read_text())
        doc["configs"][1]["data"] = {"protocol": "tcp"}         # no address: host.v1 refuses it
        doc["services"].append({"name": "other", "encryptionRequired": True})
        r = on(openziti, "apply", write(tmp_path / "b.json", doc))
        assert r.exit_code == 1 and "configs 'echo-host-config'" in r.output and "field '(root)'" in r.output, r.output
        assert exchange.export(api) == before
    finally:
        api.close()
