"""Sessions: upstream's checks and codes, reuse per (API session, service, type), what the
response carries, who may read or delete which, and their end with the API session."""

from __future__ import annotations

import jwt

from tests.client.conftest import mgmt
from tests.conftest import CLIENT, assert_error


def _dial(api, service_id, kind="Dial"):
    return api.post("/sessions", json={"serviceId": service_id, "type": kind})


def test_dial_session_for_a_granted_service(net):
    alice = net.login(net.alice)
    r = _dial(alice, net.web)
    assert r.status_code == 201, r.text
    s = r.json()["data"]
    assert r.json()["meta"] == {}
    assert s["id"].startswith("c") and len(s["token"]) == 36   # no real router: v1.3.3's opaque token
    assert s["serviceId"] == net.web and s["service"]["name"] == "web" and s["type"] == "Dial"
    assert s["identityId"] == net.alice[0] and s["apiSessionId"] == s["apiSession"]["id"]
    assert s["apiSession"]["entity"] == "api-sessions" and "name" not in s["apiSession"]
    assert s["_links"]["route-path"]["href"] == f"./sessions/{s['id']}/route-path"
    (er,) = s["edgeRouters"]
    assert er["name"] == "er1" and "id" not in er
    assert er["urls"] == er["supportedProtocols"] == {}
    assert {"hostname", "syncStatus", "isOnline", "cost", "noTraversal", "disabled"} <= set(er)
    # the same API session asking again gets the same session
    again = _dial(alice, net.web).json()["data"]
    assert (again["id"], again["token"]) == (s["id"], s["token"])
    # type defaults to Dial
    assert alice.post("/sessions", json={"serviceId": net.web}).json()["data"]["id"] == s["id"]
    # another API session of the same identity gets its own
    other = _dial(net.login(net.alice), net.web).json()["data"]
    assert other["id"] != s["id"]


def test_where_a_v2_router_may_carry_it_the_token_is_a_service_access_jwt(net, ctl):
    """A real router enrolled and not seen since start, or one of v2.0: the session's token is the
    JWT a v2.0 router verifies (signed with the server key); once every real router said it is of
    a v1.x line, new sessions get opaque tokens again (v1 routers close only those on removal)."""
    rid = net.admin.post("/edge-routers", json={"name": "jwt-site"}).json()["data"]["id"]
    with ctl.store.write():
        ctl.store.execute("UPDATE routers SET fingerprint = 'ab' || id, is_verified = 1 WHERE id = ?", (rid,))
    alice = net.login(net.alice)
    s = _dial(alice, net.web).json()["data"]
    head, claims = jwt.get_unverified_header(s["token"]), jwt.decode(s["token"], options={"verify_signature": False})
    assert head["typ"] == "JWT" and len(head["kid"]) == 40
    assert claims["jti"] == s["id"] and claims["sub"] == net.web and claims["z_asid"] == s["apiSessionId"]
    assert (claims["z_iid"], claims["z_t"], claims["z_st"], claims["z_leg"]) == (net.alice[0], "s", "Dial", True)
    assert claims["aud"] == ["openziti"] and claims["exp"] - claims["iat"] == 365 * 24 * 3600
    ctl.router_lines[rid] = "v1.6.20"
    try:
        assert len(_dial(net.login(net.alice), net.web).json()["data"]["token"]) == 36
        ctl.router_lines[rid] = "v2.0.3"
        assert _dial(net.login(net.alice), net.web).json()["data"]["token"].startswith("ey")
    finally:
        del ctl.router_lines[rid]


