"""``apply`` / ``test`` / ``why`` against a running ziti-lite over HTTPS (``--controller``), and
``apply --db`` beside a running server: the same file gives the same network either way."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.netcode.conftest import EXAMPLE, export_of, invoke, write
from ziti_lite import exchange
from ziti_lite.netcode.remote import RemoteApi

pytestmark = pytest.mark.slow


def remote(ctl, *args, ca=True):
    login = ["--controller", ctl.url, "--username", ctl.admin_user, "--password", ctl.admin_password]
    return invoke(*args[:1], *login, *(["--ca", ctl.ca_file] if ca else []), *args[1:])


def live_export(ctl) -> dict:
    api = RemoteApi(ctl.url, ctl.admin_user, ctl.admin_password, ctl.ca_file)
    try:
        return exchange.export(api)
    finally:
        api.close()


def named(doc: dict, kinds) -> dict:
    """By name; a service's configs as the set they are (stored in id order, as upstream)."""
    out = {k: sorted(doc[k], key=lambda e: e["name"]) for k in kinds}
    for e in out.get("services", []):
        if e.get("configs"):
            e["configs"] = sorted(e["configs"])
    return out


def test_apply_test_and_why_on_a_controller(ziti_lite_clean, fresh_db):
    ctl = ziti_lite_clean
    r = remote(ctl, "apply", "--dry-run", EXAMPLE)
    assert r.exit_code == 2, r.output
    assert "Plan: 8 to create" in r.output and "tests: 5 of 5 pass" in r.output
    assert live_export(ctl)["services"] == []
    r = remote(ctl, "apply", EXAMPLE, ca=False)        # the CA from /.well-known/est/cacerts
    assert r.exit_code == 0 and "applied 8 change(s)" in r.output, r.output
    r = remote(ctl, "apply", EXAMPLE)
    assert r.exit_code == 0 and "Plan: nothing to do" in r.output
    r = remote(ctl, "test", EXAMPLE)
    assert r.exit_code == 0 and "tests: 5 of 5 pass" in r.output
    r = remote(ctl, "why", "echo-client", "echo")
    assert r.exit_code == 0, r.output
    assert "common routers: ziti-lite (online)" in r.output            # the embedded router, listening
    assert r.output.splitlines()[-1] == "verdict: echo-client can dial echo"

    # the same file on a database file gives the same network
    assert invoke("apply", "--db", fresh_db, EXAMPLE).exit_code == 0
    kinds = ("identities", "configs", "services", "servicePolicies")
    assert named(live_export(ctl), kinds) == named(export_of(fresh_db), kinds)


def test_a_failing_test_or_a_bad_entity_changes_nothing_on_a_controller(ziti_lite_clean, tmp_path):
    ctl = ziti_lite_clean
    before = live_export(ctl)
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["tests"].append({"identity": "visitor", "service": "echo", "can": "dial"})
    r = remote(ctl, "apply", write(tmp_path / "a.json", doc))
    assert r.exit_code == 1 and "FAILED visitor can dial echo" in r.output and "nothing was changed" in r.output
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["services"].append({"name": "late", "encryptionRequired": "no"})   # refused only by validation
    r = remote(ctl, "apply", write(tmp_path / "b.json", doc))
    assert r.exit_code == 1
    assert "services 'late': the controller refused the create (400): COULD_NOT_PARSE_BODY" in r.output
    assert "nothing was changed" in r.output
    assert live_export(ctl) == before


def test_bad_credentials_are_one_line(ziti_lite_clean):
    ctl = ziti_lite_clean
    r = invoke("test", "--controller", ctl.url, "--username", "admin", "--password", "wrong", "--ca", ctl.ca_file,
               EXAMPLE)
    assert r.exit_code == 1
    assert r.output.strip() == f"Error: --controller {ctl.url}: login as 'admin' refused (401 INVALID_AUTH)"


def test_apply_db_beside_a_running_server_is_seen_at_once(ziti_lite_clean, tmp_path):
    ctl = ziti_lite_clean
    client = ctl.client
    assert client.get("/services").data == []                 # warms the server's caches
    r = invoke("apply", "--db", ctl.db, EXAMPLE)
    assert r.exit_code == 0, r.output
    assert [s["name"] for s in client.get("/services").data] == ["echo"]
    echo_client = client.get('/identities?filter=name="echo-client"').data[0]["id"]
    assert [s["name"] for s in client.get(f"/identities/{echo_client}/services?policyType=dial").data] == ["echo"]
    assert json.loads(json.dumps(live_export(ctl)))["servicePolicies"]


def test_a_write_the_controller_refuses_midway_stops_and_says_what_was_done(ziti_lite_clean):
    """Someone else creates the service 'echo' between the rehearsal and the write: the run stops
    at that create and names what was and was not done."""
    from ziti_lite.netcode import apply, document

    ctl = ziti_lite_clean
    network = document.load(EXAMPLE.read_text(), str(EXAMPLE))
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if line == "created configs 'echo-host-config'":      # the last write before the service's
            ctl.client.create("services", {"name": "echo", "encryptionRequired": False})

    api = RemoteApi(ctl.url, ctl.admin_user, ctl.admin_password, ctl.ca_file)
    try:
        with pytest.raises(document.NetcodeError) as refused:
            apply.apply_remote(api, network, prune=False, dry_run=False, say=say)
    finally:
        api.close()
    message = str(refused.value)
    assert "services 'echo': the controller refused the create (400): field 'name'" in message
    assert ("done before it: created identities 'echo-host', created identities 'echo-client', created identities"
            " 'visitor', created configs 'echo-intercept', created configs 'echo-host-config'") in message
    assert message.endswith("not done: this and 2 more change(s)")
    assert [s["name"] for s in ctl.client.get("/service-policies").data] == []


def test_prune_on_a_controller_keeps_its_embedded_router(ziti_lite_clean, tmp_path):
    ctl = ziti_lite_clean
    ctl.client.create("edge-routers", {"name": "branch", "isTunnelerEnabled": False})
    f = write(tmp_path / "routers.json", {"edgeRouters": []})
    r = remote(ctl, "apply", "--prune", f)
    assert r.exit_code == 0, r.output
    assert "- delete edgeRouters 'branch'" in r.output and "ziti-lite" not in r.output
    assert [e["name"] for e in ctl.client.get("/edge-routers").data] == ["ziti-lite"]
