"""Relationship list endpoints: membership, paging, filters on the related resource, and the
foreign-key lists (configs, terminators)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_error


@pytest.fixture
def world(admin, net):
    """Two identities, three services, two routers and one policy of each kind between them."""
    w = {}
    w["i1"], w["i2"] = net.identity("emp", name="ann"), net.identity("emp", "ops", name="bob")
    w["s1"], w["s2"], w["s3"] = (net.service("web", name="web-1"), net.service("web", name="web-2"),
                                 net.service("db", name="db-1"))
    w["r1"], w["r2"] = net.router("pub", name="er-a"), net.router("priv", name="er-b")
    w["pc"] = net.posture_check("pc")
    w["dial"] = net.sp("Dial", identities=["#emp"], services=["#web"], checks=["#pc"], name="dial-web")
    w["bind"] = net.sp("Bind", identities=["#ops"], services=["#db", "#web"], name="bind-all")
    w["erp"] = net.erp(identities=["#ops"], routers=["#pub", "#priv"], name="erp-ops")
    w["serp"] = net.serp(services=["#web"], routers=["#pub"], name="serp-web")
    return w


def test_every_relationship(net, world):
    w = world
    expect = {
        f"/identities/{w['i1']}/services": {w["s1"], w["s2"]},
        f"/identities/{w['i2']}/services": {w["s1"], w["s2"], w["s3"]},
        f"/identities/{w['i2']}/services?policyType=dial": {w["s1"], w["s2"]},
        f"/identities/{w['i2']}/services?policyType=Bind": {w["s1"], w["s2"], w["s3"]},
        f"/services/{w['s3']}/identities": {w["i2"]},
        f"/services/{w['s1']}/identities?policyType=dial": {w["i1"], w["i2"]},
        f"/services/{w['s1']}/identities?policyType=bind": {w["i2"]},
        f"/identities/{w['i1']}/edge-routers": set(),
        f"/identities/{w['i2']}/edge-routers": {w["r1"], w["r2"]},
        f"/services/{w['s1']}/edge-routers": {w["r1"]},
        f"/services/{w['s3']}/edge-routers": set(),
        f"/edge-routers/{w['r1']}/identities": {w["i2"]},
        f"/edge-routers/{w['r1']}/services": {w["s1"], w["s2"]},
        f"/edge-routers/{w['r2']}/services": set(),
        f"/identities/{w['i2']}/service-policies": {w["dial"], w["bind"]},
        f"/identities/{w['i2']}/edge-router-policies": {w["erp"]},
        f"/services/{w['s1']}/service-policies": {w["dial"], w["bind"]},
        f"/services/{w['s1']}/service-edge-router-policies": {w["serp"]},
        f"/edge-routers/{w['r1']}/edge-router-policies": {w["erp"]},
        f"/edge-routers/{w['r1']}/service-edge-router-policies": {w["serp"]},
        f"/edge-routers/{w['r2']}/service-edge-router-policies": set(),
        f"/service-policies/{w['dial']}/identities": {w["i1"], w["i2"]},
        f"/service-policies/{w['dial']}/services": {w["s1"], w["s2"]},
        f"/service-policies/{w['dial']}/posture-checks": {w["pc"]},
        f"/edge-router-policies/{w['erp']}/identities": {w["i2"]},
        f"/edge-router-policies/{w['erp']}/edge-routers": {w["r1"], w["r2"]},
        f"/service-edge-router-policies/{w['serp']}/services": {w["s1"], w["s2"]},
        f"/service-edge-router-policies/{w['serp']}/edge-routers": {w["r1"]},
    }
    for path, want in expect.items():
        assert net.ids(path) == want, path


def test_paging_filter_and_meta_of_the_related_resource(admin, world):
    w = world
    r = admin.get(f"/identities/{w['i2']}/services", params={"limit": 2, "offset": 1, "filter": "true sort by name"})
    body = r.json()
    assert [x["name"] for x in body["data"]] == ["web-1", "web-2"]
    assert body["meta"]["pagination"] == {"limit": 2, "offset": 1, "totalCount": 3}
    assert "terminatorStrategy" in body["meta"]["filterableFields"]
    # upstream renders these services without an identity context
    assert body["data"][0]["permissions"] is None and body["data"][0]["config"] is None
    r = admin.get(f"/identities/{w['i2']}/services", params={"filter": 'name contains "db"'})
    assert [x["name"] for x in r.json()["data"]] == ["db-1"]
    r = admin.get(f"/edge-routers/{w['r1']}/identities", params={"filter": 'anyOf(roleAttributes) = "ops"'})
    assert [x["name"] for x in r.json()["data"]] == ["bob"]
    assert "isAdmin" in r.json()["meta"]["filterableFields"]
    assert_error(admin.get(f"/identities/{w['i2']}/services", params={"filter": "nope = 1"}), 400, "INVALID_FILTER")
    assert_error(admin.get(f"/identities/{w['i2']}/services", params={"policyType": "sometimes"}), 400,
                 "COULD_NOT_VALIDATE")


def test_unknown_parent_is_an_empty_list(admin):
    for path in ("/identities/nope/services", "/services/nope/identities", "/edge-routers/nope/services",
                 "/service-policies/nope/identities", "/configs/nope/services", "/config-types/nope/configs",
                 "/services/nope/terminators"):
        r = admin.get(path)
        assert r.status_code == 200, path
        assert r.json()["data"] == [] and r.json()["meta"]["pagination"]["totalCount"] == 0


def test_admin_only(anon, admin, world, net):
    uid = net.identity()
    admin.post("/authenticators", json={"method": "updb", "identityId": uid, "username": "plainuser",
                                        "password": "plain-Passw0rd"})
    user = admin.login("plainuser", "plain-Passw0rd")
    for api, status in ((anon, 401), (user, 401)):
        assert_error(api.get(f"/identities/{world['i1']}/services"), status, "UNAUTHORIZED")
        assert_error(api.get(f"/service-policies/{world['dial']}/identities"), status, "UNAUTHORIZED")


def test_config_and_terminator_lists(admin, net):
    ct = admin.create("config-types", {"name": "my-type", "schema": {}})
    other = admin.create("config-types", {"name": "other-type", "schema": {}})
    c1 = admin.create("configs", {"name": "c1", "configTypeId": ct, "data": {"x": 1}})
    c2 = admin.create("configs", {"name": "c2", "configTypeId": other, "data": {}})
    c3 = admin.create("configs", {"name": "c3", "configTypeId": ct, "data": {}})
    s = admin.create("services", {"name": "svc", "encryptionRequired": True, "configs": [c1, c2]})
    s2 = admin.create("services", {"name": "svc2", "encryptionRequired": True, "configs": [c3]})
    assert net.ids(f"/services/{s}/configs") == {c1, c2}
    assert net.ids(f"/configs/{c1}/services") == {s}
    assert net.ids(f"/config-types/{ct}/configs") == {c1, c3}
    r = admin.get(f"/config-types/{ct}/configs", params={"filter": 'name = "c3"'})
    assert [x["id"] for x in r.json()["data"]] == [c3]
    router = admin.create("routers", {"name": "tr"})
    t = admin.create("terminators", {"service": s, "router": router, "binding": "transport", "address": "tcp:a:1"})
    admin.create("terminators", {"service": s2, "router": router, "binding": "transport", "address": "tcp:b:1"})
    r = admin.get(f"/services/{s}/terminators")
    assert [x["id"] for x in r.json()["data"]] == [t]
    assert r.json()["data"][0]["serviceId"] == s
