"""The router data model's change sets, from two readings (no server): what changed becomes
creations and updates in dependency order, deletions in reverse with a policy's links before the
policy, link changes as additions and removals; the full state lists a policy before its links."""

from __future__ import annotations

from tests.ctrl.fake_router import read_pb
from ziti_lite.ctrl import datamodel as dm
from ziti_lite.ctrl import messages, pb


def reading(identities=(), services=(), policies=None) -> dm.Reading:
    r = dm.Reading()
    for i in identities:
        r.models[(dm.IDENTITY, i)] = pb.encode(messages.RDM_IDENTITY, {"id": i, "name": i})
    for s in services:
        r.models[(dm.SERVICE, s)] = pb.encode(messages.RDM_SERVICE, {"id": s, "name": s})
    for pid, (kind, ids, svcs) in (policies or {}).items():
        r.models[(dm.POLICY, pid)] = pb.encode(messages.RDM_SERVICE_POLICY, {"id": pid, "name": pid,
                                                                             "policyType": kind})
        r.links[pid] = {messages.RDM_RELATED_IDENTITY: frozenset(ids), messages.RDM_RELATED_SERVICE: frozenset(svcs)}
    return r


def decoded(events: list[bytes]) -> list[tuple[int, int, dict]]:
    """(action, event field number, model fields) per event."""
    out = []
    for e in events:
        f = read_pb(e)
        num = next(n for n in f if n >= 10)
        out.append((f.get(1, [0])[0], num, read_pb(f[num][0])))
    return out


def test_nothing_changed_is_no_change_set():
    a = reading(["i1"], ["s1"], {"p1": (1, ["i1"], ["s1"])})
    assert dm.diff(a, reading(["i1"], ["s1"], {"p1": (1, ["i1"], ["s1"])})) == []


def test_a_new_identity_joining_a_policy_is_its_creation_then_the_link():
    before = reading(["i1"], ["s1"], {"p1": (1, ["i1"], ["s1"])})
    after = reading(["i1", "i2"], ["s1"], {"p1": (1, ["i1", "i2"], ["s1"])})
    evs = decoded(dm.diff(before, after))
    assert [(a, n) for a, n, _ in evs] == [(0, 10), (0, 16)]
    link = evs[1][2]
    assert link[1] == [b"p1"] and link[2] == [b"i2"] and link[3] == [messages.RDM_RELATED_IDENTITY]
    assert link[4] == [1]                                     # add


def test_a_policy_deleted_sends_its_links_removed_then_itself():
    before = reading(["i1"], ["s1"], {"p1": (2, ["i1"], ["s1"])})
    evs = decoded(dm.diff(before, reading(["i1"], ["s1"])))
    assert [(a, n) for a, n, _ in evs] == [(0, 16), (0, 16), (2, 12)]
    assert all(4 not in f for _, n, f in evs if n == 16)     # add = false (left out)


def test_an_update_and_a_removed_link():
    before = reading(["i1", "i2"], ["s1"], {"p1": (1, ["i1", "i2"], ["s1"])})
    after = reading(["i1", "i2"], ["s1"], {"p1": (1, ["i1"], ["s1"])})
    after.models[(dm.SERVICE, "s1")] = pb.encode(messages.RDM_SERVICE, {"id": "s1", "name": "renamed"})
    evs = decoded(dm.diff(before, after))
    assert [(a, n) for a, n, _ in evs] == [(1, 11), (0, 16)]
    assert evs[0][2][2] == [b"renamed"] and evs[1][2][2] == [b"i2"] and 4 not in evs[1][2]


def test_the_full_state_lists_a_policy_before_its_links_and_carries_index_and_timeline():
    body = read_pb(dm.encode_state(reading(["i1"], ["s1"], {"p1": (1, ["i1"], ["s1"])}), 7, "tl"))
    evs = decoded(body[1])
    assert [n for _, n, _ in evs] == [10, 11, 12, 16, 16]
    assert body[2] == [7] and body[3] == [b"tl"]
