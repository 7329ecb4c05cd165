"""``ziti-lite apply --db``: the plan and its exit statuses, idempotence, the round trip with
``export``, pruning within the file's kinds only, refusal by a failing test, all or nothing."""

from __future__ import annotations

import json

import yaml

from tests.netcode.conftest import EXAMPLE, export_of, invoke, write
from tests.test_exchange import populate
from ziti_lite import exchange
from ziti_lite.edge.entity import ensure_router


def test_the_example_dry_run_apply_and_second_apply(fresh_db):
    before = export_of(fresh_db)
    r = invoke("apply", "--db", fresh_db, "--dry-run", EXAMPLE)
    assert r.exit_code == 2, r.output
    assert "+ create services 'echo'" in r.output and "+ create servicePolicies 'echo-dial'" in r.output
    assert "Plan: 8 to create, 0 to update, 0 to delete." in r.output and "tests: 5 of 5 pass" in r.output
    assert export_of(fresh_db) == before                       # a dry run writes nothing

    r = invoke("apply", "--db", fresh_db, EXAMPLE)
    assert r.exit_code == 0, r.output
    assert "applied 8 change(s)" in r.output
    after = export_of(fresh_db)
    assert sorted(s["name"] for s in after["services"]) == ["echo"]
    assert {p["name"]: sorted(p["identityRoles"]) for p in after["servicePolicies"]} == {
        "echo-bind": ["@echo-host"], "echo-dial": ["#echo-clients"]}

    for args in (("--dry-run",), ()):
        r = invoke("apply", "--db", fresh_db, *args, EXAMPLE)
        assert r.exit_code == 0, r.output
        assert "Plan: nothing to do" in r.output and "applied" not in r.output
    assert export_of(fresh_db) == after


def test_an_update_is_shown_field_by_field_and_made(fresh_db, tmp_path):
    assert invoke("apply", "--db", fresh_db, EXAMPLE).exit_code == 0
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["services"][0]["roleAttributes"] = ["echo", "demo"]
    doc["servicePolicies"][1]["semantic"] = "AllOf"
    f = write(tmp_path / "edited.json", doc)
    r = invoke("apply", "--db", fresh_db, "--dry-run", f)
    assert r.exit_code == 2
    assert "~ update services 'echo'\n    roleAttributes: [\"echo\"] -> [\"echo\", \"demo\"]" in r.output
    assert '    semantic: "AnyOf" -> "AllOf"' in r.output and "0 to create, 2 to update, 0 to delete" in r.output
    assert invoke("apply", "--db", fresh_db, f).exit_code == 0
    net = export_of(fresh_db)
    assert net["services"][0]["roleAttributes"] == ["demo", "echo"]   # sets are sorted, as upstream stores them
    assert {p["name"]: p["semantic"] for p in net["servicePolicies"]}["echo-dial"] == "AllOf"
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh_db, f).output


def test_export_then_apply_prune_plans_nothing(admin, db_path, tmp_path):
    populate(admin)
    out = tmp_path / "net.json"
    assert invoke("export", "--db", db_path, out).exit_code == 0
    r = invoke("apply", "--db", db_path, "--prune", "--dry-run", out)
    assert r.exit_code == 0, r.output
    assert "Plan: nothing to do" in r.output


def test_an_export_applied_to_an_empty_network_rebuilds_it(admin, db_path, fresh_db, tmp_path):
    populate(admin)
    out = tmp_path / "net.json"
    assert invoke("export", "--db", db_path, out).exit_code == 0
    doc = json.loads(out.read_text())
    r = invoke("apply", "--db", fresh_db, "--prune", out)
    assert r.exit_code == 0, r.output

    def comparable(d):
        d = json.loads(json.dumps(d))
        for ca in d["certificateAuthorities"]:       # verified again where it arrives
            ca.pop("verificationToken", None)
            ca.pop("isVerified", None)
        for kind, rows in d.items():
            d[kind] = sorted(rows, key=lambda r: r["name"])
            for row in rows:
                for k, v in row.items():
                    if (k.endswith("Roles") or k == "configs") and isinstance(v, list):   # sets (upstream's too)
                        row[k] = sorted(v)
        return d

    again = export_of(fresh_db)
    assert comparable(again) == comparable(doc)
    assert all(doc[kind] for kind in doc if kind != "certificateAuthorities") and doc["certificateAuthorities"]
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh_db, "--prune", out).output


