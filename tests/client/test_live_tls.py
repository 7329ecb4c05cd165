"""End to end over real TLS, as an SDK does it: enroll, log in with the certificate asking for
all config types, list the granted services, dial, watch service updates, log out."""

from __future__ import annotations

import pytest

from tests.client.conftest import DB_HOST, HOST, INTERCEPT, WEB_INTERCEPT
from tests.conftest import CLIENT
from tests.enroll.conftest import csr
from ziti_lite import clock

pytestmark = pytest.mark.slow   # a live server over TLS


def _network(admin) -> dict:
    ids = {"router": admin.create("edge-routers", {"name": "live-er", "roleAttributes": ["public"]})}
    admin.create("edge-router-policies", {"name": "live-erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                          "edgeRouterRoles": ["#public"]})
    admin.create("service-edge-router-policies", {"name": "live-serp", "semantic": "AnyOf", "serviceRoles": ["#all"],
                                                  "edgeRouterRoles": ["#public"]})
    web_cfg = admin.create("configs", {"name": "live-web", "configTypeId": INTERCEPT, "data": WEB_INTERCEPT})
    db_cfg = admin.create("configs", {"name": "live-db", "configTypeId": HOST, "data": DB_HOST})
    ids["web"] = admin.create("services", {"name": "live-web", "encryptionRequired": True, "roleAttributes": ["web"],
                                           "configs": [web_cfg]})
    ids["db"] = admin.create("services", {"name": "live-db", "encryptionRequired": True, "roleAttributes": ["db"],
                                          "configs": [db_cfg]})
    ids["hidden"] = admin.create("services", {"name": "live-hidden", "encryptionRequired": True})
    admin.create("service-policies", {"name": "live-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#device"], "serviceRoles": ["#web"]})
    admin.create("service-policies", {"name": "live-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": ["#device"], "serviceRoles": ["#db"]})
    return ids


def test_enrolled_identity_lists_dials_watches_and_logs_out(live, keys):
    admin = live.admin()
    net = _network(admin)
    iid = admin.create("identities", {"name": "live-device", "type": "Device", "isAdmin": False,
                                      "roleAttributes": ["device"], "enrollment": {"ott": True}})
    token = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["token"]
    r = live.client().post(f"/enroll?method=ott&token={token}", content=csr(keys[5], iid),
                           headers={"content-type": "text/plain", "accept": "application/json"})
    assert r.status_code == 200, r.text
    chain = r.json()["data"]["cert"]

    sdk = live.client(chain, keys[5])
    r = sdk.post("/authenticate?method=cert", json={"configTypes": ["all"], "sdkInfo": {"type": "ziti-sdk-c",
                                                                                        "version": "0.29.0"}})
    assert r.status_code == 200, r.text
    h = {"zt-session": r.json()["data"]["token"]}
    assert r.json()["data"]["configTypes"] == ["all"]

    r = sdk.get(CLIENT + "/services?limit=25&offset=0", headers=h)
    assert r.status_code == 200 and r.headers["ziti-instance-id"]
    services = {s["name"]: s for s in r.json()["data"]}
    assert set(services) == {"live-web", "live-db"}
    assert services["live-web"]["config"] == {"intercept.v1": WEB_INTERCEPT}
    assert services["live-db"]["config"] == {"host.v1": DB_HOST}
    assert services["live-web"]["permissions"] == ["Dial"] and services["live-db"]["permissions"] == ["Bind"]

    r = sdk.post(CLIENT + "/sessions", json={"serviceId": net["web"], "type": "Dial"}, headers=h)
    assert r.status_code == 201, r.text
    session = r.json()["data"]
    assert session["edgeRouters"][0]["name"] == "live-er"
    r = sdk.post(CLIENT + "/sessions", json={"serviceId": net["db"], "type": "Dial"}, headers=h)
    assert r.status_code == 400 and r.json()["error"]["code"] == "COULD_NOT_VALIDATE"
    r = sdk.post(CLIENT + "/sessions", json={"serviceId": net["hidden"], "type": "Dial"}, headers=h)
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"

    before = sdk.get(CLIENT + "/current-api-session/service-updates", headers=h).json()["data"]["lastChangeAt"]
    clock.advance(1)
    admin.create("service-policies", {"name": "live-dial-hidden", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["@" + iid], "serviceRoles": ["@" + net["hidden"]]})
    after = sdk.get(CLIENT + "/current-api-session/service-updates", headers=h).json()["data"]["lastChangeAt"]
    assert after > before
    names = {s["name"] for s in sdk.get(CLIENT + "/services", headers=h).json()["data"]}
    assert names == {"live-web", "live-db", "live-hidden"}

    assert sdk.delete(CLIENT + "/current-api-session", headers=h).status_code == 200
    r = admin.get(f"/sessions/{session['id']}")
    assert r.status_code == 404
    assert admin.get(f"/identities/{iid}").json()["data"]["hasApiSession"] is False
