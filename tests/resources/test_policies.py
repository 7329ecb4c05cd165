"""The three policy resources: role validation and normalisation, display fields, filters,
re-evaluation on every kind of change, and system edge router policies."""

from __future__ import annotations

import pytest

from tests.builders import Net
from tests.conftest import assert_error


@pytest.fixture
def net(bare) -> Net:
    """The policy tests' helpers for making entities and policies."""
    return Net(bare)

def _cause(r, status=400, code="COULD_NOT_VALIDATE"):
    return assert_error(r, status, code)["cause"]


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("collection,field,extra", [
    ("service-policies", "identityRoles", {"type": "Dial"}),
    ("service-policies", "serviceRoles", {"type": "Bind"}),
    ("service-policies", "postureCheckRoles", {"type": "Dial"}),
    ("edge-router-policies", "edgeRouterRoles", {}),
    ("service-edge-router-policies", "serviceRoles", {}),
])
def test_role_entry_rules(bare, collection, field, extra):
    admin = bare
    base = {"name": "p", "semantic": "AllOf", **extra}
    cause = _cause(admin.post(f"/{collection}", json={**base, field: ["#all", "#web"]}))
    assert cause == {"field": field, "reason": "if using #all, it should be the only role specified",
                     "value": "[#all #web]"}
    cause = _cause(admin.post(f"/{collection}", json={**base, field: ["#ok", "web", "x"]}))
    assert cause["field"] == field and cause["value"] == "[web x]"
    assert cause["reason"].startswith("role entries must prefixed with #")
    cause = _cause(admin.post(f"/{collection}", json={**base, field: ["@nope", "#a"]}))
    assert cause["field"] == field and cause["value"] == "[nope]"
    assert cause["reason"].endswith("found with the given ids")
    assert admin.get(f"/{collection}").json()["meta"]["pagination"]["totalCount"] == 0


def test_unknown_id_messages_name_the_store(admin, net):
    transit = admin.create("routers", {"name": "transit"})
    r = admin.post("/edge-router-policies", json={"name": "p", "semantic": "AnyOf", "edgeRouterRoles": [f"@{transit}"]})
    assert _cause(r)["reason"] == "no routers found with the given ids"  # a transit router is not an edge router
    r = admin.post(
        "/service-policies", json={"name": "p", "type": "Dial", "semantic": "AnyOf", "postureCheckRoles": ["@x"]}
    )
    assert _cause(r)["reason"] == "no postureChecks found with the given ids"
    r = admin.post("/service-edge-router-policies", json={"name": "p", "semantic": "AnyOf", "serviceRoles": ["@x"]})
    assert _cause(r)["reason"] == "no services found with the given ids"
    r = admin.post(
        "/service-policies", json={"name": "p", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["@x"]}
    )
    assert _cause(r)["reason"] == "no identities found with the given ids"


def test_required_and_enumerated_fields(admin):
    for body, field in (
        ({"name": "p", "type": "Dial"}, "semantic"),
        ({"name": "p", "type": "Dial", "semantic": "Some"}, "semantic"),
        ({"name": "p", "semantic": "AnyOf"}, "type"),
        ({"name": "p", "type": "Invalid", "semantic": "AnyOf"}, "type"),
        ({"type": "Dial", "semantic": "AnyOf"}, "name"),
    ):
        assert _cause(admin.post("/service-policies", json=body))["field"] == field
    assert _cause(admin.post("/edge-router-policies", json={"name": "p"}))["field"] == "semantic"
    assert (
        _cause(admin.post("/service-policies", json={"name": "", "type": "Dial", "semantic": "AnyOf"}))["field"]
        == "name"
    )


def test_name_unique_per_kind(admin, net):
    net.sp(name="same")
    assert (
        _cause(admin.post("/service-policies", json={"name": "same", "type": "Bind", "semantic": "AnyOf"}))["field"]
        == "name"
    )
    net.erp(name="same")  # another kind, another namespace


