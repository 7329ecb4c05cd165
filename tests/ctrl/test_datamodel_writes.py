"""The router data model fed by the writes themselves: every kind of entity created, updated and
deleted through the API reaches a subscriber as exactly one change (one change set, one event
of that entity), policies matching every identity carry all their links, a subscriber catches
up from its index after a burst of writes, a write that rolled back sends nothing, and the
consistency check against a full reading finds no difference (and repairs a write made on
another connection, which no trigger of ours sees).

In process: the data model part of a control-channel server over the app of the tests, writes
through the management API, the subscriber a channel that keeps what it is sent; each tick is
run by the test (the server runs it five times a second)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from tests.ctrl.fake_router import read_pb
from ziti_lite.channel.wire import Message
from ziti_lite.ctrl import messages, pb
from ziti_lite.ctrl.datamodel import DataModel
from ziti_lite.ctrl.messages import C
from ziti_lite.db.store import Store

KINDS = {10: "identity", 11: "service", 12: "servicePolicy", 13: "postureCheck", 14: "publicKey",
         15: "revocation", 16: "servicePolicyChange", 17: "configType", 18: "config"}
ACTIONS = {0: "create", 1: "update", 2: "delete"}


class Channel:
    """What the data model needs of a router's channel: it keeps every message sent."""
    closed = False
    label = "test-router"

    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes]] = []

    def send(self, content: int, headers: dict, body: bytes = b"", seq: int | None = None) -> int:
        self.sent.append((content, body))
        return len(self.sent)

    def send_large(self, content: int, headers: dict, body: bytes) -> int:
        return self.send(content, headers, body)

    def take(self) -> list[tuple[int, bytes]]:
        out, self.sent = self.sent, []
        return out


def subscribe(dm: DataModel, ch: Channel, index: int = 0, timeline: str = "") -> None:
    body = pb.encode(messages.SUBSCRIBE_TO_DATA_MODEL, {"subscriptionId": "sub", "currentIndex": index,
                                                        "timelineId": timeline})

    async def go() -> None:
        dm._subscribe(ch, Message(C.SUBSCRIBE_TO_DATA_MODEL, body=body))   # type: ignore[arg-type]
        while dm.state != "ready":
            await asyncio.sleep(0.01)
    asyncio.run(go())


@pytest.fixture
def model(ctl, admin):
    dm = DataModel(SimpleNamespace(ctl=ctl))   # type: ignore[arg-type]
    ch = Channel()
    subscribe(dm, ch)
    (state,) = ch.take()
    assert state[0] == C.DATA_STATE
    yield dm, ch
    assert asyncio.run(dm.check()) == 0 and dm.differences == 0


def decode(event: bytes) -> tuple[str, str, dict]:
    f = read_pb(event)
    (num,) = [n for n in f if n in KINDS]
    return ACTIONS[f.get(1, [0])[0]], KINDS[num], read_pb(f[num][0])


def change_sets(dm: DataModel, ch: Channel) -> list[dict]:
    """Run a tick; the change sets it sent: index, previousIndex and decoded events."""
    dm.tick()
    out = []
    for content, body in ch.take():
        assert content == C.DATA_STATE_CHANGE_SET
        cs = read_pb(body)
        out.append({"index": cs[1][0], "previous": cs.get(5, [0])[0], "events": [decode(e) for e in cs.get(3, [])]})
    return out


def about(events: list[tuple[str, str, dict]], kind: str, eid: str) -> list[str]:
    return [a for a, k, f in events if k == kind and f.get(1, [b""])[0] == eid.encode()]


def one_change(dm, ch, kind: str, eid: str, action: str) -> list[tuple[str, str, dict]]:
    sets = change_sets(dm, ch)
    assert len(sets) == 1, sets
    assert sets[0]["index"] == sets[0]["previous"] + 1 == dm.index
    assert about(sets[0]["events"], kind, eid) == [action], sets[0]["events"]
    return sets[0]["events"]


