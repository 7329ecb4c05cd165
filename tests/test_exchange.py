"""``ziti-lite export`` / ``ziti-lite import``: the format of ``ziti ops export`` and a round
trip of every exportable entity into a fresh network."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.resources.test_cas_enrollments import make_cert, pem
from ziti_lite.cli import cli

HOST = "NH5p4FpGR"


def populate(admin) -> None:
    """A network with every exportable entity type, cross-referenced by id."""
    ct = admin.create("config-types", {"name": "my-app.v1", "schema": {"type": "object", "properties": {
        "url": {"type": "string"}}, "required": ["url"]}, "tags": {"team": "a"}})
    c1 = admin.create("configs", {"name": "app-cfg", "configTypeId": ct, "data": {"url": "https://x"}})
    c2 = admin.create("configs", {"name": "web-host", "configTypeId": HOST,
                                  "data": {"protocol": "tcp", "address": "localhost", "port": 8080}})
    svc = admin.create("services", {"name": "web", "encryptionRequired": True, "roleAttributes": ["web", "public"],
                                    "configs": [c1, c2], "terminatorStrategy": "random", "tags": {"tier": 1}})
    admin.create("services", {"name": "bare", "encryptionRequired": False})
    signer = admin.create("external-jwt-signers", {
        "name": "idp", "issuer": "https://idp.example.com", "audience": "ziti", "enabled": True,
        "jwksEndpoint": "https://idp.example.com/jwks", "claimsProperty": "email", "useExternalId": True})
    policy = admin.create("auth-policies", {
        "name": "strict", "secondary": {"requireTotp": True, "requireExtJwtSigner": signer},
        "primary": {"cert": {"allowed": True, "allowExpiredCerts": False},
                    "extJwt": {"allowed": True, "allowedSigners": [signer]},
                    "updb": {"allowed": True, "lockoutDurationMinutes": 5, "maxAttempts": 3, "minPasswordLength": 8,
                             "requireMixedCase": True, "requireNumberChar": True, "requireSpecialChar": False}}})
    alice = admin.create("identities", {"name": "alice", "type": "Device", "isAdmin": False,
                                        "roleAttributes": ["staff"], "authPolicyId": policy,
                                        "externalId": "alice@example.com", "tags": {"desk": "3"},
                                        "enrollment": {"ott": True}})
    admin.create("identities", {"name": "ops-bot", "type": "Default", "isAdmin": True})
    router = admin.create("edge-routers", {"name": "branch-er", "roleAttributes": ["branch"],
                                           "isTunnelerEnabled": False, "tags": {"site": "b"}})
    posture = admin.create("posture-checks", {"name": "corp-domain", "typeId": "DOMAIN", "domains": ["corp.example"],
                                              "roleAttributes": ["corp"]})
    admin.create("service-policies", {"name": "web-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": [f"@{alice}", "#staff"], "serviceRoles": [f"@{svc}"],
                                      "postureCheckRoles": [f"@{posture}", "#corp"]})
    admin.create("service-policies", {"name": "web-bind", "type": "Bind", "semantic": "AllOf",
                                      "identityRoles": ["#hosts", "#staff"], "serviceRoles": ["#web"]})
    admin.create("edge-router-policies", {"name": "branch-staff", "semantic": "AnyOf",
                                          "identityRoles": [f"@{alice}"], "edgeRouterRoles": [f"@{router}", "#branch"]})
    admin.create("service-edge-router-policies", {"name": "web-on-branch", "semantic": "AnyOf",
                                                  "serviceRoles": ["#web"], "edgeRouterRoles": [f"@{router}"]})
    cert, _ = make_cert("Exported CA", ca=True)
    admin.create("cas", {"name": "partner-ca", "certPem": pem(cert), "isAutoCaEnrollmentEnabled": True,
                         "isOttCaEnrollmentEnabled": False, "isAuthEnabled": True, "identityRoles": ["partner"],
                         "identityNameFormat": "[caName]-[commonName]"})


def run(*args) -> str:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture
def exported(admin, db_path, tmp_path):
    populate(admin)
    out = tmp_path / "net.json"
    messages = run("export", "--db", str(db_path), str(out))
    return json.loads(out.read_text()), messages, out


def test_export_has_upstream_shape(exported):
    doc, messages, out = exported
    assert sorted(doc) == sorted(["certificateAuthorities", "identities", "edgeRouters", "services", "configs",
                                  "configTypes", "servicePolicies", "edgeRouterPolicies", "serviceEdgeRouterPolicies",
                                  "externalJwtSigners", "authPolicies", "postureChecks"])
    assert out.read_text() == json.dumps(doc, indent=2, sort_keys=True) + "\n"
    text = out.read_text()
    assert '"id"' not in text and "createdAt" not in text and "_links" not in text
    identities = {i["name"]: i for i in doc["identities"]}
    assert set(identities) == {"alice", "ops-bot"}           # not the default admin
    assert identities["alice"]["authPolicy"] == "@strict" and identities["ops-bot"]["authPolicy"] == "@Default"
    assert "enrollment" not in identities["alice"] and identities["alice"]["roleAttributes"] == ["staff"]
    services = {s["name"]: s for s in doc["services"]}
    # a service's configs are kept in id order (as upstream's set): another network, another order
    assert sorted(services["web"]["configs"]) == ["@app-cfg", "@web-host"] and services["bare"]["configs"] is None
    assert {c["name"]: c["configType"] for c in doc["configs"]} == {"app-cfg": "@my-app.v1", "web-host": "@host.v1"}
    assert [t["name"] for t in doc["configTypes"]] == ["my-app.v1"]     # not the built-ins
    dial = {p["name"]: p for p in doc["servicePolicies"]}["web-dial"]
    assert sorted(dial["identityRoles"]) == ["#staff", "@alice"] and dial["serviceRoles"] == ["@web"]
    assert sorted(dial["postureCheckRoles"]) == ["#corp", "@corp-domain"]
    branch = {p["name"]: p for p in doc["edgeRouterPolicies"]}["branch-staff"]
    assert sorted(branch["edgeRouterRoles"]) == ["#branch", "@branch-er"] and branch["identityRoles"] == ["@alice"]
    assert all("enrollmentToken" not in r for r in doc["edgeRouters"])   # a credential: not written out
    (strict,) = doc["authPolicies"]                          # not Default
    assert strict["primary"]["extJwt"]["allowedSigners"] == ["@idp"]
    assert strict["secondary"]["requireExtJwtSigner"] == "@idp"
    assert doc["externalJwtSigners"][0]["enrollAuthPolicyId"] == "default"   # the same id on every controller
    assert "cannot" in messages and "private keys" in messages


def test_round_trip_into_a_fresh_network(exported, template_db, tmp_path):
    doc, _, out = exported
    fresh = tmp_path / "fresh.db"
    shutil.copy(template_db, fresh)
    messages = run("import", "--db", str(fresh), str(out))
    assert "identities: 2 created" in messages
    again = tmp_path / "again.json"
    run("export", "--db", str(fresh), str(again))
    second = json.loads(again.read_text())

    def comparable(d):
        d = json.loads(json.dumps(d))
        for ca in d["certificateAuthorities"]:     # a CA must be verified again where it arrives
            ca.pop("verificationToken", None)
            ca.pop("isVerified", None)
        for kind, rows in d.items():
            d[kind] = sorted(rows, key=lambda r: r["name"])
            for r in rows:
                for k, v in r.items():
                    if (k.endswith("Roles") or k == "configs") and isinstance(v, list):
                        r[k] = sorted(v)   # sets, kept in id order: the ids differ between networks
        return d

    assert comparable(second) == comparable(doc)
    assert {len(v) for v in doc.values()} != {0}
    # importing again creates nothing: everything is found by name
    messages = run("import", "--db", str(fresh), str(out))
    assert " created" not in messages.replace("0 created", "")


def test_bad_import_files_are_refused(tmp_path, template_db):
    db = tmp_path / "x.db"
    shutil.copy(template_db, db)
    bad_ref = '{"configs": [{"name": "c", "configType": "@nope", "data": {}}]}'
    for text, message in (
        ("identities:\n  - name: a\n", "YAML"),
        ('{"widgets": []}', "unknown entity types"),
        ("[1, 2]", "not an export"),
        (bad_ref, "no config-types named 'nope'"),
    ):
        f = tmp_path / "in.json"
        f.write_text(text)
        r = CliRunner().invoke(cli, ["import", "--db", str(db), str(f)])
        assert r.exit_code == 1 and message in r.output, r.output


def test_export_to_stdout(db_path):
    kw = {"mix_stderr": False} if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else {}  # click < 8.2
    r = CliRunner(**kw).invoke(cli, ["export", "--db", str(db_path), "-"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["identities"] == [] and doc["configTypes"] == []


def test_the_admin_login_is_untouched(exported, db_path, anon):
    """The export's in-process session is gone afterwards; the admin still logs in."""
    from ziti_lite.db.store import Store

    store = Store(str(db_path))
    try:
        assert store.value("SELECT count(*) FROM api_sessions WHERE ip_address = '127.0.0.1'") == 0
    finally:
        store.close()
    assert anon.login(ADMIN_USER, ADMIN_PASSWORD).token


