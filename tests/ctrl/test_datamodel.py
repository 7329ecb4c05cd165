"""The router data model as a v2.0 router consumes it: the full state on subscription (keys a
session token verifies with, identities, services, policies and their links), change sets within
a second of a change, catch-up from an index, and a malformed subscription refused on its
connection only."""

from __future__ import annotations

import uuid
from datetime import datetime

import jwt
import pytest
from cryptography import x509

from tests.ctrl.conftest import enroll_router
from tests.ctrl.fake_router import read_pb
from tests.ctrl.test_terminators import Identity

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS

KINDS = {10: "identity", 11: "service", 12: "servicePolicy", 13: "postureCheck", 14: "publicKey",
         15: "revocation", 16: "servicePolicyChange", 17: "configType", 18: "config"}
ACTIONS = {0: "create", 1: "update", 2: "delete"}


def events(raw: list[bytes]) -> list[tuple[str, str, dict]]:
    """(action, kind, fields) of each encoded event."""
    out = []
    for e in raw:
        f = read_pb(e)
        (num,) = [n for n in f if n in KINDS]
        out.append((ACTIONS[f.get(1, [0])[0]], KINDS[num], read_pb(f[num][0])))
    return out


def text(fields: dict, num: int) -> str:
    return fields[num][0].decode() if num in fields else ""


@pytest.fixture(scope="module")
def admin(live):
    return live.admin()


