"""edge.apiSessions and edge.sessions events from their rows, whatever path writes them, with
upstream's field names; a token appears only as its session's id."""

from __future__ import annotations

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, MGMT, Api

# upstream v1.3.3 (controller/event/api_session.go, session.go), by JSON name
API_SESSION_FIELDS = {"namespace", "event_type", "event_src_id", "id", "type", "timestamp", "token", "identity_id",
                      "ip_address"}
SESSION_FIELDS = {"namespace", "event_type", "event_src_id", "session_type", "id", "timestamp", "token",
                  "api_session_id", "identity_id", "service_id"}


def test_login_and_logout_are_api_session_events(served):
    client, admin, events = served
    session = admin.login(ADMIN_USER, ADMIN_PASSWORD)
    me = session.get("/current-api-session").json()["data"]
    assert session.delete("/current-api-session").status_code == 200
    client.__exit__(None, None, None)
    created = events.of("edge.apiSessions", event_type="created", id=me["id"])
    deleted = events.of("edge.apiSessions", event_type="deleted", id=me["id"])
    assert len(created) == 1 and len(deleted) == 1
    for e in created + deleted:
        assert set(e) == API_SESSION_FIELDS
        assert e["token"] == me["id"] and e["type"] == "legacy"
        assert e["identity_id"] == me["identityId"] and e["ip_address"] == me["ipAddress"]
    assert session.token not in events.path.read_text()


def test_sessions_and_cascades(served):
    client, admin, events = served
    sid = admin.create("services", {"name": "web", "encryptionRequired": True})
    admin.create("edge-routers", {"name": "er1", "roleAttributes": ["public"]})   # the default policies reach it
    uid = admin.create("identities", {"name": "dana", "type": "User", "isAdmin": False, "roleAttributes": ["u"]})
    admin.create("authenticators", {"method": "updb", "identityId": uid, "username": "dana", "password": "Passw0rd-d"})
    admin.create("service-policies", {"name": "dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#u"], "serviceRoles": ["@" + sid]})
    r = client.post(CLIENT + "/authenticate?method=password", json={"username": "dana", "password": "Passw0rd-d"})
    user = Api(client, CLIENT, r.json()["data"]["token"])
    r = user.post("/sessions", json={"serviceId": sid, "type": "Dial"})
    assert r.status_code == 201, r.text
    session = r.json()["data"]
    # deleting the identity cascades to its API session and session: both are announced
    assert admin.delete(f"/identities/{uid}").status_code == 200
    client.__exit__(None, None, None)
    made = events.of("edge.sessions", event_type="created", id=session["id"])
    gone = events.of("edge.sessions", event_type="deleted", id=session["id"])
    assert len(made) == 1 and len(gone) == 1
    for e in made + gone:
        assert set(e) == SESSION_FIELDS
        assert e["session_type"] == "Dial" and e["service_id"] == sid and e["identity_id"] == uid
        assert e["token"] == session["id"]
    assert events.of("edge.apiSessions", event_type="deleted", identity_id=uid)
    text = events.path.read_text()
    assert session["token"] not in text and user.token not in text


def test_authentication_success_and_failure(served):
    client, admin, events = served
    admin.login(ADMIN_USER, ADMIN_PASSWORD)
    r = client.post(MGMT + "/authenticate?method=password", json={"username": ADMIN_USER, "password": "wrong-pass"})
    assert r.status_code == 401
    client.__exit__(None, None, None)
    ok = events.of("authentication", event_type="success")
    bad = events.of("authentication", event_type="fail")
    assert len(ok) == 1 and len(bad) == 1
    fields = {"namespace", "event_src_id", "timestamp", "event_type", "type", "authenticator_id",
              "external_jwt_signer_id", "identity_id", "auth_policy_id", "remote_address", "success", "reason",
              "improper_client_cert_chain"}
    assert set(ok[0]) == fields and set(bad[0]) == fields
    assert ok[0]["type"] == "updb" and ok[0]["success"] is True and ok[0]["identity_id"]
    assert bad[0]["success"] is False and bad[0]["reason"] == "INVALID_AUTH"
    assert bad[0]["identity_id"] == ok[0]["identity_id"]          # known by its username
    assert bad[0]["remote_address"] == "testclient"
    assert "wrong-pass" not in events.path.read_text()
