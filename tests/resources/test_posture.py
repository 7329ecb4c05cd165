"""Posture checks (six types) and the read-only posture check types."""

from __future__ import annotations

import pytest

from tests.conftest import assert_error

BASE_KEYS = {"id", "createdAt", "updatedAt", "tags", "_links", "name", "typeId", "version", "roleAttributes"}


def _detail(admin, id):
    r = admin.get(f"/posture-checks/{id}")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def _ids(r):
    assert r.status_code == 200, r.text
    return [x["id"] for x in r.json()["data"]]


def _invalid(admin, body, field, method="post", path="/posture-checks"):
    err = assert_error(getattr(admin, method)(path, json=body), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == field, err
    return err["cause"]


# ------------------------------------------------------------------ each type
def test_domain_check(admin):
    id = admin.create(
        "posture-checks",
        {
            "name": "dom",
            "typeId": "DOMAIN",
            "domains": ["b.example", "a.example", "b.example"],
            "roleAttributes": ["pc"],
            "tags": {"k": "v"},
        },
    )
    d = _detail(admin, id)
    assert set(d) == BASE_KEYS | {"domains"}
    assert (d["typeId"], d["version"], d["roleAttributes"], d["tags"]) == ("DOMAIN", 1, ["pc"], {"k": "v"})
    assert d["domains"] == ["a.example", "b.example"]
    assert d["_links"] == {"self": {"href": f"./posture-checks/{id}"}}


def test_os_check(admin):
    id = admin.create(
        "posture-checks",
        {
            "name": "os",
            "typeId": "OS",
            "operatingSystems": [
                {"type": "Windows", "versions": ["1.0.0"]},
                {"type": "Linux", "versions": []},
                {"type": "Windows", "versions": [">=10.0.19041", ">=10.0.0 <11.0.0", ">=10.0.19041"]},
                {"type": "macOS", "versions": ["11.2.x || >= 12.0.0"]},
            ],
        },
    )
    d = _detail(admin, id)
    assert set(d) == BASE_KEYS | {"operatingSystems"}
    assert d["operatingSystems"] == [  # by type; the last entry of a type wins
        {"type": "Linux", "versions": None},
        {"type": "Windows", "versions": [">=10.0.0 <11.0.0", ">=10.0.19041"]},
        {"type": "macOS", "versions": ["11.2.x || >= 12.0.0"]},
    ]


@pytest.mark.parametrize("version", ["abc", "10", "10.0", ">>10.0.0", "=> 1.0.0", "1.0.0 ||", "", "01.0.0"])
def test_os_check_bad_version(admin, version):
    cause = _invalid(
        admin,
        {"name": "os-bad", "typeId": "OS", "operatingSystems": [{"type": "Windows", "versions": ["1.0.0", version]}]},
        "operatingSystems[Windows][1]",
    )
    assert cause["value"] == version


def test_mac_check(admin):
    id = admin.create(
        "posture-checks",
        {
            "name": "mac",
            "typeId": "MAC",
            "macAddresses": ["AA:BB:CC:DD:EE:FF", "aa-bb-cc-dd-ee-ff", "00:11:22:33:44:55"],
        },
    )
    d = _detail(admin, id)
    assert set(d) == BASE_KEYS | {"macAddresses"}
    assert d["macAddresses"] == ["001122334455", "aabbccddeeff"]


def test_process_check(admin):
    id = admin.create(
        "posture-checks",
        {
            "name": "proc",
            "typeId": "PROCESS",
            "process": {
                "osType": "Windows",
                "path": "C:\\app.exe",
                "hashes": ["ABCDEF", "abcdef"],
                "signerFingerprint": "FFEE",
            },
        },
    )
    d = _detail(admin, id)
    assert set(d) == BASE_KEYS | {"process"}
    assert d["process"] == {
        "osType": "Windows",
        "path": "C:\\app.exe",
        "hashes": ["abcdef"],
        "signerFingerprint": "ffee",
    }
    bare = _detail(
        admin,
        admin.create(
            "posture-checks", {"name": "proc2", "typeId": "PROCESS", "process": {"osType": "Linux", "path": "/bin/x"}}
        ),
    )
    assert bare["process"] == {"osType": "Linux", "path": "/bin/x", "hashes": None}


def test_process_multi_check(admin):
    id = admin.create(
        "posture-checks",
        {
            "name": "pm",
            "typeId": "PROCESS_MULTI",
            "semantic": "AllOf",
            "processes": [
                {"osType": "Linux", "path": "/usr/bin/b", "hashes": ["h2", "h1"]},
                {"osType": "Linux", "path": "/usr/bin/a", "signerFingerprints": ["s1"]},
            ],
        },
    )
    d = _detail(admin, id)
    assert set(d) == BASE_KEYS | {"processes", "semantic"}
    assert d["semantic"] == "AllOf"
    assert d["processes"] == [
        {"osType": "Linux", "path": "/usr/bin/a", "hashes": [], "signerFingerprints": ["s1"]},
        {"osType": "Linux", "path": "/usr/bin/b", "hashes": ["h1", "h2"], "signerFingerprints": []},
    ]


def test_mfa_check(admin):
    id = admin.create("posture-checks", {"name": "mfa", "typeId": "MFA", "promptOnWake": True, "timeoutSeconds": 0})
    d = _detail(admin, id)
    assert set(d) == BASE_KEYS | {"timeoutSeconds", "promptOnWake"}, "false flags are omitted"
    assert d["timeoutSeconds"] == -1 and d["promptOnWake"] is True
    other = _detail(
        admin,
        admin.create(
            "posture-checks",
            {
                "name": "mfa2",
                "typeId": "MFA",
                "timeoutSeconds": 300,
                "promptOnUnlock": True,
                "ignoreLegacyEndpoints": True,
            },
        ),
    )
    assert (other["timeoutSeconds"], other["promptOnUnlock"], other["ignoreLegacyEndpoints"]) == (300, True, True)
    assert "promptOnWake" not in other
    assert admin.patch(f"/posture-checks/{id}", json={"typeId": "MFA", "timeoutSeconds": -20,
                                                      "promptOnWake": False}).status_code == 200
    d = _detail(admin, id)
    assert d["timeoutSeconds"] == -1 and "promptOnWake" not in d


def test_other_types_fields_are_ignored(admin):
    id = admin.create(
        "posture-checks",
        {"name": "dom2", "typeId": "DOMAIN", "domains": ["x"], "macAddresses": ["aa"], "timeoutSeconds": 5},
    )
    assert set(_detail(admin, id)) == BASE_KEYS | {"domains"}


def test_other_types_fields_are_not_checked(admin):
    # the admin console sends every type's fields, the unused ones empty (an osType of ""), on
    # create, replace and patch; upstream reads only the named type's, and so no error
    unused = {"macAddresses": [], "operatingSystems": [], "semantic": "AllOf", "timeoutSeconds": 0,
              "processes": [{"hashes": [], "osType": "", "path": "", "signerFingerprints": []}],
              "process": {"hashes": [], "osType": "", "path": "", "signerFingerprint": ""}}
    id = admin.create("posture-checks", {"name": "dom3", "typeId": "DOMAIN", "domains": ["x"], **unused})
    assert set(_detail(admin, id)) == BASE_KEYS | {"domains"}
    r = admin.put(f"/posture-checks/{id}", json={"name": "dom3b", "typeId": "DOMAIN", "domains": ["y"], **unused})
    assert r.status_code == 200, r.text
    r = admin.patch(f"/posture-checks/{id}", json={"name": "dom3c", "typeId": "DOMAIN", **unused})
    assert r.status_code == 200, r.text
    d = _detail(admin, id)
    assert (d["name"], d["domains"]) == ("dom3c", ["y"])
    # its own type's fields are checked as ever
    err = _invalid(admin, {"name": "p", "typeId": "PROCESS", "process": {"osType": "", "path": "/x"}, **unused},
                   "process.osType")
    assert err["value"] == ""


# ------------------------------------------------------------------ validation
def test_unknown_type_and_patch_without_type(admin):
    # upstream: an unknown type fails its body's discriminator (COULD_NOT_PARSE_BODY); a PATCH
    # must name the type
    err = assert_error(admin.post("/posture-checks", json={"name": "x", "typeId": "NOPE"}), 400, "COULD_NOT_PARSE_BODY")
    assert "NOPE" in err["cause"]["message"]
    id = admin.create("posture-checks", {"name": "dom-p", "typeId": "DOMAIN", "domains": ["x"]})
    assert _invalid(admin, {"domains": ["y"]}, "typeId", "patch", f"/posture-checks/{id}")["value"] == ""
    assert _detail(admin, id)["domains"] == ["x"]
    err = assert_error(admin.post("/posture-checks", json={"name": "x", "typeId": "MFA", "timeoutSeconds": "soon"}),
                       400, "COULD_NOT_PARSE_BODY")  # a string for a number: upstream's unmarshalling fails
    assert "timeoutSeconds" in err["cause"]["message"]


@pytest.mark.parametrize(
    "body,field",
    [
        ({"name": "x"}, "typeId"),
        ({"typeId": "MFA"}, "name"),
        ({"name": "", "typeId": "MFA"}, "name"),
        ({"name": "x", "typeId": "DOMAIN", "domains": []}, "domains"),
        ({"name": "x", "typeId": "DOMAIN"}, "domains"),
        ({"name": "x", "typeId": "MAC", "macAddresses": []}, "macAddresses"),
        ({"name": "x", "typeId": "OS", "operatingSystems": []}, "operatingSystems"),
        (
            {"name": "x", "typeId": "OS", "operatingSystems": [{"type": "BeOS", "versions": []}]},
            "operatingSystems.0.type",
        ),
        ({"name": "x", "typeId": "OS", "operatingSystems": [{"type": "Linux"}]}, "operatingSystems.0.versions"),
        ({"name": "x", "typeId": "PROCESS"}, "process"),
        ({"name": "x", "typeId": "PROCESS", "process": {"osType": "Linux"}}, "process.path"),
        ({"name": "x", "typeId": "PROCESS_MULTI", "semantic": "AnyOf", "processes": []}, "processes"),
        ({"name": "x", "typeId": "PROCESS_MULTI", "processes": [{"osType": "Linux", "path": "/a"}]}, "semantic"),
        (
            {
                "name": "x",
                "typeId": "PROCESS_MULTI",
                "semantic": "Most",
                "processes": [{"osType": "Linux", "path": "/a"}],
            },
            "semantic",
        ),
        ({"name": "x", "typeId": "MFA", "roleAttributes": ["@x"]}, "roleAttributes"),
    ],
)
def test_create_validation(admin, body, field):
    _invalid(admin, body, field)
    assert admin.get("/posture-checks").json()["meta"]["pagination"]["totalCount"] == 0


def test_name_unique(admin):
    admin.create("posture-checks", {"name": "same", "typeId": "MFA"})
    _invalid(admin, {"name": "same", "typeId": "DOMAIN", "domains": ["d"]}, "name")


# ------------------------------------------------------------------ update
def test_put_replaces(admin):
    id = admin.create(
        "posture-checks",
        {"name": "put", "typeId": "DOMAIN", "domains": ["a"], "roleAttributes": ["r"], "tags": {"t": 1}},
    )
    r = admin.put(f"/posture-checks/{id}", json={"name": "put2", "typeId": "DOMAIN", "domains": ["z", "y"]})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = _detail(admin, id)
    assert (d["name"], d["domains"], d["roleAttributes"], d["tags"], d["version"]) == ("put2", ["y", "z"], [], {}, 1)
    _invalid(admin, {"name": "put2", "typeId": "DOMAIN"}, "domains", method="put", path=f"/posture-checks/{id}")
    _invalid(
        admin,
        {"name": "put2", "typeId": "DOMAIN", "domains": []},
        "domains",
        method="put",
        path=f"/posture-checks/{id}",
    )
    _invalid(
        admin,
        {"name": "put2", "typeId": "MAC", "macAddresses": ["aa"]},
        "typeId",
        method="put",
        path=f"/posture-checks/{id}",
    )
    assert _detail(admin, id)["domains"] == ["y", "z"]


def test_patch_writes_only_sent_fields(admin):
    id = admin.create(
        "posture-checks",
        {
            "name": "pat",
            "typeId": "PROCESS_MULTI",
            "semantic": "AnyOf",
            "processes": [{"osType": "Linux", "path": "/a"}],
            "roleAttributes": ["r"],
        },
    )
    r = admin.patch(f"/posture-checks/{id}", json={"typeId": "PROCESS_MULTI", "semantic": "AllOf"})
    assert r.status_code == 200
    d = _detail(admin, id)
    assert d["semantic"] == "AllOf" and d["processes"][0]["path"] == "/a" and d["roleAttributes"] == ["r"]
    assert (
        admin.patch(
            f"/posture-checks/{id}", json={"typeId": "PROCESS_MULTI", "processes": [{"osType": "macOS", "path": "/b"}]}
        ).status_code
        == 200
    )
    d = _detail(admin, id)
    assert [p["path"] for p in d["processes"]] == ["/b"] and d["name"] == "pat"
    _invalid(admin, {"typeId": "OS"}, "typeId", method="patch", path=f"/posture-checks/{id}")
    _invalid(admin, {"typeId": "PROCESS_MULTI", "processes": []}, "processes", method="patch",
             path=f"/posture-checks/{id}")
    # another type's fields in a PATCH change nothing
    assert admin.patch(f"/posture-checks/{id}", json={"typeId": "PROCESS_MULTI", "domains": ["x"]}).status_code == 200
    assert "domains" not in _detail(admin, id)


def test_list_filter_delete(admin):
    a = admin.create("posture-checks", {"name": "mfa-a", "typeId": "MFA", "promptOnWake": True})
    b = admin.create("posture-checks", {"name": "mfa-b", "typeId": "MFA", "promptOnUnlock": True})
    c = admin.create("posture-checks", {"name": "dom-c", "typeId": "DOMAIN", "domains": ["d"]})
    r = admin.get("/posture-checks")
    fields = r.json()["meta"]["filterableFields"]
    assert {"name", "promptOnWake", "promptOnUnlock"} <= set(fields)
    assert _ids(admin.get("/posture-checks", params={"filter": "promptOnWake = true"})) == [a]
    assert _ids(admin.get("/posture-checks", params={"filter": "promptOnUnlock = true"})) == [b]
    assert _ids(admin.get("/posture-checks", params={"filter": 'name contains "mfa" sort by name desc'})) == [b, a]
    assert _ids(admin.get("/posture-checks", params={"filter": 'name = "dom-c"'})) == [c]
    assert admin.delete(f"/posture-checks/{c}").status_code == 200
    assert_error(admin.get(f"/posture-checks/{c}"), 404, "NOT_FOUND")
    assert sorted(_ids(admin.get("/posture-checks"))) == sorted([a, b])


def test_posture_checks_need_admin(anon):
    assert_error(anon.get("/posture-checks"), 401, "UNAUTHORIZED")
    assert_error(anon.post("/posture-checks", json={"name": "x", "typeId": "MFA"}), 401, "UNAUTHORIZED")


# ------------------------------------------------------------------ posture check types
def test_posture_check_types(admin, anon):
    r = admin.get("/posture-check-types?limit=100")
    assert r.status_code == 200, r.text
    rows = {x["id"]: x for x in r.json()["data"]}
    assert set(rows) == {"OS", "PROCESS", "DOMAIN", "MAC", "PROCESS_MULTI"}, "there is no MFA row"
    assert r.json()["meta"]["pagination"]["totalCount"] == 5
    assert rows["DOMAIN"]["name"] == "Windows Domain Check"
    # as upstream answers them: sorted (byte order), null versions where a type names none
    assert rows["DOMAIN"]["operatingSystems"] == [{"type": "Windows", "versions": ["10", "2000", "7", "8", "Vista"]}]
    assert [o["type"] for o in rows["OS"]["operatingSystems"]] == ["Android", "Linux", "Windows", "iOS", "macOS"]
    assert all(o["versions"] is None for o in rows["PROCESS_MULTI"]["operatingSystems"])
    d = admin.get("/posture-check-types/MAC").json()["data"]
    assert d["name"] == "MAC Address Check" and d["_links"]["self"]["href"] == "./posture-check-types/MAC"
    assert "version" in d
    assert _ids(admin.get("/posture-check-types", params={"filter": 'name contains "Process" sort by id'})) == [
        "PROCESS",
        "PROCESS_MULTI",
    ]
    assert_error(admin.get("/posture-check-types/MFA"), 404, "NOT_FOUND")
    assert admin.post("/posture-check-types", json={"name": "x"}).status_code == 405
    assert admin.delete("/posture-check-types/OS").status_code == 405
    assert_error(anon.get("/posture-check-types"), 401, "UNAUTHORIZED")
