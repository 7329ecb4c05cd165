"""Bad network files: each gives exit status 1, one line naming the file, the entity and the
field, and leaves the network as it was (its export before and after is equal)."""

from __future__ import annotations

import pytest

from tests.netcode.conftest import export_of, invoke, write
from ziti_lite.netcode import document

SERVICE = {"name": "crm", "encryptionRequired": True, "roleAttributes": ["crm"]}
HOST_CONFIG = {"name": "crm-host", "configType": "@host.v1",
               "data": {"protocol": "tcp", "address": "localhost", "port": 8080}}

BAD = [
    ("unknown kind", {"services": [SERVICE], "widgets": [{"name": "w"}]}, "unknown entity kind 'widgets'"),
    ("dangling reference", {"services": [SERVICE], "servicePolicies": [
        {"name": "p", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["@nobody"], "serviceRoles": ["#crm"]}]},
     "servicePolicies 'p': field 'identityRoles': @nobody names no identity in the file or the network"),
    ("dangling config type", {"configs": [{**HOST_CONFIG, "configType": "@nope.v1"}]},
     "configs 'crm-host': field 'configType': @nope.v1 names no configType"),
    ("duplicate names", {"services": [SERVICE, SERVICE]}, "services 'crm': duplicate name"),
    ("wrong type", {"services": [SERVICE, {"name": "b", "encryptionRequired": "yes"}]},
     "services 'b': the controller refused the create (400): COULD_NOT_PARSE_BODY"),
    ("invalid config", {"services": [SERVICE], "configs": [{**HOST_CONFIG, "data": {"protocol": "tcp"}}]},
     "configs 'crm-host': the controller refused the create (400): field '(root)'"),
    ("role without prefix", {"servicePolicies": [
        {"name": "p", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["alice"], "serviceRoles": []}]},
     "servicePolicies 'p': field 'identityRoles': role 'alice' must start with #"),
    ("nameless", {"services": [{"encryptionRequired": True}]}, "services[0]: field 'name' must be a non-empty string"),
    ("YAML syntax", "services:\n  - name: crm\n    roleAttributes: [crm\n  - name: b\n",
     "YAML syntax error at line 4, column"),
    ("bad test", {"services": [SERVICE], "tests": [{"identity": "a", "service": "crm", "can": "fly"}]},
     "tests[0]: field 'can' must be dial or bind, got 'fly'"),
]


@pytest.mark.parametrize("case, doc, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_and_changes_nothing(fresh_db, tmp_path, case, doc, message):
    f = write(tmp_path / ("net.yaml" if isinstance(doc, str) else "net.json"), doc)
    before = export_of(fresh_db)
    for args in (("--dry-run",), ()):
        r = invoke("apply", "--db", fresh_db, *args, f)
        assert r.exit_code == 1, r.output
        last = r.output.strip().splitlines()[-1]
        assert last.startswith(f"Error: {f}: ") and message in last, last
        assert export_of(fresh_db) == before
    if case in ("unknown kind", "duplicate names", "nameless", "YAML syntax", "bad test"):  # the file itself
        r = invoke("test", "--db", fresh_db, f)
        assert r.exit_code == 1 and message in r.output


def test_yaml_and_json_read_alike():
    text_yaml = ("services:\n  - name: crm\n    roleAttributes: [crm]\n"
                 "tests:\n  - {identity: a, service: crm, can: dial}\n")
    text_json = ('{"services": [{"name": "crm", "roleAttributes": ["crm"]}],'
                 ' "tests": [{"identity": "a", "service": "crm", "can": "dial"}]}')
    a, b = document.load(text_yaml, "a.yaml"), document.load(text_json, "b.json")
    assert a.entities == b.entities == {"services": [{"name": "crm", "roleAttributes": ["crm"]}]}
    assert a.tests == b.tests


def test_a_missing_file_is_one_line(fresh_db, tmp_path):
    r = invoke("apply", "--db", fresh_db, tmp_path / "nope.yaml")
    assert r.exit_code == 1 and r.output.strip() == f"Error: {tmp_path / 'nope.yaml'}: No such file or directory"


def test_db_or_controller_but_not_both(fresh_db, tmp_path):
    f = write(tmp_path / "n.json", {})
    assert invoke("apply", f).exit_code == 2                        # a usage error, as click gives
    assert invoke("apply", "--db", fresh_db, "--controller", "https://127.0.0.1:1", f).exit_code == 2


def test_yaml_errors_name_the_entitys_line(fresh_db, tmp_path):
    text = ("services:\n  - name: crm\n    encryptionRequired: true\n"
            "  - name: b\n    encryptionRequired: 'yes'\n"
            "servicePolicies:\n  - name: p\n    type: Dial\n    identityRoles: ['@ghost']\n    serviceRoles: []\n")
    f = write(tmp_path / "net.yaml", text)
    r = invoke("apply", "--db", fresh_db, f)
    assert r.exit_code == 1
    assert r.output.strip().splitlines()[-1] == (f"Error: {f}:7: servicePolicies 'p': field 'identityRoles':"
                                                 " @ghost names no identity in the file or the network")
    f = write(tmp_path / "net.yaml", text.split("servicePolicies")[0])
    r = invoke("apply", "--db", fresh_db, f)
    assert r.exit_code == 1
    assert f"Error: {f}:4: services 'b': the controller refused the create (400): COULD_NOT_PARSE_BODY" \
        in r.output
    f = write(tmp_path / "net.yaml", text.split("servicePolicies")[0] + "  - name: crm\n")
    assert invoke("apply", "--db", fresh_db, f).output.strip() == f"Error: {f}:6: services 'crm': duplicate name"
