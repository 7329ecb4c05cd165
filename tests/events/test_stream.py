"""A live controller with its edge router: the SSE stream (header and ticket), its end with the
API session, and the router's events (router, sdk, terminators, circuits) in the events file."""

from __future__ import annotations

import asyncio
import json
import queue
import threading

import pytest

from tests.conftest import MGMT
from tests.edge import client as ec
from tests.edge.conftest import enroll, wait_for
from tests.edge.test_router import Who, circuit, identity
from tests.enroll.conftest import running

pytestmark = pytest.mark.slow   # a live server over TLS with its edge router

EVENTS = "/ziti-lite/v1/events"


@pytest.fixture(scope="module")
def live(template_db, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("events-live")
    with running(template_db, tmp, edge=True, events=str(tmp / "events.jsonl"), events_counts_interval=2) as handle:
        yield handle, tmp / "events.jsonl"


class Sse:
    """An SSE client in a thread: each ``data:`` line's JSON on a queue, None when the stream ends."""

    def __init__(self, client, url: str, headers: dict):
        self.lines: queue.Queue = queue.Queue()
        self.status: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, args=(client, url, headers), daemon=True).start()
        self.code = self.status.get(timeout=10)

    def _run(self, client, url, headers) -> None:
        try:
            with client.stream("GET", url, headers=headers, timeout=30) as r:
                self.status.put(r.status_code)
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        self.lines.put(json.loads(line[6:]))
        except Exception as e:   # the stream broke: the test sees its end
            self.status.put(str(e))
        self.lines.put(None)

    def next(self, namespace: str, timeout: float = 10) -> dict | None:
        while True:
            e = self.lines.get(timeout=timeout)
            if e is None or e["namespace"] == namespace:
                return e


def file_events(path, namespace: str) -> list[dict]:
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["namespace"] == namespace]


def test_sse_with_header_carries_events_and_ends_with_the_session(live):
    handle, _ = live
    admin = handle.admin()
    sse = Sse(handle.client(), EVENTS + "?types=entityChange", {"zt-session": admin.token})
    assert sse.code == 200
    sid = admin.create("services", {"name": "sse-svc", "encryptionRequired": True})
    e = sse.next("entityChange")
    assert e["eventType"] == "created" and e["entityType"] == "services" and e["finalState"]["id"] == sid
    r = admin.client.delete(MGMT + "/current-api-session", headers={"zt-session": admin.token})
    assert r.status_code == 200
    assert sse.next("never") is None   # the stream ended with its API session


def test_tickets_for_event_source(live):
    handle, _ = live
    admin = handle.admin()
    c = handle.client()
    assert c.get(EVENTS).status_code == 401
    assert c.get(EVENTS + "?ticket=made-up").status_code == 401
    r = c.post("/ziti-lite/v1/events/tickets", headers={"zt-session": admin.token})
    assert r.status_code == 201, r.text
    ticket = r.json()["data"]["ticket"]
    assert ticket != admin.token
    sse = Sse(c, EVENTS + f"?types=edge.apiSessions&ticket={ticket}", {})
    assert sse.code == 200
    handle.admin()   # a login elsewhere
    e = sse.next("edge.apiSessions")
    assert e["event_type"] == "created"
    assert handle.client().get(EVENTS + f"?ticket={ticket}").status_code == 401   # good once
    assert c.get(EVENTS + "?types=nope", headers={"zt-session": admin.token}).status_code == 400
    assert c.delete(MGMT + "/current-api-session", headers={"zt-session": admin.token}).status_code == 200
    assert sse.next("never") is None   # a ticket's stream ends with the API session it stands for