def test_each_kind_created_updated_and_deleted_reaches_the_router_as_one_change(model, admin):
    dm, ch = model
    cases = [
        ("config-types", "configType", {"name": "rdm-ct", "schema": {}}, {"name": "rdm-ct-2"}),
        ("configs", "config", {"name": "rdm-cfg", "configTypeId": "", "data": {"a": 1}}, {"data": {"a": 2}}),
        ("identities", "identity", {"name": "rdm-i", "type": "Device", "isAdmin": False}, {"name": "rdm-i-2"}),
        ("services", "service", {"name": "rdm-s", "encryptionRequired": True}, {"name": "rdm-s-2"}),
        ("posture-checks", "postureCheck", {"name": "rdm-pc", "typeId": "DOMAIN", "domains": ["a.example"]},
         {"typeId": "DOMAIN", "domains": ["b.example"]}),
        ("service-policies", "servicePolicy", {"name": "rdm-sp", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": [], "serviceRoles": []}, {"name": "rdm-sp-2"}),
    ]
    made: list[tuple[str, str, str]] = []
    for collection, kind, body, patch in cases:
        if collection == "configs":
            body = {**body, "configTypeId": made[0][2]}
        eid = admin.create(collection, body)
        one_change(dm, ch, kind, eid, "create")
        assert admin.patch(f"/{collection}/{eid}", json=patch).status_code == 200
        one_change(dm, ch, kind, eid, "update")
        made.append((collection, kind, eid))
    for collection, kind, eid in reversed(made):
        assert admin.delete(f"/{collection}/{eid}").status_code == 200
        events = one_change(dm, ch, kind, eid, "delete")
        if kind == "identity":      # and revoked as of now
            assert about(events, "revocation", eid) == ["create"]


def test_an_api_session_that_ends_is_one_revocation(model, admin, anon):
    dm, ch = model
    other = anon.login()
    change_sets(dm, ch)
    sid = other.get("/current-api-session").json()["data"]["id"]
    assert other.delete("/current-api-session").status_code == 200
    events = one_change(dm, ch, "revocation", sid, "create")
    assert [f[3] for a, k, f in events if k == "revocation"] == [[b"API_SESSION"]]


def test_a_policy_of_every_identity_carries_every_link_and_follows_new_ones(model, admin, ctl):
    dm, ch = model
    for n in range(30):
        admin.create("identities", {"name": f"rdm-many-{n}", "type": "Device", "isAdmin": False})
    change_sets(dm, ch)
    pid = admin.create("service-policies", {"name": "rdm-all", "type": "Dial", "semantic": "AnyOf",
                                            "identityRoles": ["#all"], "serviceRoles": ["#all"]})
    events = one_change(dm, ch, "servicePolicy", pid, "create")
    linked = {v.decode() for a, k, f in events if k == "servicePolicyChange" and f[1] == [pid.encode()]
              and f[3] == [messages.RDM_RELATED_IDENTITY] for v in f[2]}
    assert linked == set(ctl.store.column("SELECT id FROM identities"))
    # a new identity: its creation, then its link to the policy
    new = admin.create("identities", {"name": "rdm-many-new", "type": "Device", "isAdmin": False})
    events = one_change(dm, ch, "identity", new, "create")
    links = [(f[2], f.get(4, [0])) for a, k, f in events if k == "servicePolicyChange" and f[1] == [pid.encode()]]
    assert links == [([new.encode()], [1])]
    assert [k for _, k, _ in events].index("identity") < [k for _, k, _ in events].index("servicePolicyChange")
    # narrowed to one identity: every other link removed, in one change
    assert admin.patch(f"/service-policies/{pid}", json={"identityRoles": [f"@{new}"]}).status_code == 200
    (cs,) = change_sets(dm, ch)
    removed = {v.decode() for a, k, f in cs["events"] if k == "servicePolicyChange" and 4 not in f for v in f[2]}
    assert removed == set(ctl.store.column("SELECT id FROM identities")) - {new}
    assert about(cs["events"], "servicePolicy", pid) == []          # the policy itself did not change
    # deleted: its links go first, then the policy
    assert admin.delete(f"/service-policies/{pid}").status_code == 200
    events = one_change(dm, ch, "servicePolicy", pid, "delete")
    assert [k for _, k, _ in events][-1] == "servicePolicy" and "servicePolicyChange" in [k for _, k, _ in events]


def test_a_subscriber_catches_up_from_its_index_after_a_burst_of_writes(model, admin):
    dm, ch = model
    start, timeline = dm.index, dm.timeline
    made = []
    for n in range(25):
        made.append(admin.create("identities", {"name": f"rdm-burst-{n}", "type": "Device", "isAdmin": False}))
        if n % 5 == 4:
            change_sets(dm, ch)
    later = Channel()
    subscribe(dm, later, index=start, timeline=timeline)
    sent = later.take()
    assert [c for c, _ in sent] == [C.DATA_STATE_CHANGE_SET] * 5      # no full state: the five it missed
    sets = [read_pb(body) for _, body in sent]
    assert [cs[1][0] for cs in sets] == list(range(start + 1, start + 6))
    assert all(cs.get(5, [0])[0] == cs[1][0] - 1 for cs in sets)
    created = [f[1][0].decode() for cs in sets for a, k, f in map(decode, cs[3]) if k == "identity" and a == "create"]
    assert sorted(created) == sorted(made)
    # another timeline (a restarted controller): the full state, which holds them all
    fresh = Channel()
    subscribe(dm, fresh, index=start, timeline="another")
    ((content, body),) = fresh.take()
    state = read_pb(body)
    assert content == C.DATA_STATE and state[2] == [dm.index]
    ids = {f[1][0].decode() for a, k, f in map(decode, state[1]) if k == "identity"}
    assert set(made) <= ids


def test_a_write_that_rolled_back_sends_nothing(model, admin):
    dm, ch = model
    change_sets(dm, ch)
    before = dm.index
    # the identity row is written, then its enrollment fails (no such CA): all of it rolls back
    r = admin.post("/identities", json={"name": "rdm-rolled-back", "type": "Device", "isAdmin": False,
                                        "roleAttributes": ["x"], "enrollment": {"ottca": "no-such-ca"}})
    assert r.status_code == 404, r.text
    assert change_sets(dm, ch) == [] and dm.index == before
    assert not any(dm.dirty.values()) and not any(dm.dirty_links.values())
    # the next write is the next index
    eid = admin.create("identities", {"name": "rdm-after-rollback", "type": "Device", "isAdmin": False})
    one_change(dm, ch, "identity", eid, "create")
    assert dm.index == before + 1


def test_a_write_on_another_connection_is_found_by_the_consistency_check(model, admin, ctl):
    dm, ch = model
    eid = admin.create("services", {"name": "rdm-elsewhere", "encryptionRequired": True})
    change_sets(dm, ch)
    other = Store(ctl.settings.db)        # another process on the same file (the CLI, an import)
    try:
        with other.write():
            other.execute("UPDATE services SET name = 'rdm-renamed-elsewhere' WHERE id = ?", (eid,))
    finally:
        other.close()
    assert change_sets(dm, ch) == []     # no trigger of ours saw it
    assert asyncio.run(dm.check()) == 1
    events = one_change(dm, ch, "service", eid, "update")
    assert [f[2] for a, k, f in events if k == "service"] == [[b"rdm-renamed-elsewhere"]]
    dm.differences = 0                   # found and repaired: the fixture's own check finds none