@pytest.fixture(scope="module")
def net(live, admin):
    """Two identities, a service, a Dial and a Bind policy."""
    alice = admin.create("identities", {"name": "rdm-alice", "type": "Device", "isAdmin": False,
                                        "roleAttributes": ["rdm-users"]})
    bob = admin.create("identities", {"name": "rdm-bob", "type": "Device", "isAdmin": False})
    svc = admin.create("services", {"name": "rdm-svc", "roleAttributes": ["rdm"], "encryptionRequired": True})
    dial = admin.create("service-policies", {"name": "rdm-dial", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#rdm-users"], "serviceRoles": ["#rdm"]})
    bind = admin.create("service-policies", {"name": "rdm-bind", "type": "Bind", "semantic": "AnyOf",
                                             "identityRoles": [f"@{bob}"], "serviceRoles": [f"@{svc}"]})
    return {"alice": alice, "bob": bob, "svc": svc, "dial": dial, "bind": bind}


def subscribed(live, admin, name: str, sub: str = "sub-1"):
    router = enroll_router(live, admin, name)
    r = router.connect()
    r.hello_v2(router.id)
    r.subscribe(sub)
    state = r.expect(20500)
    r.client_hello("127.0.0.1", 4700)
    return router, r, state


def test_the_full_state_holds_what_a_router_authorises_with(live, admin, net):
    _, r, state = subscribed(live, admin, "rdm-full", "sub-full")
    assert state.headers[1026] == b"sub-full"
    body = read_pb(state.body)
    evs = events(body[1])
    assert {a for a, _, _ in evs} == {"create"}
    kinds = [k for _, k, _ in evs]
    # dependency order: identities and services before policies, a policy before its links
    assert kinds.index("identity") < kinds.index("servicePolicy") and kinds.index("service") < kinds.index(
        "servicePolicy")
    by = {(k, text(f, 1)): f for _, k, f in evs if k not in ("servicePolicyChange", "publicKey")}
    assert text(by[("identity", net["alice"])], 2) == "rdm-alice"
    svc = by[("service", net["svc"])]
    assert text(svc, 2) == "rdm-svc" and svc[3] == [1]
    assert by[("servicePolicy", net["dial"])][3] == [1] and by[("servicePolicy", net["bind"])][3] == [2]
    links = {(text(f, 1), f.get(3, [0])[0]): {v.decode() for v in f.get(2, [])}
             for _, k, f in evs if k == "servicePolicyChange"}
    assert net["alice"] in links[(net["dial"], 2)] and links[(net["dial"], 1)] == {net["svc"]}
    assert links[(net["bind"], 2)] == {net["bob"]}
    # the key a session token names verifies its signature: what a v2 router checks a Bind with
    keys = {text(f, 2): f for _, k, f in evs if k == "publicKey"}
    host = Identity(live, admin, "rdm-host", ["rdm-hosts"])
    admin.create("service-policies", {"name": "rdm-host-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": ["#rdm-hosts"], "serviceRoles": ["#rdm"]})
    token = host.session(net["svc"], "Bind")["token"]
    kid = jwt.get_unverified_header(token)["kid"]
    assert kid in keys and 0 in _usages(keys[kid])
    cert = x509.load_der_x509_certificate(keys[kid][1][0])
    claims = jwt.decode(token, cert.public_key(), algorithms=["ES256", "RS256"], options={"verify_aud": False})
    assert claims["z_st"] == "Bind" and claims["sub"] == net["svc"]
    assert text(body, 3)                              # the timeline (endIndex 0 is left out, as proto3 does)
    r.close()


def _usages(f: dict) -> list[int]:
    raw = f.get(3, [])
    out: list[int] = []
    for v in raw:
        out += list(v) if isinstance(v, bytes) else [v]
    return out


def test_changes_reach_a_subscribed_router_within_a_second(live, admin, net):
    _, r, state = subscribed(live, admin, "rdm-changes", "sub-ch")
    start = read_pb(state.body).get(2, [0])[0]
    carol = admin.create("identities", {"name": "rdm-carol", "type": "Device", "isAdmin": False,
                                        "roleAttributes": ["rdm-users"]})
    m = r.expect(20501, timeout=1.5, where=lambda m: carol.encode() in m.body)
    assert m.headers[1026] == b"sub-ch"
    cs = read_pb(m.body)
    assert cs[1][0] > start and cs.get(5, [0])[0] == cs[1][0] - 1
    evs = events(cs[3])
    assert ("create", "identity") in [(a, k) for a, k, _ in evs]
    # carol joins the Dial policy through her role attribute: a link added in the same change set
    assert any(k == "servicePolicyChange" and text(f, 1) == net["dial"] and carol.encode() in f.get(2, [])
               for _, k, f in evs)

    # disabled: an update saying so and an identity revocation (the router closes her channels)
    assert admin.post(f"/identities/{carol}/disable", json={"durationMinutes": 0}).status_code == 200
    m = r.expect(20501, timeout=1.5, where=lambda m: carol.encode() in m.body)
    evs = events(read_pb(m.body)[3])
    ident = next(f for a, k, f in evs if k == "identity" and a == "update")
    assert ident.get(9) == [1]
    rev = next(f for a, k, f in evs if k == "revocation")
    assert text(rev, 1) == carol and text(rev, 3) == "IDENTITY"

    # a policy deleted: its links go first, then the policy
    temp = admin.create("service-policies", {"name": "rdm-temp", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#all"], "serviceRoles": ["#all"]})
    r.expect(20501, timeout=1.5, where=lambda m: temp.encode() in m.body)
    assert admin.delete(f"/service-policies/{temp}").status_code == 200
    m = r.expect(20501, timeout=1.5, where=lambda m: temp.encode() in m.body)
    evs = [(a, k) for a, k, f in events(read_pb(m.body)[3]) if temp.encode() in m.body]
    assert evs[-1] == ("delete", "servicePolicy") and ("create", "servicePolicyChange") in evs


def test_a_router_catches_up_from_its_index_or_gets_the_full_state(live, admin, net):
    _, r, state = subscribed(live, admin, "rdm-catch", "sub-a")
    _, stays, _ = subscribed(live, admin, "rdm-stays", "sub-stays")
    body = read_pb(state.body)
    index, timeline = body.get(2, [0])[0], text(body, 3)
    r.close()
    dave = admin.create("identities", {"name": "rdm-dave", "type": "Device", "isAdmin": False})
    stays.expect(20501, timeout=1.5, where=lambda m: dave.encode() in m.body)
    router = enroll_router(live, admin, "rdm-catch-2")
    again = router.connect()
    again.hello_v2(router.id)
    again.subscribe("sub-b", index=index, timeline=timeline)      # our timeline, an index we hold after
    m = again.expect(20501, where=lambda m: dave.encode() in m.body)
    assert read_pb(m.body)[1][0] > index and m.headers[1026] == b"sub-b"
    assert not [x for x in again.kept if x.content == 20500]
    # another timeline (a restarted controller): the full state
    again.subscribe("sub-c", index=index, timeline="another-timeline")
    full = again.expect(20500, where=lambda m: m.headers.get(1026) == b"sub-c")
    assert dave.encode() in full.body


def test_a_malformed_subscription_closes_that_channel_only(live, admin, net):
    _, good, _ = subscribed(live, admin, "rdm-good", "sub-good")
    router = enroll_router(live, admin, "rdm-bad")
    bad = router.connect()
    bad.hello_v2(router.id)
    bad.send(20505, {}, b"\x0a\xff\xff")          # a length running past the message
    assert bad.wait_closed(5)
    eve = admin.create("identities", {"name": "rdm-eve", "type": "Device", "isAdmin": False})
    good.expect(20501, timeout=1.5, where=lambda m: eve.encode() in m.body)


def test_revocations_of_the_api_reach_a_router_with_their_type_and_cut_off(live, admin, net):
    """What a v2 router closes channels by: an API_SESSION entry (the ``z_asid``), an IDENTITY
    one with its ``issuedBefore``, a JTI one; each a revocation event of the data model."""
    _, r, _ = subscribed(live, admin, "rdm-revocations", "sub-rev")
    target = admin.create("identities", {"name": "rdm-revoked", "type": "Device", "isAdmin": False})
    jti, asid = str(uuid.uuid4()), str(uuid.uuid4())
    for id, kind in ((jti, "JTI"), (asid, "API_SESSION"), (target, "IDENTITY")):
        assert admin.post("/revocations", json={"id": id, "type": kind}).status_code == 201
    seen: dict[str, dict] = {}
    while len(seen) < 3:
        m = r.expect(20501, timeout=2.0, where=lambda m: any(i.encode() in m.body for i in (jti, asid, target)))
        for action, kind, f in events(read_pb(m.body)[3]):
            if kind == "revocation":
                assert action == "create"
                seen[text(f, 1)] = f
    assert {i: text(f, 3) for i, f in seen.items()} == {jti: "JTI", asid: "API_SESSION", target: "IDENTITY"}
    detail = admin.get(f"/revocations/{target}").json()["data"]
    expires = read_pb(seen[target][2][0])[1][0]
    assert abs(expires - int(datetime.fromisoformat(detail["expiresAt"]).timestamp())) <= 1
    cut_off = read_pb(seen[target][4][0])[1][0]
    assert abs(cut_off - int(datetime.fromisoformat(detail["createdAt"]).timestamp())) <= 1
    assert 4 not in seen[jti] and 4 not in seen[asid]
    r.close()