# ------------------------------------------------------------------ detail shape
def test_detail_sorted_roles_and_display(admin, net):
    i = net.identity(name="alice")
    s = net.service(name="web")
    pc = net.posture_check(name="domain-check")
    sp = net.sp("Bind", identities=[f"@{i}", "#b", "#a", "#b"], services=[f"@{s}"], checks=[f"@{pc}", "#pc"])
    d = admin.get(f"/service-policies/{sp}").json()["data"]
    assert d["type"] == "Bind" and d["semantic"] == "AnyOf"
    assert d["identityRoles"] == sorted(["#a", "#b", f"@{i}"])
    assert d["identityRolesDisplay"] == [
        {"role": r, "name": "@alice" if r.startswith("@") else r} for r in d["identityRoles"]
    ]
    assert d["serviceRolesDisplay"] == [{"role": f"@{s}", "name": "@web"}]
    assert {x["name"] for x in d["postureCheckRolesDisplay"]} == {"#pc", "@domain-check"}
    assert set(d["_links"]) == {"self", "services", "identities", "posture-checks"}
    assert d["_links"]["identities"]["href"] == f"./service-policies/{sp}/identities"
    assert d["tags"] == {}

    erp = net.erp()
    d = admin.get(f"/edge-router-policies/{erp}").json()["data"]
    # upstream: no list, null; its Display []
    assert d["identityRoles"] is None and d["identityRolesDisplay"] == [] and d["edgeRouterRolesDisplay"] == []
    assert d["isSystem"] is False
    assert set(d["_links"]) == {"self", "edge-routers", "identities"}
    serp = net.serp(services=["#all"])
    d = admin.get(f"/service-edge-router-policies/{serp}").json()["data"]
    assert d["serviceRolesDisplay"] == [{"role": "#all", "name": "#all"}]
    assert set(d["_links"]) == {"self", "edge-routers", "services"}


def test_deleting_an_entity_removes_its_id_from_every_policy(admin, net):
    i, keep = net.identity(), net.identity()
    s = net.service()
    r = net.router()
    pc = net.posture_check()
    sp = net.sp(identities=[f"@{i}", f"@{keep}"], services=[f"@{s}"], checks=[f"@{pc}"])
    erp = net.erp(identities=[f"@{i}"], routers=[f"@{r}"])
    serp = net.serp(services=[f"@{s}"], routers=[f"@{r}"])
    for path in (f"/identities/{i}", f"/services/{s}", f"/edge-routers/{r}", f"/posture-checks/{pc}"):
        assert admin.delete(path).status_code == 200
    d = admin.get(f"/service-policies/{sp}").json()["data"]
    # emptied role lists read null, as upstream's
    assert d["identityRoles"] == [f"@{keep}"] and d["serviceRoles"] is None and d["postureCheckRoles"] is None
    assert admin.get(f"/edge-router-policies/{erp}").json()["data"]["edgeRouterRoles"] is None
    assert admin.get(f"/service-edge-router-policies/{serp}").json()["data"]["serviceRoles"] is None  # null as upstream
    assert net.ids(f"/service-policies/{sp}/identities") == {keep}


# ------------------------------------------------------------------ semantics and re-evaluation
def test_semantics(admin, net):
    ab, a, none = net.identity("a", "b"), net.identity("a"), net.identity()
    s = net.service()
    cases = {
        ("AllOf", ("#a", "#b")): {ab},
        ("AnyOf", ("#a", "#b")): {ab, a},
        ("AllOf", ()): set(),
        ("AnyOf", ()): set(),
        ("AllOf", (f"@{none}",)): {none},
        ("AllOf", ("#a", "#b", f"@{none}")): {ab, none},
        ("AllOf", ("#all",)): {ab, a, none, *net.ids("/identities")},
        ("AnyOf", ("#zzz",)): set(),
    }
    for (semantic, roles), want in cases.items():
        sp = net.sp(identities=roles, services=[f"@{s}"], semantic=semantic)
        assert net.ids(f"/service-policies/{sp}/identities?limit=500") == want, (semantic, roles)


