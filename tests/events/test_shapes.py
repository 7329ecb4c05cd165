"""Each event shape, field by field, against upstream's Go structs (openziti/ziti v1.3.3,
``controller/event/*.go``; ``authentication`` from the release that added it): the JSON name of
every field and the JSON type its Go type encodes to. ``omitempty`` fields are optional."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from ziti_lite.events import shapes

S, B, N, OBJ, L = str, bool, int, dict, list   # JSON string, bool, number, object, array
# event -> {json name: (json type, always present)}, as the Go struct tags say
UPSTREAM = {
    "entityChange": {  # entity_change.go: EntityChangeEvent
        "namespace": (S, True), "eventId": (S, True), "eventType": (S, True), "event_src_id": (S, True),
        "timestamp": (S, True), "metadata": (OBJ, False), "entityType": (S, False), "isParentEvent": (B, False),
        "initialState": (OBJ, False), "finalState": (OBJ, False)},
    "edge.apiSessions": {  # api_session.go: ApiSessionEvent
        "namespace": (S, True), "event_type": (S, True), "event_src_id": (S, True), "id": (S, True),
        "type": (S, True), "timestamp": (S, True), "token": (S, True), "identity_id": (S, True),
        "ip_address": (S, True)},
    "edge.sessions": {  # session.go: SessionEvent
        "namespace": (S, True), "event_type": (S, True), "event_src_id": (S, True), "session_type": (S, True),
        "id": (S, True), "timestamp": (S, True), "token": (S, True), "api_session_id": (S, True),
        "identity_id": (S, True), "service_id": (S, True)},
    "fabric.circuits": {  # circuits.go: CircuitEvent (version 2)
        "namespace": (S, True), "version": (N, True), "event_type": (S, True), "event_src_id": (S, True),
        "circuit_id": (S, True), "timestamp": (S, True), "client_id": (S, True), "service_id": (S, True),
        "terminator_id": (S, True), "instance_id": (S, True), "creation_timespan": (N, False), "path": (OBJ, True),
        "link_count": (N, True), "path_cost": (N, False), "failure_cause": (S, False), "duration": (N, False),
        "tags": (OBJ, True)},
    "fabric.terminators": {  # terminators.go: TerminatorEvent
        "namespace": (S, True), "event_type": (S, True), "event_src_id": (S, True), "timestamp": (S, True),
        "service_id": (S, True), "terminator_id": (S, True), "router_id": (S, True), "host_id": (S, True),
        "router_online": (B, True), "precedence": (S, True), "static_cost": (N, True), "dynamic_cost": (N, True),
        "total_terminators": (N, True), "usable_default_terminators": (N, True),
        "usable_required_terminators": (N, True)},
    "fabric.routers": {  # routers.go: RouterEvent
        "namespace": (S, True), "event_type": (S, True), "event_src_id": (S, True), "timestamp": (S, True),
        "router_id": (S, True), "router_online": (B, True)},
    "sdk": {  # sdk.go: SdkEvent
        "namespace": (S, True), "event_type": (S, True), "event_src_id": (S, True), "timestamp": (S, True),
        "identity_id": (S, True)},
    "edge.entityCounts": {  # entity_counts.go: EntityCountEvent
        "namespace": (S, True), "event_src_id": (S, True), "timestamp": (S, True), "counts": (OBJ, True),
        "error": (S, True)},
    "authentication": {  # authentication.go: AuthenticationEvent
        "namespace": (S, True), "event_src_id": (S, True), "timestamp": (S, True), "event_type": (S, True),
        "type": (S, True), "authenticator_id": (S, True), "external_jwt_signer_id": (S, True),
        "identity_id": (S, True), "auth_policy_id": (S, True), "remote_address": (S, True), "success": (B, True),
        "reason": (S, True), "improper_client_cert_chain": (B, True)},
}
CIRCUIT_PATH = {"nodes": L, "links": L, "ingress_id": S, "egress_id": S}   # circuits.go: CircuitPath

TERM_ROW = {"id": "t1", "service_id": "s1", "router_id": "r1", "host_id": "h1", "precedence": "required", "cost": 7}
SAMPLES = {
    "entityChange": [
        shapes.entity_change("c", "created", "e1", "services", None, {"id": "s1"}, {"authorId": "a"}),
        shapes.entity_change("c", "updated", "e2", "services", {"id": "s1"}, {"id": "s1"}, {}),
        shapes.entity_committed("c", "e2", "services")],
    "edge.apiSessions": [shapes.api_session("c", "created", "as1", "i1", "127.0.0.1")],
    "edge.sessions": [shapes.session("c", "deleted", "se1", "Dial", "as1", "i1", "s1")],
    "fabric.circuits": [
        shapes.circuit("c", "created", "ci1", "se1", "s1", "t1", "", "r1", {"serviceId": "s1"}, cost=3,
                       creation_seconds=0.002),
        shapes.circuit("c", "deleted", "ci1", "se1", "s1", "t1", "", "r1", {}, duration_seconds=1.5),
        shapes.circuit("c", "failed", "ci2", "se1", "s1", "", "", "r1", {}, failure_cause="NO_TERMINATORS",
                       creation_seconds=0.0)],
    "fabric.terminators": [shapes.terminator("c", "created", TERM_ROW, True, 1, 0, 1)],
    "fabric.routers": [shapes.router("c", "r1", True), shapes.router("c", "r1", False)],
    "sdk": [shapes.sdk("c", "i1", True), shapes.sdk("c", "i1", False)],
    "edge.entityCounts": [shapes.entity_counts("c", {"services": 2})],
    "authentication": [shapes.authentication("c", False, "updb", identity_id="i1", reason="INVALID_AUTH")],
}


@pytest.mark.parametrize("namespace", sorted(UPSTREAM))
def test_each_shape_has_upstreams_fields_and_json_types(namespace):
    fields = UPSTREAM[namespace]
    for event in SAMPLES[namespace]:
        event = json.loads(json.dumps(event))   # as a reader of the file sees it
        assert event["namespace"] == namespace
        assert set(event) <= set(fields), set(event) - set(fields)
        for name, (kind, required) in fields.items():
            if required:
                assert name in event, name
            if name in event:
                assert isinstance(event[name], kind) and not (kind is N and isinstance(event[name], bool)), name


def test_circuit_paths_and_durations():
    created, deleted, failed = SAMPLES["fabric.circuits"]
    assert {k: type(v) for k, v in created["path"].items()} == CIRCUIT_PATH
    assert created["path"]["nodes"] == ["r1"] and created["link_count"] == 0
    assert created["creation_timespan"] == 2_000_000 and created["path_cost"] == 3   # Go durations: nanoseconds
    assert deleted["duration"] == 1_500_000_000 and "path_cost" not in deleted
    assert failed["failure_cause"] == "NO_TERMINATORS"


def test_event_type_values_are_upstreams():
    assert [e["event_type"] for e in SAMPLES["fabric.routers"]] == ["router-online", "router-offline"]
    assert [e["event_type"] for e in SAMPLES["sdk"]] == ["sdk-online", "sdk-offline"]
    assert SAMPLES["authentication"][0]["event_type"] == "fail"
    assert SAMPLES["edge.apiSessions"][0]["type"] == "legacy"
    assert [e["eventType"] for e in SAMPLES["entityChange"]] == ["created", "updated", "committed"]


def test_timestamps_are_go_rfc3339():
    t = dt.datetime(2024, 5, 1, 10, 0, 0, 120000, tzinfo=dt.UTC)
    assert shapes.timestamp(t) == "2024-05-01T10:00:00.12Z"
    assert shapes.timestamp(t.replace(microsecond=0)) == "2024-05-01T10:00:00Z"


def test_redaction_is_deep_and_case_blind():
    state = {"name": "x", "enrollment": {"ott": {"jwt": "eyJ", "token": "t0k", "expiresAt": "later"}},
             "Password": "pw", "list": [{"privateKey": "k"}], "token": None}
    out = shapes.redact(state)
    assert out == {"name": "x", "enrollment": {"ott": {"jwt": "[redacted]", "token": "[redacted]",
                                                        "expiresAt": "later"}},
                   "Password": "[redacted]", "list": [{"privateKey": "[redacted]"}], "token": None}
    assert shapes.may_hold_secrets(json.dumps(state).encode())
    assert not shapes.may_hold_secrets(b'{"name": "tokenized", "roleAttributes": []}')