ENROLLING_POLICY = {"cert": {"allowed": True, "allowExpiredCerts": False},
                    "extJwt": {"allowed": True, "allowedSigners": []},
                    "updb": {"allowed": False, "lockoutDurationMinutes": 0, "maxAttempts": 0, "minPasswordLength": 5,
                             "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False}}


def enrolling_signer(admin) -> None:
    """A signer whose enrolled identities get a policy that itself names a signer: the two kinds
    name each other (OpenZiti 2.0's enrollAuthPolicyId), a cycle an import has to break."""
    idp = admin.create("external-jwt-signers", {"name": "idp-a", "issuer": "https://a.example", "audience": "z",
                                                "enabled": True, "jwksEndpoint": "https://a.example/jwks"})
    policy = admin.create("auth-policies", {"name": "idp-a-only", "secondary": {"requireTotp": False},
                                            "primary": {**ENROLLING_POLICY, "extJwt": {"allowed": True,
                                                                                       "allowedSigners": [idp]}}})
    admin.create("external-jwt-signers", {
        "name": "idp-b", "issuer": "https://b.example", "audience": "z", "enabled": True,
        "jwksEndpoint": "https://b.example/jwks", "enrollToCertEnabled": True, "enrollToTokenEnabled": False,
        "enrollAuthPolicyId": policy, "targetToken": "ID", "enrollNameClaimsSelector": "/email"})


def test_a_signers_enrollment_policy_round_trips(admin, db_path, template_db, tmp_path):
    enrolling_signer(admin)
    out = tmp_path / "net.json"
    run("export", "--db", str(db_path), str(out))
    doc = json.loads(out.read_text())
    signers = {s["name"]: s for s in doc["externalJwtSigners"]}
    assert signers["idp-b"]["enrollAuthPolicyId"] == "@idp-a-only"
    assert signers["idp-a"]["enrollAuthPolicyId"] == "default"
    fresh = tmp_path / "fresh.db"
    shutil.copy(template_db, fresh)
    run("import", "--db", str(fresh), str(out))
    again = tmp_path / "again.json"
    run("export", "--db", str(fresh), str(again))
    def by_name(d):
        return sorted(d["externalJwtSigners"], key=lambda s: s["name"])
    assert by_name(json.loads(again.read_text())) == by_name(doc)


def as_v2_export(doc: dict) -> dict:
    """``doc`` as the v2.0 CLI's ``ziti ops export`` writes a network: the identities every
    network has of its own listed too (upstream v2.0.3's exporter keeps them, typed by
    ``typeId``): the identity of the tunneler-enabled edge router (such a router has one, named
    as it), one of a router the file lacks, the default admin, and another network's default
    admin of another name."""
    doc = json.loads(json.dumps(doc))
    for router in doc["edgeRouters"]:
        router["isTunnelerEnabled"] = True
    # and its own edge router policy, named by its id there (upstream's export writes it as any)
    doc["edgeRouterPolicies"].append({"name": "edge-router-Zx81Yq2Ab-system", "semantic": "AnyOf",
                                      "identityRoles": ["@branch-er"], "edgeRouterRoles": ["@branch-er"], "tags": {}})
    common = {"authPolicy": "@Default", "disabled": False, "externalId": None, "isMfaEnabled": False, "tags": {}}
    doc["identities"] += [
        {**common, "name": "branch-er", "typeId": "Router", "isAdmin": False, "isDefaultAdmin": False,
         "roleAttributes": ["tunnel-hosts"]},
        {**common, "name": "ghost-er", "typeId": "Router", "isAdmin": False, "isDefaultAdmin": False,
         "roleAttributes": ["gone"]},
        {**common, "name": "Default Admin", "typeId": "Default", "isAdmin": True, "isDefaultAdmin": True,
         "roleAttributes": ["ops"]},
        {**common, "name": "admin", "typeId": "Default", "isAdmin": True, "isDefaultAdmin": True,
         "roleAttributes": None},
    ]
    for identity in doc["identities"]:
        identity.setdefault("typeId", "Default")
    return doc


def export_doc(db) -> dict:
    from ziti_lite import exchange
    api = exchange.LocalApi(str(db))
    try:
        return exchange.export(api)
    finally:
        api.close()


def identities_of(db) -> dict[str, dict]:
    from ziti_lite import exchange
    api = exchange.LocalApi(str(db))
    try:
        return {i["name"]: i for i in api.list("identities")}
    finally:
        api.close()


def test_a_v2_export_with_router_identities_and_the_default_admin_imports_as_v2_imports_it(
        exported, template_db, tmp_path):
    """Upstream 2.0's importer creates the edge routers first and then matches those identities
    by name, setting their role attributes; before, ziti-lite created the router's identity as a
    plain one and then failed on the router (400 COULD_NOT_VALIDATE, name must be unique)."""
    doc, _, _ = exported
    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps(as_v2_export(doc)))
    fresh = tmp_path / "fresh.db"
    shutil.copy(template_db, fresh)
    messages = run("import", "--db", str(fresh), str(v2))
    assert "identities: 2 created, 2 updated, 2 already there" in messages, messages
    assert "edgeRouters: 1 created" in messages
    assert "ghost-er (a router's identity, which this network does not have)" in messages
    assert "admin (the default admin, which this network does not have)" in messages
    got = identities_of(fresh)
    assert got["branch-er"]["typeId"] == "Router" and got["branch-er"]["roleAttributes"] == ["tunnel-hosts"]
    assert got["Default Admin"]["isDefaultAdmin"] and got["Default Admin"]["roleAttributes"] == ["ops"]
    assert "ghost-er" not in got and "admin" not in got
    assert sorted(got) == ["Default Admin", "alice", "branch-er", "ops-bot"]
    assert "edgeRouterPolicies: 1 created, 2 already there" in messages   # the router brought its own
    assert "edge-router-Zx81Yq2Ab-system" not in {p["name"] for p in export_doc(fresh)["edgeRouterPolicies"]}
    # again: everything is there, nothing to set
    messages = run("import", "--db", str(fresh), str(v2))
    assert " created" not in messages.replace("0 created", "") and "updated" not in messages
    assert identities_of(fresh)["branch-er"]["roleAttributes"] == ["tunnel-hosts"]