def test_every_change_re_evaluates(admin, net):
    i1, i2 = net.identity("a"), net.identity("b")
    s = net.service("web")
    sp = net.sp("Dial", identities=["#a", "#b"], services=["#web"], semantic="AllOf")
    assert net.ids(f"/identities/{i1}/services") == set()
    admin.patch(f"/service-policies/{sp}", json={"semantic": "AnyOf"})  # upstream would not re-evaluate here
    assert net.ids(f"/service-policies/{sp}/identities") == {i1, i2}
    assert net.ids(f"/identities/{i1}/services?policyType=dial") == {s}
    admin.patch(f"/service-policies/{sp}", json={"type": "Bind"})
    assert net.ids(f"/identities/{i1}/services?policyType=dial") == set()
    assert net.ids(f"/identities/{i1}/services?policyType=bind") == {s}
    admin.patch(f"/identities/{i1}", json={"roleAttributes": ["c"]})
    assert net.ids(f"/service-policies/{sp}/identities") == {i2}
    admin.patch(f"/services/{s}", json={"roleAttributes": []})
    assert net.ids(f"/identities/{i2}/services") == set()
    s2 = net.service("web")
    assert net.ids(f"/identities/{i2}/services") == {s2}
    r = admin.put(f"/service-policies/{sp}", json={"name": "renamed", "type": "Dial", "semantic": "AllOf"})
    assert r.status_code == 200
    d = admin.get(f"/service-policies/{sp}").json()["data"]
    assert d["identityRoles"] is None and d["serviceRoles"] is None and d["name"] == "renamed"  # null as upstream
    assert net.ids(f"/identities/{i2}/services") == set()
    assert admin.delete(f"/service-policies/{sp}").status_code == 200
    assert net.ids(f"/identities/{i2}/service-policies") == set()


def test_filters(admin, net):
    i = net.identity("a")
    dial = net.sp("Dial", identities=["#all"], name="dial-all")
    bind = net.sp("Bind", identities=[f"@{i}"], semantic="AllOf", name="bind-one")
    meta = admin.get("/service-policies").json()["meta"]
    assert {
        "name",
        "type",
        "semantic",
        "identityRoles",
        "serviceRoles",
        "postureCheckRoles",
        "identities",
        "services",
    } <= set(meta["filterableFields"])
    q = {
        "type = 1": {dial},
        "type = 2": {bind},
        'anyOf(identityRoles) = "#all"': {dial},
        'semantic = "AllOf"': {bind},
        f'anyOf(identities) = "{i}"': {dial, bind},
        "isEmpty(services)": {dial, bind},
        'name contains "one" and type = 2': {bind},
    }
    for f, want in q.items():
        r = admin.get("/service-policies", params={"filter": f})
        assert r.status_code == 200, (f, r.text)
        assert {x["id"] for x in r.json()["data"]} == want, f
    assert_error(admin.get("/service-policies", params={"filter": 'identityRoles = "#all"'}), 400, "INVALID_FILTER")
    erp = net.erp(identities=["#all"])
    r = admin.get("/edge-router-policies", params={"filter": 'anyOf(identityRoles) = "#all" and isSystem = false'})
    assert {x["id"] for x in r.json()["data"]} == {erp}


# ------------------------------------------------------------------ system edge router policies
def test_system_edge_router_policy_is_protected(admin, net):
    r = net.router(name="tun", tunneler=True)
    cause = assert_error(
        admin.patch(f"/edge-router-policies/{r}", json={"name": "x"}), 400, "ENTITY_CAN_NOT_BE_UPDATED"
    )
    assert "system" in cause["cause"]["message"]
    assert_error(
        admin.put(f"/edge-router-policies/{r}", json={"name": "x", "semantic": "AllOf"}),
        400,
        "ENTITY_CAN_NOT_BE_UPDATED",
    )
    assert_error(admin.delete(f"/edge-router-policies/{r}"), 400, "ENTITY_CAN_NOT_BE_DELETED")
    d = admin.get(f"/edge-router-policies/{r}").json()["data"]
    assert d["isSystem"] is True and d["name"] == f"edge-router-{r}-system"
    ids = {x["id"] for x in admin.get("/edge-router-policies", params={"filter": "isSystem = true"}).json()["data"]}
    assert ids == {r}
