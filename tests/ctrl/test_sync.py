"""What a router is told of API sessions and sessions, against a pure-Python router: the full
state when it comes online, logins and logouts as they happen, its heartbeat keeping API
sessions alive, its session validation after a reconnect; and what the API says of it."""

from __future__ import annotations

import time
from types import SimpleNamespace

import jwt
import pytest

from tests.ctrl.conftest import enroll_router
from tests.ctrl.fake_router import f_int, f_str, read_pb
from tests.ctrl.test_terminators import Identity
from tests.edge.test_router_oidc import OidcWho

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


def api_sessions(m) -> list[dict]:
    out = []
    for raw in read_pb(m.body).get(2, []):
        f = read_pb(raw)
        out.append({"token": f[1][0].decode(), "fingerprints": [x.decode() for x in f.get(2, [])],
                    "id": f[3][0].decode(), "identity": f[4][0].decode()})
    return out


def test_full_state_then_logins_and_logouts_as_they_happen(live):
    admin = live.admin()
    who = Identity(live, admin, "sync-who", [])
    router = enroll_router(live, admin, "sync-router")
    r = router.online()
    full = r.expect(20200)
    assert read_pb(full.body).get(1, [0])[0] == 1                        # isFullState
    assert full.headers[1013] == b"instant" and b'"isLast": true' in full.headers[1014]
    mine = [s for s in api_sessions(full) if s["token"] == who.token]
    assert mine and who.fingerprint in mine[0]["fingerprints"] and mine[0]["identity"] == who.id
    # a new login reaches the router within a tick
    t0 = time.monotonic()
    http, reply = live.cert_login(who.cert, who.key)
    token = reply.json()["data"]["token"]
    added = r.expect(20200, where=lambda m: any(s["token"] == token for s in api_sessions(m)))
    assert read_pb(added.body).get(1, [0])[0] == 0 and time.monotonic() - t0 < 1.0
    # a real router ending a sync drops what it holds at or below the sync's highest id and not in
    # it: a login made meanwhile survives only because its id sorts above all of the full state's
    new = [s["id"] for s in api_sessions(added) if s["token"] == token]
    assert new and new[0] > max(s["id"] for s in api_sessions(full))
    # logout: removed
    assert http.delete("/edge/client/v1/current-api-session", headers={"zt-session": token}).status_code == 200
    removed = r.expect(20202, where=lambda m: token in [v.decode() for v in read_pb(m.body).get(1, [])])
    assert removed
    r.close()


def test_the_routers_heartbeat_keeps_api_sessions_alive_and_sessions_are_validated(live):
    admin = live.admin()
    who = Identity(live, admin, "sync-alive", [])
    r = enroll_router(live, admin, "sync-alive-router").online()
    r.expect(20200)
    before = live.ctl.activity.get(who.token, "")
    time.sleep(0.01)
    r.send(20203, {}, f_str(1, who.token) + f_str(1, "not-a-known-token"))
    deadline = time.monotonic() + 3
    while live.ctl.activity.get(who.token, "") <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.ctl.activity.get(who.token, "") > before
    assert "not-a-known-token" not in live.ctl.activity
    svc = admin.create("services", {"name": "sync-svc", "encryptionRequired": False})
    admin.create("service-policies", {"name": "sync-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": [f"@{who.id}"], "serviceRoles": [f"@{svc}"]})
    kept = who.session(svc, "Dial")["token"]
    r.send(20213, {}, f_str(1, kept) + f_str(1, "gone-session-token"))
    removed = r.expect(20102)
    assert [v.decode() for v in read_pb(removed.body).get(1, [])] == ["gone-session-token"]
    r.close()


def test_policy_advice_and_session_routers_see_a_real_router(live):
    admin = live.admin()
    who = Identity(live, admin, "advice-who", ["advice"])
    svc = admin.create("services", {"name": "advice-svc", "encryptionRequired": False})
    admin.create("service-policies", {"name": "advice-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#advice"], "serviceRoles": [f"@{svc}"]})
    router = enroll_router(live, admin, "advice-router")

    def advice_online() -> dict:
        data = admin.get(f"/identities/{who.id}/policy-advice/{svc}").json()["data"]
        return {r["name"]: r["isOnline"] for r in data["commonRouters"]}
    assert advice_online()["advice-router"] is False
    r = router.online(edge_port=4999)
    deadline = time.monotonic() + 3
    while not advice_online()["advice-router"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert advice_online()["advice-router"] is True
    session = who.session(svc, "Dial")
    listed = {e["name"]: e for e in session["edgeRouters"]}
    assert listed["advice-router"]["supportedProtocols"] == {"tls": "tls://127.0.0.1:4999"}
    r.close()


def test_connect_events_show_which_identities_are_connected(live):
    admin = live.admin()
    iid = admin.create("identities", {"name": "conn-who", "type": "Device", "isAdmin": False})
    r = enroll_router(live, admin, "conn-router").online()

    def connected() -> bool:
        return admin.get(f"/identities/{iid}").json()["data"]["hasEdgeRouterConnection"]
    assert connected() is False
    event = f_str(1, iid) + f_int(2, 1)
    r.send(20415, {}, f_str(1, event) + f_int(2, 1))          # full state: connected
    deadline = time.monotonic() + 3
    while not connected() and time.monotonic() < deadline:
        time.sleep(0.05)
    detail = admin.get(f"/identities/{iid}").json()["data"]
    assert detail["hasEdgeRouterConnection"] is True and detail["edgeRouterConnectionStatus"] == "online"
    r.send(20415, {}, f_str(1, f_str(1, iid)))                # an update: disconnected
    while connected() and time.monotonic() < deadline + 3:
        time.sleep(0.05)
    assert connected() is False
    r.send(20415, {}, f_str(1, event) + f_int(2, 1))
    while not connected() and time.monotonic() < deadline + 6:
        time.sleep(0.05)
    r.close()                                                  # the router goes: so does the connection
    while connected() and time.monotonic() < deadline + 9:
        time.sleep(0.05)
    assert connected() is False


def test_a_revoked_oidc_api_session_is_removed_from_the_router(live):
    """A v1 router holds API sessions as the controller lists them: an OIDC login's too. An
    API_SESSION revocation ends that session, and the router hears ApiSessionRemoved, as after a
    logout; a legacy session of the same identity stays."""
    admin = live.admin()
    who = Identity(live, admin, "sync-revoked", [])
    router = enroll_router(live, admin, "sync-rev-router")
    r = router.online()
    r.expect(20200)
    oidc = OidcWho(live, SimpleNamespace(cert_pem=who.cert, key_pem=who.key))
    asid = jwt.decode(oidc.token, options={"verify_signature": False})["z_asid"]
    added = r.expect(20200, where=lambda m: any(s["id"] == asid for s in api_sessions(m)))
    (row_token,) = [s["token"] for s in api_sessions(added) if s["id"] == asid]
    assert admin.post("/revocations", json={"id": asid, "type": "API_SESSION"}).status_code == 201
    removed = r.expect(20202, where=lambda m: row_token in [v.decode() for v in read_pb(m.body).get(1, [])])
    assert who.token not in [v.decode() for v in read_pb(removed.body).get(1, [])]
    assert who.http.get("/edge/client/v1/current-identity", headers={"zt-session": who.token}).status_code == 200
    r.close()
