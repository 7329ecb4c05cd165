"""Posture: checks of the granting policies refuse sessions until matching posture responses
arrive; services show the checks and whether they pass; failures and posture data are kept
per identity and readable by the admin and the identity itself only."""

from __future__ import annotations

from tests.client.conftest import mgmt
from tests.conftest import MGMT, assert_error
from ziti_lite import clock
from ziti_lite.auth import mfa
from ziti_lite.policy import session_posture


def _guard_web(net, check: dict) -> tuple[str, str]:
    """Put a posture check on the policy that lets staff dial web: (check id, policy id)."""
    cid = net.admin.create("posture-checks", {**check, "roleAttributes": ["guard"]})
    pid = net.admin.get('/service-policies?filter=name="dial-web"').json()["data"][0]["id"]
    r = net.admin.patch(f"/service-policies/{pid}", json={"postureCheckRoles": ["#guard"]})
    assert r.status_code == 200, r.text
    return cid, pid


def _dial(api, service_id):
    return api.post("/sessions", json={"serviceId": service_id, "type": "Dial"})


def _respond(api, body):
    r = api.post("/posture-response", json=body)
    assert r.status_code == 201, r.text
    assert r.json() == {"data": {"services": []}, "meta": {}}


def test_mac_check_refuses_a_session_until_a_matching_response(net):
    cid, pid = _guard_web(net, {"name": "mac", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]})
    alice = net.login(net.alice)
    err = assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    assert err["cause"]["message"] == f"Failed to pass posture checks for service policies: [{pid}]"
    assert err["cause"]["data"] == {pid: [{"id": cid, "typeId": "MAC", "isPassing": False}]}
    web = alice.get(f"/services/{net.web}").json()["data"]
    (pq,) = web["postureQueries"]
    assert pq["policyId"] == pid and pq["isPassing"] is False
    (q,) = pq["postureQueries"]
    assert q["id"] == cid and q["queryType"] == "MAC" and q["isPassing"] is False
    assert q["timeout"] == -1 and q["timeoutRemaining"] == -1

    _respond(alice, {"id": cid, "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]})
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    _respond(alice, {"id": cid, "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66", "aa-bb-cc-dd-ee-ff"]})
    r = _dial(alice, net.web)
    assert r.status_code == 201, r.text
    assert net.admin.get(f"/sessions/{r.json()['data']['id']}").json()["data"]["servicePolicies"][0]["id"] == pid
    assert alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["isPassing"] is True
    # a policy without checks is unaffected: bob's db bind has no checks
    assert net.login(net.bob).post("/sessions", json={"serviceId": net.db, "type": "Bind"}).status_code == 201

    # posture that stops passing ends the session
    _respond(alice, {"id": cid, "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]})
    assert_error(net.admin.get(f"/sessions/{r.json()['data']['id']}"), 404, "NOT_FOUND")


def test_os_check_with_version_ranges(net):
    _guard_web(net, {"name": "os", "typeId": "OS", "operatingSystems": [
        {"type": "Windows", "versions": [">=10.0.19041"]}, {"type": "Linux", "versions": []}]})
    alice = net.login(net.alice)
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    bulk = alice.post(
        "/posture-response-bulk", json=[{"id": "x", "typeId": "OS", "type": "windows", "version": "10.0.17763"}]
    )
    assert bulk.status_code == 201, bulk.text
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    _respond(alice, {"id": "x", "typeId": "OS", "type": "Windows", "version": "10.0.19045", "build": "1"})
    assert _dial(alice, net.web).status_code == 201
    bob = net.login(net.bob)
    _respond(bob, {"id": "x", "typeId": "OS", "type": "Linux", "version": "6.1"})
    assert _dial(bob, net.web).status_code == 201


def test_failed_service_requests_and_posture_data(net):
    cid, pid = _guard_web(net, {"name": "domain", "typeId": "DOMAIN", "domains": ["corp.example"]})
    alice = net.login(net.alice)
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    r = net.admin.get(f"/identities/{net.alice[0]}/failed-service-requests")
    assert r.status_code == 200, r.text
    (fail,) = r.json()["data"]
    assert fail["serviceId"] == net.web and fail["serviceName"] == "web" and fail["sessionType"] == "Dial"
    assert fail["apiSessionId"] == alice.get("/current-api-session").json()["data"]["id"]
    (pf,) = fail["policyFailures"]
    assert pf["policyId"] == pid and pf["policyName"] == "dial-web"
    assert pf["checks"] == [
        {
            "postureCheckId": cid,
            "postureCheckName": "domain",
            "postureCheckType": "DOMAIN",
            "actualValue": "",
            "expectedValue": ["corp.example"],
        }
    ]

    empty = net.admin.get(f"/identities/{net.alice[0]}/posture-data").json()["data"]
    assert empty["domain"] == {"postureCheckId": "", "timedOut": False, "lastUpdatedAt": None, "domain": None}
    assert empty["os"]["build"] is None and empty["processes"] == []
    _respond(alice, {"id": cid, "typeId": "DOMAIN", "domain": "CORP.example"})
    _respond(alice, {"id": "p1", "typeId": "PROCESS", "path": "/bin/agent", "isRunning": True, "hash": "AB:CD"})
    assert _dial(alice, net.web).status_code == 201
    data = net.admin.get(f"/identities/{net.alice[0]}/posture-data").json()["data"]
    assert data["domain"]["domain"] == "CORP.example" and data["domain"]["postureCheckId"] == cid
    assert data["processes"] == [
        {
            "postureCheckId": "p1",
            "timedOut": False,
            "isRunning": True,
            "binaryHash": "abcd",
            "lastUpdatedAt": data["processes"][0]["lastUpdatedAt"],
            "signerFingerprints": None,
        }
    ]
    (sess_data,) = data["apiSessionPostureData"].values()
    assert sess_data["mfa"]["passedMfa"] is False and sess_data["endpointState"] == {
        "wokenAt": None,
        "unlockedAt": None,
    }
    # admin operations, as every management operation upstream: a non-admin, even the identity
    # itself, gets 401
    assert_error(mgmt(alice).get(f"/identities/{net.alice[0]}/posture-data"), 401, "UNAUTHORIZED")
    bob = net.login(net.bob)
    assert_error(mgmt(bob).get(f"/identities/{net.alice[0]}/posture-data"), 401, "UNAUTHORIZED")
    assert_error(mgmt(bob).get(f"/identities/{net.alice[0]}/failed-service-requests"), 401, "UNAUTHORIZED")


def test_process_checks(net):
    cid, _ = _guard_web(
        net,
        {
            "name": "proc",
            "typeId": "PROCESS",
            "process": {"osType": "Linux", "path": "/usr/bin/agent", "hashes": ["ABCDEF"]},
        },
    )
    alice = net.login(net.alice)
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["process"] == {"osType": "Linux", "path": "/usr/bin/agent"}
    _respond(alice, {"id": cid, "typeId": "PROCESS", "path": "/usr/bin/agent", "isRunning": True, "hash": "000000"})
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    _respond(alice, {"id": cid, "typeId": "PROCESS", "path": "/usr/bin/agent", "isRunning": True, "hash": "abcdef"})
    assert _dial(alice, net.web).status_code == 201


def test_mfa_check_reads_the_sessions_mfa_state(net, ctl):
    _guard_web(net, {"name": "mfa", "typeId": "MFA", "timeoutSeconds": 600, "promptOnWake": True})
    alice = net.login(net.alice)
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert (q["queryType"], q["isPassing"], q["timeout"], q["timeoutRemaining"]) == ("MFA", False, 600, 0)
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    sid = alice.get("/current-api-session").json()["data"]["id"]
    with ctl.store.write():
        mfa.pass_session(ctl.store, sid)  # what POST /authenticate/mfa records
    s = _dial(alice, net.web)
    assert s.status_code == 201, s.text
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["isPassing"] is True and 590 <= q["timeoutRemaining"] <= 600
    # a wake asks for MFA again, within a grace period
    r = alice.post("/posture-response", json={"id": "s", "typeId": "ENDPOINT_STATE", "woken": True})
    assert r.status_code == 201
    (svc,) = r.json()["data"]["services"]
    assert svc == {"id": net.web, "name": "web", "postureQueryType": "MFA", "timeout": 600, "timeoutRemaining": 300}
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["isPassing"] is True and 295 <= q["timeoutRemaining"] <= 300
    clock.advance(301)
    assert session_posture.revoke_failing(ctl) == 1  # what the periodic sweep does
    assert_error(net.admin.get(f"/sessions/{s.json()['data']['id']}"), 404, "NOT_FOUND")
    assert_error(_dial(alice, net.web), 409, "INVALID_POSTURE")
    with ctl.store.write():
        mfa.pass_session(ctl.store, sid)
    assert _dial(alice, net.web).status_code == 201


def test_an_mfa_query_carries_its_prompts_and_when_it_times_out(net, ctl):
    """As v2.0.3: promptOnWake/promptOnUnlock when set (left out when false), timeoutAt = now +
    timeoutRemaining while there is a timeout, no promptGracePeriodSeconds."""
    _guard_web(net, {"name": "mfa-q", "typeId": "MFA", "timeoutSeconds": 600, "promptOnUnlock": True})
    alice = net.login(net.alice)
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["promptOnUnlock"] is True and "promptOnWake" not in q and "promptGracePeriodSeconds" not in q
    assert q["timeoutRemaining"] == 0 and abs((clock.parse(q["timeoutAt"]) - clock.now()).total_seconds()) < 1
    with ctl.store.write():
        mfa.pass_session(ctl.store, alice.get("/current-api-session").json()["data"]["id"])
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    at = clock.parse(q["timeoutAt"]) - clock.now()
    assert q["timeoutRemaining"] > 590 and abs(at.total_seconds() - q["timeoutRemaining"]) < 1


def test_a_query_without_a_timeout_has_no_timeout_at(net):
    _guard_web(net, {"name": "mfa-nt", "typeId": "MFA", "timeoutSeconds": -1, "promptOnWake": True})
    alice = net.login(net.alice)
    q = alice.get(f"/services/{net.web}").json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["timeoutRemaining"] == -1 and "timeoutAt" not in q and q["promptOnWake"] is True
    assert "promptOnUnlock" not in q


def test_bad_posture_responses_are_400(net):
    alice = net.login(net.alice)
    assert_error(alice.post("/posture-response", json={"typeId": "MAC", "macAddresses": []}), 400, "COULD_NOT_VALIDATE")
    assert_error(alice.post("/posture-response", json={"id": "x", "typeId": "MFA"}), 400, "COULD_NOT_VALIDATE")
    assert_error(
        alice.post("/posture-response", json={"id": "x", "typeId": "OS", "type": "Linux"}), 400, "COULD_NOT_VALIDATE"
    )
    assert_error(
        alice.post("/posture-response", json={"id": "x", "typeId": "MAC", "macAddresses": "aa"}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert_error(alice.post("/posture-response-bulk", json={"id": "x"}), 400, "COULD_NOT_PARSE_BODY")
    assert_error(alice.post("/posture-response", content=b"[1"), 400, "COULD_NOT_PARSE_BODY")


# ------------------------------------------------------------------ hardening
# posture responses that keep passing keep the sessions, posture-response-bulk needs a body,
# association lists render no posture queries, repeated query parameters take the first value
def test_a_changed_posture_that_still_passes_keeps_the_session(net):
    cid, _ = _guard_web(net, {"name": "mac", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]})
    alice = net.login(net.alice)
    _respond(alice, {"id": cid, "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]})
    r = _dial(alice, net.web)
    assert r.status_code == 201, r.text
    session = r.json()["data"]["id"]
    # a different answer (one more MAC) that still passes: the session stays
    _respond(alice, {"id": cid, "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff", "11:22:33:44:55:66"]})
    assert net.admin.get(f"/sessions/{session}").status_code == 200
    # one that fails ends it
    _respond(alice, {"id": cid, "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]})
    assert_error(net.admin.get(f"/sessions/{session}"), 404, "NOT_FOUND")


def test_posture_response_bulk_needs_a_body(net):
    alice = net.login(net.alice)
    err = assert_error(alice.post("/posture-response-bulk", content=b""), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "body"
    assert_error(alice.post("/posture-response-bulk", json={}), 400, "COULD_NOT_PARSE_BODY")
    assert alice.post("/posture-response-bulk", json=[]).status_code == 201


def test_services_in_association_lists_have_no_posture_queries(net):
    admin = net.admin.as_prefix(MGMT)
    pid = admin.get('/service-policies?filter=name="dial-web"').json()["data"][0]["id"]
    listed = admin.get(f"/service-policies/{pid}/services").json()["data"]
    assert listed and all(s["postureQueries"] == [] for s in listed)
    # the services' own list still renders them for the caller
    own = net.login(net.alice).get(f"/services/{net.web}").json()["data"]
    assert own["postureQueries"]


def test_repeated_query_parameters_take_the_first_value(net):
    admin = net.admin.as_prefix(MGMT)
    page = admin.get("/services?limit=1&limit=5").json()["meta"]["pagination"]
    assert page["limit"] == 1
    named = admin.get('/services?filter=name="web"&filter=name="db"').json()["data"]
    assert [s["name"] for s in named] == ["web"]
