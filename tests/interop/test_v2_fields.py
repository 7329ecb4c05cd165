"""Issue 38's parts 5 and 6 against the real controller v2.0.3: the same requests to a
``ziti edge quickstart`` of v2.0.3 and to ziti-lite, their answers reduced to what the parts
define (statuses, causes, which fields a detail carries and their values where both controllers
must agree) and compared. A difference kept on purpose is a row of ``differences.tsv`` whose step
starts with ``v2 `` (this test reads those and fails on a stale one).

The controller settings' seven operations (a session, a user without permissions, none, no
body); routers' and edge routers' ctrlChanListeners, configs and interfaces through create, PUT
and PATCH (and the fabric API's routers); config types' target; /controllers on both APIs; an MFA
check's posture query in the client's service list.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.interop.conftest import start_quickstart
from tests.interop.test_differential import TABLE, assert_documented, read_table
from ziti_lite import testing

pytestmark = pytest.mark.interop

V2 = "v2.0.3"
ROW_PREFIX = "v2 "
MGMT, CLIENT = "/edge/management/v1", "/edge/client/v1"
SETTINGS = [("GET", "/controller-settings", None), ("POST", "/controller-settings", {"controllerId": "c1"}),
            ("GET", "/controller-settings/x", None), ("GET", "/controller-settings/x/effective", None),
            ("PUT", "/controller-settings/x/effective", {"oidc": {"redirectUris": ["https://a.test/cb"]}}),
            ("PATCH", "/controller-settings/x/effective", {"tags": {"a": 1}}),
            ("DELETE", "/controller-settings/x/effective", None)]
CCL = {"tls:10.0.0.1:6262": ["ctrl.default", "ctrl.high"]}


class Side:
    def __init__(self, url: str, user: str, password: str):
        self.http = httpx.Client(base_url=url, verify=False, timeout=30)  # noqa: S501 - loopback, fresh PKI
        self.admin = self.login(user, password)

    def login(self, user: str, password: str) -> str:
        r = self.http.post(MGMT + "/authenticate?method=password", json={"username": user, "password": password})
        assert r.status_code == 200, r.text
        return r.json()["data"]["token"]

    def req(self, method: str, path: str, body: Any = None, token: str | None = "admin", prefix: str = MGMT,
            raw: bool = False) -> httpx.Response:
        headers = {} if token is None else {"zt-session": self.admin if token == "admin" else token}
        if raw:
            return self.http.request(method, prefix + path, headers=headers)
        return self.http.request(method, prefix + path, json=body, headers=headers)

    def create(self, path: str, body: dict) -> str:
        r = self.req("POST", path, body)
        assert r.status_code == 201, r.text
        return r.json()["data"]["id"]

    def user(self) -> str:
        iid = self.create("/identities", {"name": "v2f-user", "type": "User", "isAdmin": False})
        self.create("/authenticators", {"method": "updb", "identityId": iid, "username": "v2f-user",
                                        "password": "Passw0rd-1"})
        return self.login("v2f-user", "Passw0rd-1")


def _error(r: httpx.Response) -> dict:
    body = r.json()
    if not isinstance(body, dict):
        return {"status": r.status_code, "body": body}
    err = body.get("error") or {}
    cause = err.get("cause") or {}
    return {"status": r.status_code, "code": err.get("code"), "field": cause.get("field"),
            "reason": cause.get("reason")}


def _v2_fields(d: dict) -> dict:
    return {k: d.get(k, "<absent>") for k in ("ctrlChanListeners", "configs", "interfaces")}


# ------------------------------------------------------------------ the script, run on each side
def observe(s: Side) -> dict[str, Any]:
    out: dict[str, Any] = {}
    user = s.user()
    for method, path, body in SETTINGS:
        out[f"controller-settings {method} {path}"] = _error(s.req(method, path, body))
        out[f"controller-settings as a user {method} {path}"] = _error(s.req(method, path, body, token=user))
        out[f"controller-settings without a session {method} {path}"] = _error(s.req(method, path, body, token=None))
        if body is not None:
            out[f"controller-settings without a body {method} {path}"] = _error(s.req(method, path, raw=True))
    out["controller-settings bad body"] = _error(s.req("POST", "/controller-settings", {"oidc": {}}))

    for collection, views in (("edge-routers", ("edge-routers", "routers")), ("routers", ("routers",))):
        full = s.create(f"/{collection}", {"name": f"v2f-{collection}", "ctrlChanListeners": CCL,
                                           "configs": ["no-such-config"]})
        bare = s.create(f"/{collection}", {"name": f"v2f-{collection}-bare"})
        for view in views:
            out[f"{collection} full as {view}"] = _v2_fields(s.req("GET", f"/{view}/{full}").json()["data"])
            out[f"{collection} bare as {view}"] = _v2_fields(s.req("GET", f"/{view}/{bare}").json()["data"])
        fabric = s.req("GET", f"/routers/{full}", prefix="/fabric/v1").json()["data"]
        out[f"{collection} full on the fabric API"] = _v2_fields(fabric)
        for step, method, id, body in (("tags patch", "PATCH", full, {"tags": {"a": 1}}),
                                       ("put without", "PUT", full, {"name": f"v2f-{collection}"}),
                                       ("patch sets", "PATCH", bare, {"ctrlChanListeners": {"tls:b:1": []}}),
                                       ("patch empties", "PATCH", full, {"ctrlChanListeners": {}})):
            r = s.req(method, f"/{collection}/{id}", body)
            out[f"{collection} {step}"] = {"status": r.status_code,
                                           **_v2_fields(s.req("GET", f"/{collection}/{id}").json()["data"])}
        for name, body in (("listeners not a list", {"ctrlChanListeners": {"tls:1": "x"}}),
                           ("configs not a list", {"configs": "x"})):
            out[f"{collection} {name}"] = _error(s.req("POST", f"/{collection}", {"name": "v2f-bad", **body}))

    out["config type bad target"] = _error(s.req("POST", "/config-types", {"name": "v2f-ct0", "target": "nope"}))
    for target in ("router", "service", None):
        r = s.req("POST", "/config-types", {"name": f"v2f-ct-{target}", "target": target})
        detail = s.req("GET", f"/config-types/{r.json()['data']['id']}").json()["data"]
        out[f"config type target {target}"] = {"status": r.status_code, "target": detail.get("target", "<absent>")}
    out["config type filter on target"] = _error(s.req("GET", '/config-types?filter=target="router"'))

    for api, prefix in (("management", MGMT), ("client", CLIENT)):
        body = s.req("GET", "/controllers", prefix=prefix).json()
        (c,) = body["data"]
        out[f"controllers {api}"] = {
            "keys": sorted(c), "apiAddresses": sorted(c["apiAddresses"]), "isOnline": c["isOnline"],
            "versions": sorted({a["version"] for v in c["apiAddresses"].values() for a in v}),
            "filterable": sorted(body["meta"]["filterableFields"]), "total": body["meta"]["pagination"]["totalCount"]}
        out[f"controllers {api} isPreferredLeader filter"] = len(
            s.req("GET", "/controllers?filter=isPreferredLeader=false", prefix=prefix).json()["data"])

    s.create("/posture-checks", {"name": "v2f-mfa", "typeId": "MFA", "timeoutSeconds": 60, "promptOnWake": True,
                                 "roleAttributes": ["v2f-mfa"]})
    s.create("/posture-checks", {"name": "v2f-mfa-nt", "typeId": "MFA", "timeoutSeconds": -1,
                                 "promptOnUnlock": True, "roleAttributes": ["v2f-mfa-nt"]})
    for svc, check in (("v2f-svc", "#v2f-mfa"), ("v2f-svc-nt", "#v2f-mfa-nt")):
        s.create("/services", {"name": svc, "encryptionRequired": True, "roleAttributes": [svc]})
        s.create("/service-policies", {"name": svc, "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#all"],
                                       "serviceRoles": [f"#{svc}"], "postureCheckRoles": [check]})
        data = s.req("GET", f'/services?filter=name="{svc}"', token=user, prefix=CLIENT).json()["data"]
        (q,) = data[0]["postureQueries"][0]["postureQueries"]
        out[f"posture query {svc}"] = {"keys": sorted(q), "timeout": q["timeout"],
                                       "timeoutRemaining": q["timeoutRemaining"]}
    return out


def test_parts_5_and_6_answer_as_openziti_v2(ziti2, ziti_lite_template, tmp_path):
    lite = testing.start(ziti_lite_template.copy(tmp_path / "v2f.db"), ziti_lite_template.admin_password)
    real = None
    try:
        real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
        sides = [Side(real.url, real.admin_user, real.admin_password), Side(lite.url, lite.admin_user,
                                                                             lite.admin_password)]
        try:
            upstream, ours = observe(sides[0]), observe(sides[1])
        finally:
            for side in sides:
                side.http.close()
    finally:
        lite.stop()
        if real is not None:
            real.stop()
    found = []
    for step in upstream:
        a, b = upstream[step], ours[step]
        for kind in sorted(set(a) | set(b)) if isinstance(a, dict) else ["value"]:
            x, y = (a.get(kind), b.get(kind)) if isinstance(a, dict) else (a, b)
            if x != y:
                found.append((ROW_PREFIX + step, kind, f"{x} {y}"))
    table = [d for d in read_table(TABLE) if d.step.startswith(ROW_PREFIX)]
    assert_documented(found, table)
