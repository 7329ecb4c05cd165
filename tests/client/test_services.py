"""Client API services: exactly the granted ones, with permissions, merged configs and
posture queries; details, router and terminator lists of visible services only."""

from __future__ import annotations

from tests.client.conftest import DB_HOST, HOST, INTERCEPT, WEB_INTERCEPT, add_identity
from tests.conftest import CLIENT, assert_error


def _by_name(r):
    assert r.status_code == 200, r.text
    return {s["name"]: s for s in r.json()["data"]}


def test_lists_exactly_the_granted_services_with_merged_configs(net):
    alice = net.login(net.alice, configTypes=["all"])
    r = alice.get("/services")
    assert r.headers["ziti-instance-id"]
    services = _by_name(r)
    assert set(services) == {"web", "db"}
    assert r.json()["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 2}
    web, db = services["web"], services["db"]
    assert web["permissions"] == ["Dial"] and db["permissions"] == ["Bind"]
    assert web["config"] == {"intercept.v1": WEB_INTERCEPT}
    assert db["config"] == {"host.v1": DB_HOST}
    assert web["encryptionRequired"] is True and web["maxIdleTimeMillis"] == 0
    assert web["postureQueries"] == [{"policyId": "dummy dial policy: no posture checks defined",
                                      "policyType": "Dial", "isPassing": True, "postureQueries": []}]
    # the unprefixed and legacy paths are the client API too
    for prefix in ("", "/edge/v1"):
        again = net.client.get(prefix + "/services", headers={"zt-session": alice.token})
        assert set(_by_name(again)) == {"web", "db"}


def test_both_permissions_bind_first(net):
    net.admin.create("service-policies", {"name": "bind-web", "type": "Bind", "semantic": "AnyOf",
                                          "identityRoles": ["#staff"], "serviceRoles": ["@" + net.web]})
    web = _by_name(net.login(net.alice).get("/services"))["web"]
    assert web["permissions"] == ["Bind", "Dial"]
    assert [q["policyType"] for q in web["postureQueries"]] == ["Bind", "Dial"]


def test_config_types_from_login_or_query(net):
    by_name = net.login(net.alice, configTypes=["intercept.v1"])
    services = _by_name(by_name.get("/services"))
    assert services["web"]["config"] == {"intercept.v1": WEB_INTERCEPT}
    assert services["db"]["config"] == {}
    # the query parameter (repeated, names or ids) replaces the session's choice for a list
    services = _by_name(by_name.get(f"/services?configTypes={HOST}&configTypes=nope"))
    assert services["web"]["config"] == {} and services["db"]["config"] == {"host.v1": DB_HOST}
    services = _by_name(by_name.get("/services?configTypes=all"))
    assert services["db"]["config"] == {"host.v1": DB_HOST}
    # a detail uses the session's types only
    detail = by_name.get(f"/services/{net.db}?configTypes=all").json()["data"]
    assert detail["config"] == {}
    # nothing asked for: lists show an empty map, details null
    plain = net.login(net.alice)
    assert _by_name(plain.get("/services"))["web"]["config"] == {}
    assert plain.get(f"/services/{net.web}").json()["data"]["config"] is None


def test_identity_override_replaces_the_service_config_of_its_type(net):
    other = net.admin.create("configs", {"name": "web-intercept-2", "configTypeId": INTERCEPT,
                                         "data": {**WEB_INTERCEPT, "addresses": ["alt.ziti"]}})
    r = net.admin.post(f"/identities/{net.alice[0]}/service-configs", json=[{"serviceId": net.web, "configId": other}])
    assert r.status_code == 200, r.text
    web = _by_name(net.login(net.alice, configTypes=["all"]).get("/services"))["web"]
    assert web["config"]["intercept.v1"]["addresses"] == ["alt.ziti"]
    bob_web = _by_name(net.login(net.bob, configTypes=["all"]).get("/services"))["web"]
    assert bob_web["config"]["intercept.v1"]["addresses"] == ["web.ziti"]


def test_filter_and_paging(net):
    alice = net.login(net.alice)
    assert set(_by_name(alice.get('/services?filter=name="db"'))) == {"db"}
    page = alice.get("/services?limit=1&offset=1").json()
    assert page["meta"]["pagination"]["totalCount"] == 2 and len(page["data"]) == 1
    assert_error(alice.get("/services?filter=name=="), 400, "INVALID_FILTER")


def test_detail_is_404_for_a_service_not_granted(net):
    alice = net.login(net.alice)
    assert alice.get(f"/services/{net.web}").json()["data"]["permissions"] == ["Dial"]
    assert_error(alice.get(f"/services/{net.hidden}"), 404, "NOT_FOUND")
    assert_error(alice.get("/services/nope"), 404, "NOT_FOUND")


def test_identity_without_policies_sees_nothing(net):
    loner = add_identity(net.admin, "loner", attrs=())
    r = net.login(loner).get("/services")
    assert r.json()["data"] == [] and r.json()["meta"]["pagination"]["totalCount"] == 0


def test_admin_sees_every_service_with_invalid_permissions(net):
    admin_client = net.admin.as_prefix(CLIENT)
    services = _by_name(admin_client.get("/services"))
    assert set(services) == {"web", "db", "hidden"}
    assert services["hidden"]["permissions"] == ["Invalid"]
    assert services["hidden"]["postureQueries"][0]["policyId"] == "dummy invalid policy: no posture checks defined"


def test_management_as_identity(net):
    r = net.admin.get(f"/services?asIdentity=alice&configTypes={INTERCEPT},{HOST}")
    services = _by_name(r)
    assert set(services) == {"web", "db"}
    assert services["web"]["permissions"] == ["Dial"] and services["db"]["config"] == {"host.v1": DB_HOST}
    assert_error(net.admin.get("/services?asIdentity=nobody"), 404, "NOT_FOUND")
    # without asIdentity an admin sees everything, as itself
    assert _by_name(net.admin.get("/services"))["web"]["permissions"] == ["Invalid"]


def test_service_writes_are_not_implemented_on_the_client_api(net):
    admin_client = net.admin.as_prefix(CLIENT)
    for method in ("PUT", "PATCH", "DELETE"):
        r = admin_client.request(method, f"/services/{net.web}", json={"name": "x"})
        assert r.status_code == 501 and isinstance(r.json(), str)
    assert net.admin.get(f"/services/{net.web}").json()["data"]["name"] == "web"


def test_service_edge_routers_and_terminators(net):
    alice = net.login(net.alice)
    r = alice.get(f"/services/{net.web}/edge-routers")
    assert r.status_code == 200, r.text
    (er,) = r.json()["data"]["edgeRouters"]
    assert er["name"] == "er1" and er["isOnline"] is False and er["syncStatus"] == "SYNC_UNKNOWN"
    assert er["supportedProtocols"] == {} and "urls" not in er
    assert_error(alice.get(f"/services/{net.hidden}/edge-routers"), 404, "NOT_FOUND")
    assert_error(alice.get(f"/services/{net.web}/edge-routers", headers={"session-token": "bogus"}),
                 401, "UNAUTHORIZED")

    tid = net.admin.create("terminators", {"service": net.web, "router": net.router, "binding": "transport",
                                           "address": "tcp:localhost:80", "identity": "inst-1"})
    net.admin.create("terminators", {"service": net.db, "router": net.router, "binding": "transport",
                                     "address": "tcp:localhost:5432"})
    r = alice.get(f"/services/{net.web}/terminators")
    assert r.status_code == 200, r.text
    (t,) = r.json()["data"]
    assert t["id"] == tid and t["identity"] == "inst-1" and t["serviceId"] == net.web
    assert t["routerId"] == net.router and t["service"]["name"] == "web"
    assert "address" not in t and "binding" not in t
    assert_error(alice.get(f"/services/{net.hidden}/terminators"), 404, "NOT_FOUND")


# ------------------------------------------------------------------ the writes answer 501
def test_declared_but_unimplemented_client_operations_answer_501(client):
    from tests.conftest import CLIENT
    for method, path in (("POST", "/enroll/challenge"), ("GET", "/enroll/jwks")):
        r = client.request(method, CLIENT + path)
        assert r.status_code == 501, (path, r.text)
        assert "has not yet been implemented" in r.json()


def test_a_demoted_default_admin_sees_services_through_policies_only(net):
    # upstream: the default admin keeps management access with isAdmin false, but its client
    # service list then follows the policies, as any identity's
    admin = net.admin
    me = admin.as_prefix(CLIENT).get("/current-identity").json()["data"]["id"]
    every = {s["id"] for s in admin.as_prefix(CLIENT).get("/services?limit=-1").json()["data"]}
    assert admin.patch(f"/identities/{me}", json={"isAdmin": False}).status_code == 200
    try:
        assert admin.get("/identities").status_code == 200   # still manages the network
        granted = {s["id"] for s in admin.get(f"/identities/{me}/services?limit=-1").json()["data"]}
        listed = {s["id"] for s in admin.as_prefix(CLIENT).get("/services?limit=-1").json()["data"]}
        assert listed == granted and net.hidden in every and net.hidden not in listed
    finally:
        assert admin.patch(f"/identities/{me}", json={"isAdmin": True}).status_code == 200
