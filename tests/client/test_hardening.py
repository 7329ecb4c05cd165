"""Client-side truths from the hardening issue: posture responses that keep passing keep the
sessions, posture-response-bulk needs a body, association lists render no posture queries,
repeated query parameters take the first value."""

from __future__ import annotations

from tests.client.test_posture import _dial, _guard_web, _respond
from tests.conftest import MGMT, assert_error


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