def test_prune_deletes_only_within_the_files_kinds_and_never_builtins(admin, db_path, ctl, tmp_path):
    populate(admin)
    router = ensure_router(ctl, "ziti-lite")          # the embedded router, as `serve` makes it
    f = write(tmp_path / "few.json", {"identities": [], "configTypes": [], "edgeRouters": [], "authPolicies": [],
                                      "services": [{"name": "web", "encryptionRequired": True}]})
    before = export_of(db_path)
    for args in (("--dry-run",), ()):      # a dry run rehearses the writes too
        r = invoke("apply", "--db", db_path, "--prune", *args, f)
        deletes = sorted(line for line in r.output.splitlines() if line.startswith("- delete"))
        assert deletes == ["- delete authPolicies 'strict'", "- delete configTypes 'my-app.v1'",
                           "- delete edgeRouters 'branch-er'", "- delete identities 'alice'",
                           "- delete identities 'ops-bot'", "- delete services 'bare'"]
        # configs (a kind the file does not name) refer to my-app.v1: the API refuses that
        # delete, and then nothing at all is changed
        assert r.exit_code == 1
        assert "configTypes 'my-app.v1': the controller refused the delete (409)" in r.output
        assert "nothing was changed" in r.output
        assert export_of(db_path) == before
    f = write(tmp_path / "few.json", {"identities": [], "edgeRouters": [], "authPolicies": []})
    assert invoke("apply", "--db", db_path, "--prune", f).exit_code == 0
    after = export_of(db_path)
    assert after["identities"] == [] and after["authPolicies"] == []
    assert [r["name"] for r in after["edgeRouters"]] == ["ziti-lite"]
    assert admin.get(f"/edge-routers/{router}").status_code == 200
    left = admin.get("/identities").json()["data"]             # the default admin stays
    assert [i["isDefaultAdmin"] for i in left] == [True]
    assert admin.get('/auth-policies?filter=name="Default"').json()["data"]


def test_a_failing_test_refuses_the_whole_change(fresh_db, tmp_path):
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["tests"].append({"name": "typo", "identity": "visitor", "service": "echo", "can": "dial"})
    f = write(tmp_path / "net.json", doc)
    before = export_of(fresh_db)
    r = invoke("apply", "--db", fresh_db, f)
    assert r.exit_code == 1
    assert "tests: 5 of 6 pass" in r.output
    assert "FAILED typo: visitor can dial echo: no Dial policy grants it" in r.output
    assert "echo-dial: identity AnyOf: none of #echo-clients matched" in r.output
    assert "1 test(s) fail on the planned network; nothing was changed" in r.output
    assert export_of(fresh_db) == before


def test_secrets_are_never_printed(fresh_db, tmp_path):
    doc = {"identities": [{"name": "u", "isAdmin": False, "password": "hunter2-Secret",
                           "enrollment": {"updb": "u", "password": "hunter2-Secret"}}]}
    f = write(tmp_path / "net.json", doc)
    r = invoke("apply", "--db", fresh_db, "--dry-run", f)
    assert r.exit_code == 2
    assert "hunter2" not in r.output and "(secret)" in r.output


def test_fields_the_export_does_not_carry_are_set_on_creation_only(fresh_db, tmp_path):
    f = write(tmp_path / "net.json", {"identities": [{"name": "h", "isAdmin": False, "defaultHostingCost": 7}]})
    assert invoke("apply", "--db", fresh_db, f).exit_code == 0
    api = exchange.LocalApi(str(fresh_db))
    try:
        (row,) = api.list("identities", 'name = "h"')
        assert row["defaultHostingCost"] == 7
    finally:
        api.close()
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh_db, f).output    # converges


def test_a_signer_and_the_enrollment_policy_naming_it_apply_to_an_empty_network(admin, db_path, fresh_db, tmp_path):
    from tests.test_exchange import enrolling_signer
    enrolling_signer(admin)
    out = tmp_path / "net.json"
    assert invoke("export", "--db", db_path, out).exit_code == 0
    r = invoke("apply", "--db", fresh_db, out)
    assert r.exit_code == 0, r.output
    def by_name(d):
        return sorted(d["externalJwtSigners"], key=lambda s: s["name"])
    assert by_name(export_of(fresh_db)) == by_name(json.loads(out.read_text()))
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh_db, "--dry-run", out).output


def test_a_v2_export_applies_as_v2s_importer_takes_it(admin, db_path, fresh_db, tmp_path):
    """The v2.0 CLI's export lists router identities and the default admin: ``apply`` never
    creates them, sets their role attributes (a router's after the router that brings it, in
    the same run) and never prunes them; a second run plans nothing."""
    from tests.test_exchange import as_v2_export, identities_of
    populate(admin)
    out = tmp_path / "net.json"
    assert invoke("export", "--db", db_path, out).exit_code == 0
    v2 = write(tmp_path / "v2.json", as_v2_export(json.loads(out.read_text())))
    r = invoke("apply", "--db", fresh_db, "--prune", v2)
    assert r.exit_code == 0, r.output
    got = identities_of(fresh_db)
    assert got["branch-er"]["typeId"] == "Router" and got["branch-er"]["roleAttributes"] == ["tunnel-hosts"]
    assert got["Default Admin"]["roleAttributes"] == ["ops"]
    assert sorted(got) == ["Default Admin", "alice", "branch-er", "ops-bot"]
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh_db, "--prune", v2).output
    # its own export (no router identities, no default admin, no system policy) plans nothing either
    again = tmp_path / "again.json"
    assert invoke("export", "--db", fresh_db, again).exit_code == 0
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh_db, "--prune", again).output
    assert identities_of(fresh_db)["branch-er"]["roleAttributes"] == ["tunnel-hosts"]