def test_router_sdk_terminator_and_circuit_events(live):
    handle, path = live
    admin = handle.admin()
    svc = admin.create("services", {"name": "ev-svc", "encryptionRequired": False, "roleAttributes": ["ev"]})
    for kind, role in (("Bind", "#ev-host"), ("Dial", "#ev-client")):
        admin.create("service-policies", {"name": f"ev-{kind}", "type": kind, "semantic": "AnyOf",
                                          "identityRoles": [role], "serviceRoles": ["#ev"]})
    host_id, host_path = enroll(handle, admin, "ev-host", ["ev-host"])
    client_id, client_path = enroll(handle, admin, "ev-client", ["ev-client"])
    sse = Sse(handle.client(), EVENTS, {"zt-session": admin.token})   # every type
    assert sse.code == 200

    async def scenario():
        host, dialer = Who(handle, identity(host_path)), Who(handle, identity(client_path))
        bind = host.session(svc, "Bind")["token"]
        dial = dialer.session(svc, "Dial")["token"]
        h, d = await host.channel(), await dialer.channel()
        assert (await h.bind(7, bind)).content == ec.STATE_CONNECTED
        r = await circuit(h, d, 7, 3, dial, 11)
        assert r.content == ec.STATE_CONNECTED
        await d.close()
        await h.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    # the same events on the SSE stream as in the file
    seen: dict[str, list[dict]] = {}
    while not [e for e in seen.get("fabric.circuits", []) if e["event_type"] == "deleted"]:
        e = sse.lines.get(timeout=10)
        assert e is not None
        seen.setdefault(e["namespace"], []).append(e)
    while not [e for e in seen.get("sdk", []) if e["event_type"] == "sdk-offline"]:
        e = sse.lines.get(timeout=10)
        assert e is not None
        seen.setdefault(e["namespace"], []).append(e)
    while "edge.entityCounts" not in seen:   # every 2 s here
        e = sse.lines.get(timeout=10)
        assert e is not None
        seen.setdefault(e["namespace"], []).append(e)
    assert {"sdk", "fabric.terminators", "fabric.circuits", "edge.sessions", "edge.apiSessions",
            "authentication"} <= set(seen)
    assert seen["edge.entityCounts"][0]["counts"]["services"] >= 1
    assert [e["event_type"] for e in seen["fabric.circuits"]] == ["created", "deleted"]
    assert {e["session_type"] for e in seen["edge.sessions"]} == {"Bind", "Dial"}
    assert {e["type"] for e in seen["authentication"]} == {"cert"}
    router_id = handle.ctl.edge_router.router_id
    wait_for(lambda: len([e for e in file_events(path, "sdk") if e["identity_id"] == host_id]) == 2)
    sdk = [e for e in file_events(path, "sdk") if e["identity_id"] in (host_id, client_id)]
    assert {e["event_type"] for e in sdk} == {"sdk-online", "sdk-offline"}
    assert set(sdk[0]) == {"namespace", "event_type", "event_src_id", "timestamp", "identity_id"}
    routers = file_events(path, "fabric.routers")
    assert routers[0] == {**routers[0], "event_type": "router-online", "router_id": router_id, "router_online": True}
    terms = [e for e in file_events(path, "fabric.terminators") if e["service_id"] == svc]
    assert [e["event_type"] for e in terms] == ["created", "deleted"]
    assert set(terms[0]) == {"namespace", "event_type", "event_src_id", "timestamp", "service_id", "terminator_id",
                             "router_id", "host_id", "router_online", "precedence", "static_cost", "dynamic_cost",
                             "total_terminators", "usable_default_terminators", "usable_required_terminators"}
    assert terms[0]["host_id"] == host_id and terms[0]["router_online"] is True and terms[0]["total_terminators"] == 1
    circuits = [e for e in file_events(path, "fabric.circuits") if e["service_id"] == svc]
    assert [e["event_type"] for e in circuits] == ["created", "deleted"]
    made, gone = circuits
    assert made["circuit_id"] == gone["circuit_id"] and made["version"] == 2
    assert made["path"]["nodes"] == [router_id] and made["link_count"] == 0
    assert made["tags"] == {"clientId": client_id, "hostId": host_id, "serviceId": svc}
    assert "path_cost" in made and "creation_timespan" in made and "duration" in gone
    assert {"namespace", "version", "event_type", "event_src_id", "circuit_id", "timestamp", "client_id",
            "service_id", "terminator_id", "instance_id", "path", "link_count", "tags"} <= set(made)


def test_a_dial_without_terminators_is_a_failed_circuit(live):
    handle, path = live
    admin = handle.admin()
    svc = admin.create("services", {"name": "lonely", "encryptionRequired": False, "roleAttributes": ["lonely"]})
    admin.create("service-policies", {"name": "lonely-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#lonely"], "serviceRoles": ["#lonely"]})
    _, client_path = enroll(handle, admin, "lonely-client", ["lonely"])

    async def scenario():
        dialer = Who(handle, identity(client_path))
        dial = dialer.session(svc, "Dial")["token"]
        d = await dialer.channel()
        r = await d.dial(5, dial)
        assert r.content == ec.STATE_CLOSED
        await d.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    wait_for(lambda: [e for e in file_events(path, "fabric.circuits") if e["service_id"] == svc])
    failed = [e for e in file_events(path, "fabric.circuits") if e["service_id"] == svc]
    assert failed[0]["event_type"] == "failed" and failed[0]["failure_cause"] == "NO_TERMINATORS"