def test_refusals_use_upstreams_codes(net):
    alice = net.login(net.alice)
    assert_error(_dial(alice, net.hidden), 404, "NOT_FOUND")
    assert_error(_dial(alice, "no-such-service"), 404, "NOT_FOUND")
    err = assert_error(_dial(alice, net.web, "Bind"), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "ServiceId" and err["cause"]["reason"] == "service not found"
    assert_error(_dial(alice, net.db, "Dial"), 400, "COULD_NOT_VALIDATE")
    assert _dial(alice, net.db, "Bind").status_code == 201
    assert_error(alice.post("/sessions", json={"serviceId": net.web, "type": "Sideways"}), 400, "COULD_NOT_VALIDATE")
    assert_error(alice.post("/sessions", content=b"{nope"), 400, "COULD_NOT_PARSE_BODY")


def test_no_common_edge_router(net):
    admin = net.admin
    lonely = admin.create("services", {"name": "lonely", "encryptionRequired": True, "roleAttributes": ["web"]})
    # take the service off the routers' policy: the SERP now selects only the other services
    serp = admin.get('/service-edge-router-policies?filter=name="serp-all"').json()["data"][0]["id"]
    r = admin.patch(f"/service-edge-router-policies/{serp}", json={"serviceRoles": ["@" + net.web, "@" + net.db]})
    assert r.status_code == 200, r.text
    err = assert_error(_dial(net.login(net.alice), lonely), 400, "NO_EDGE_ROUTERS_AVAILABLE")
    assert "No edge routers" in err["message"]


def test_admin_needs_a_policy_too(net):
    admin_client = net.admin.as_prefix(CLIENT)
    assert_error(_dial(admin_client, net.hidden), 400, "COULD_NOT_VALIDATE")


def test_list_detail_delete_own_sessions(net):
    alice, bob = net.login(net.alice), net.login(net.bob)
    a = _dial(alice, net.web).json()["data"]
    b = _dial(bob, net.web).json()["data"]
    listed = alice.get("/sessions").json()
    assert [s["id"] for s in listed["data"]] == [a["id"]]
    assert listed["meta"]["pagination"]["totalCount"] == 1
    detail = alice.get(f"/sessions/{a['id']}").json()["data"]
    assert detail["token"] == a["token"] and detail["servicePolicies"] == []
    assert detail["edgeRouters"][0]["name"] == "er1"
    # another identity's session does not exist for alice
    assert_error(alice.get(f"/sessions/{b['id']}"), 404, "NOT_FOUND")
    assert_error(alice.delete(f"/sessions/{b['id']}"), 404, "NOT_FOUND")
    # the management API's sessions are an operator's (permission ops): alice holds none
    assert_error(mgmt(alice).get(f"/sessions/{b['id']}"), 401, "UNAUTHORIZED")
    assert bob.get(f"/sessions/{b['id']}").status_code == 200
    # the admin sees both, on either API
    ids = {s["id"] for s in net.admin.get("/sessions").json()["data"]}
    assert ids == {a["id"], b["id"]}
    assert (
        net.admin.get(f'/sessions?filter=service="{net.web}" and type="Dial"').json()["meta"]["pagination"][
            "totalCount"
        ]
        == 2
    )
    assert net.admin.get(f"/sessions/{b['id']}/route-path").json() == {"data": {"routePath": []}, "meta": {}}
    r = alice.delete(f"/sessions/{a['id']}")
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    assert_error(alice.get(f"/sessions/{a['id']}"), 404, "NOT_FOUND")
    assert net.admin.delete(f"/sessions/{b['id']}").status_code == 200


def test_sessions_end_with_their_api_session(net, ctl):
    alice = net.login(net.alice)
    s = _dial(alice, net.web).json()["data"]
    assert alice.delete("/current-api-session").status_code == 200
    assert_error(net.admin.get(f"/sessions/{s['id']}"), 404, "NOT_FOUND")
    # an admin deleting the API session, or the service going away, ends them as well
    alice = net.login(net.alice)
    s = _dial(alice, net.web).json()["data"]
    assert net.admin.delete(f"/api-sessions/{s['apiSessionId']}").status_code == 200
    assert_error(net.admin.get(f"/sessions/{s['id']}"), 404, "NOT_FOUND")
    alice = net.login(net.alice)
    s = _dial(alice, net.db, "Bind").json()["data"]
    assert net.admin.delete(f"/services/{net.db}").status_code == 200
    assert ctl.store.value("SELECT count(*) FROM sessions") == 0


def test_identity_presence(net):
    assert net.admin.get(f"/identities/{net.alice[0]}").json()["data"]["hasApiSession"] is False
    alice = net.login(
        net.alice,
        envInfo={"os": "linux", "arch": "amd64", "hostname": "box"},
        sdkInfo={"type": "ziti-sdk-golang", "version": "0.23.1", "appId": "demo"},
    )
    ident = net.admin.get(f"/identities/{net.alice[0]}").json()["data"]
    assert ident["hasApiSession"] is True
    assert ident["envInfo"] == {"os": "linux", "arch": "amd64", "hostname": "box"}
    assert ident["sdkInfo"] == {"type": "ziti-sdk-golang", "version": "0.23.1", "appId": "demo"}
    alice.delete("/current-api-session")
    assert net.admin.get(f"/identities/{net.alice[0]}").json()["data"]["hasApiSession"] is False


def test_a_session_goes_when_its_policy_access_does(net):
    # upstream deletes a session as soon as no policy of its type grants it any more
    alice = net.login(net.alice)
    sid = alice.post("/sessions", json={"serviceId": net.web, "type": "Dial"}).json()["data"]["id"]
    assert [s["id"] for s in net.admin.get("/sessions").json()["data"]] == [sid]
    policies = net.admin.get(f"/services/{net.web}/service-policies").json()["data"]
    dial = [p for p in policies if p["type"] == "Dial"]
    for p in dial:
        assert net.admin.delete(f"/service-policies/{p['id']}").status_code == 200
    assert net.admin.get("/sessions").json()["data"] == []


def test_a_session_goes_when_its_identity_leaves_the_policy(net):
    alice = net.login(net.alice)
    alice.post("/sessions", json={"serviceId": net.web, "type": "Dial"})
    assert net.admin.get("/sessions").json()["meta"]["pagination"]["totalCount"] == 1
    assert net.admin.patch(f"/identities/{net.alice[0]}", json={"name": "alice-renamed"}).status_code == 200
    assert net.admin.get("/sessions").json()["meta"]["pagination"]["totalCount"] == 1   # still granted
    assert net.admin.patch(f"/identities/{net.alice[0]}", json={"roleAttributes": ["nothing"]}).status_code == 200
    assert net.admin.get("/sessions").json()["meta"]["pagination"]["totalCount"] == 0
