"""No secret in any event or audit row: a network is made, enrolled, logged into, given API
sessions, sessions and a password change, and then every event written and every audit row is
searched for every token, password and key used on the way."""

from __future__ import annotations

import sqlite3

from tests.conftest import CLIENT, MGMT, Api
from tests.enroll.conftest import csr, keys  # noqa: F401 - keys is a fixture

AUDIT = "/ziti-lite/v1/audit"


def test_no_secret_in_events_or_audit(served, keys):  # noqa: F811 - the fixture
    client, admin, events = served
    secrets: list[str] = [admin.token]
    # an identity enrolled with a one-time token and a CSR made from a private key
    iid = admin.create("identities", {"name": "sec-dev", "type": "Device", "isAdmin": False,
                                      "enrollment": {"ott": True}, "roleAttributes": ["sec"]})
    ott = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]
    secrets += [ott["token"], ott["jwt"], keys[0]]
    r = client.post(f"/enroll?method=ott&token={ott['token']}", content=csr(keys[0], iid),
                    headers={"content-type": "application/x-pem-file"})
    assert r.status_code == 200, r.text
    # a password identity: its password, its logins' API session tokens, a session's token
    uid = admin.create("identities", {"name": "sec-user", "type": "User", "isAdmin": False, "roleAttributes": ["sec"]})
    password = "Sec-Passw0rd-1"
    auth_id = admin.create("authenticators", {"method": "updb", "identityId": uid, "username": "sec-user",
                                              "password": password})
    secrets.append(password)
    sid = admin.create("services", {"name": "sec-svc", "encryptionRequired": True})
    admin.create("edge-routers", {"name": "sec-er", "roleAttributes": ["public"]})
    router = admin.get('/edge-routers?filter=name="sec-er"').json()["data"][0]
    secrets += [router["enrollmentJwt"], router["enrollmentToken"]]
    admin.create("service-policies", {"name": "sec-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#sec"], "serviceRoles": ["@" + sid]})
    for _ in range(2):
        r = client.post(CLIENT + "/authenticate?method=password", json={"username": "sec-user", "password": password})
        assert r.status_code == 200, r.text
        user = Api(client, CLIENT, r.json()["data"]["token"])
        secrets.append(user.token)
        r = user.post("/sessions", json={"serviceId": sid, "type": "Dial"})
        assert r.status_code == 201, r.text
        secrets.append(r.json()["data"]["token"])
    wrong = "Wrong-Passw0rd-9"
    assert client.post(CLIENT + "/authenticate?method=password",
                       json={"username": "sec-user", "password": wrong}).status_code == 401
    secrets.append(wrong)
    new_password = "Sec-Passw0rd-2"
    assert admin.patch(f"/authenticators/{auth_id}", json={"password": new_password}).status_code == 200
    secrets.append(new_password)
    # an extra admin session, then logged out
    other = admin.login()
    secrets.append(other.token)
    assert other.delete("/current-api-session").status_code == 200

    rows = admin.as_prefix("").get(AUDIT + "?limit=-1").json()["data"]
    assert len(rows) >= 10
    client.__exit__(None, None, None)
    text = events.path.read_text()
    assert len(events.lines()) >= 20
    assert {e["namespace"] for e in events.lines()} >= {"entityChange", "edge.apiSessions", "edge.sessions",
                                                       "authentication"}
    db = sqlite3.connect(admin_db(client))
    audit_text = "\n".join(" ".join(str(v) for v in row) for row in db.execute("SELECT * FROM audit_log"))
    db.close()
    key_body = keys[0].split("-----")[2].strip().splitlines()[1]   # a line of the private key's base64
    for secret in [*secrets, key_body]:
        assert secret not in text, f"a secret is in the events: {secret[:12]}..."
        assert secret not in audit_text, f"a secret is in the audit rows: {secret[:12]}..."


def admin_db(client) -> str:
    return client.app.state.controller.settings.db


def test_the_audit_list_shows_no_secret_either(admin):
    password = "List-Passw0rd-1"
    iid = admin.create("identities", {"name": "lister", "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": "lister", "password": password})
    r = admin.client.get(AUDIT + '?filter=entityType="authenticators"', headers={"zt-session": admin.token})
    (row,) = r.json()["data"]
    assert row["operation"] == "createAuthenticator" and "password" not in row["changes"]
    assert password not in r.text and admin.token not in r.text
    assert row["path"] == MGMT + "/authenticators"
