"""Terminators a router asks for, against a pure-Python router: checks and result codes as
upstream's controller gives them, storage in the API, re-sent ids, removal and update."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CLIENT
from tests.ctrl.conftest import enroll_router
from tests.ctrl.fake_router import f_int, f_str, read_pb, string_slice  # noqa: F401
from tests.edge.conftest import enroll
from ziti_lite.pki.ca import fingerprint

pytestmark = pytest.mark.slow   # a live server with its control channel over TLS


class Identity:
    """An identity enrolled with a certificate and logged in with it, as an SDK would be."""

    def __init__(self, live, admin, name: str, attrs: list[str]):
        self.id, path = enroll(live, admin, name, attrs)
        with open(path) as f:
            d = json.load(f)["id"]
        self.cert, self.key = d["cert"], d["key"]
        self.fingerprint = fingerprint(self.cert)
        self.http, r = live.cert_login(self.cert, self.key)
        assert r.status_code == 200, r.text
        self.token = r.json()["data"]["token"]

    def session(self, service_id: str, kind: str) -> dict:
        r = self.http.post(CLIENT + "/sessions", json={"serviceId": service_id, "type": kind},
                           headers={"zt-session": self.token})
        assert r.status_code == 201, r.text
        return r.json()["data"]


def build_net(live, p: str):
    """A plain and an encrypted service ``P-svc``/``P-enc``, a host allowed to bind and a
    client allowed to dial them, and a fake router ``P-router``."""
    admin = live.admin()
    ids = {"svc": admin.create("services", {"name": f"{p}-svc", "encryptionRequired": False, "roleAttributes": [p]}),
           "enc": admin.create("services", {"name": f"{p}-enc", "encryptionRequired": True, "roleAttributes": [p]})}
    for kind, role in (("Bind", f"#{p}-host"), ("Dial", f"#{p}-client")):
        admin.create("service-policies", {"name": f"{p}-{kind}", "type": kind, "semantic": "AnyOf",
                                          "identityRoles": [role], "serviceRoles": [f"#{p}"]})
    host = Identity(live, admin, f"{p}-host", [f"{p}-host"])
    client = Identity(live, admin, f"{p}-client", [f"{p}-client"])
    router = enroll_router(live, admin, f"{p}-router")
    return admin, ids, host, client, router


@pytest.fixture(scope="module")
def net(live):
    return build_net(live, "ct")


def create_v2(r, tid: str, token: str, fps: list[str], cost: int = 0, precedence: int = 0, pk: bytes = b"k") -> dict:
    body = (f_str(1, tid) + f_str(2, token) + b"".join(f_str(3, fp) for fp in fps)
            + f_str(4, f_int(1, 1003) + f_str(2, pk)) + f_int(5, cost) + f_int(6, precedence) + f_str(7, "inst-1"))
    r.send(20216, {}, body)
    reply = r.expect(20217, where=lambda m: read_pb(m.body).get(1, [b""])[0].decode() == tid)
    fields = read_pb(reply.body)
    return {"id": fields.get(1, [b""])[0].decode(), "result": fields.get(2, [0])[0],
            "msg": fields.get(3, [b""])[0].decode()}


def test_create_v2_stores_the_terminator_and_answers_as_upstream(live, net):
    admin, ids, host, client, router = net
    r = router.online()
    bind = host.session(ids["svc"], "Bind")
    ok = create_v2(r, "t-v2-1", bind["token"], ["ffff", host.fingerprint], cost=7, precedence=1)
    assert ok == {"id": "t-v2-1", "result": 0, "msg": ""}
    t = admin.get("/terminators/t-v2-1").json()["data"]
    assert t["router"]["id"] == router.id and t["service"]["id"] == ids["svc"] and t["binding"] == "edge"
    assert t["cost"] == 7 and t["precedence"] == "required" and t["identity"] == "inst-1"
    # the same id again (a router re-sends its terminators after reconnecting): success, updated
    assert create_v2(r, "t-v2-1", bind["token"], [host.fingerprint], cost=9)["result"] == 0
    assert admin.get("/terminators/t-v2-1").json()["data"]["cost"] == 9
    cases = [
        (("t-bad-1", "no-such-token", [host.fingerprint]), 4, "Invalid Session"),
        (("t-bad-2", bind["token"], ["0000"]), 2, "invalid api session"),
        (("t-bad-3", client.session(ids["svc"], "Dial")["token"], [client.fingerprint]), 2, "incorrect session type"),
        (("", bind["token"], [host.fingerprint]), 2, "provided terminator id is blank"),
    ]
    for args, result, msg in cases:
        answer = create_v2(r, *args)
        assert (answer["result"], answer["msg"]) == (result, msg), args
    answer = create_v2(r, "t-bad-4", bind["token"], [host.fingerprint], cost=70000)
    assert answer["result"] == 2 and "invalid cost 70000" in answer["msg"]
    assert admin.get("/terminators/t-bad-1").status_code == 404
    # another router may not take over the id
    other = enroll_router(live, admin, "ct-router-2").online()
    answer = create_v2(other, "t-v2-1", bind["token"], [host.fingerprint])
    assert answer["result"] == 1 and answer["msg"] == "selected id conflicts with terminator for different router"
    other.close()
    # removal: a channel Result, unknown ids fine
    seq = r.send(1038, {}, f_str(1, "t-v2-1") + f_str(1, "never-existed"))
    res = r.expect_reply(seq)
    assert res.content == 2 and res.headers[2] == b"\x01"
    assert admin.get("/terminators/t-v2-1").status_code == 404
    r.close()


def test_create_v1_update_and_remove_v1(live, net):
    admin, ids, host, client, router = net
    r = router.online()
    bind = host.session(ids["svc"], "Bind")
    body = (f_str(1, bind["token"]) + f_str(2, host.fingerprint) + f_int(4, 3) + f_str(6, "v1-inst"))
    reply = r.request(20207, {}, body)
    assert reply.content == 20208
    tid = reply.body.decode()
    t = admin.get(f"/terminators/{tid}").json()["data"]
    assert t["address"] == "hosted:" + bind["token"] and t["cost"] == 3 and t["router"]["id"] == router.id
    update = (f_str(1, bind["token"]) + f_str(2, host.fingerprint) + f_str(3, tid) + f_int(4, 11)
              + f_int(5, 2) + f_int(6, 1) + f_int(7, 1))
    assert r.request(20209, {}, update).content == 20210
    t = admin.get(f"/terminators/{tid}").json()["data"]
    assert (t["cost"], t["precedence"]) == (11, "failed")
    bad = r.request(20209, {}, f_str(1, bind["token"]) + f_str(2, host.fingerprint) + f_str(3, "nope") + f_int(7, 1))
    assert bad.content == 20002 and bad.body == b"invalid terminator: not found"
    assert int.from_bytes(bad.headers[1014], "little") == 8
    gone = r.request(20211, {}, f_str(1, bind["token"]) + f_str(2, host.fingerprint) + f_str(3, tid))
    assert gone.content == 20212
    assert admin.get(f"/terminators/{tid}").status_code == 404
    refused = r.request(20207, {}, f_str(1, "no-such-session") + f_str(2, host.fingerprint))
    assert refused.content == 20002 and refused.body == b"Invalid Session"
    assert int.from_bytes(refused.headers[1014], "little") == 3
    r.close()


def test_a_removed_session_is_sent_and_takes_its_terminators(live, net):
    admin, ids, host, client, router = net
    r = router.online()
    bind = host.session(ids["enc"], "Bind")
    assert create_v2(r, "t-sess", bind["token"], [host.fingerprint])["result"] == 0
    assert admin.delete(f"/sessions/{bind['id']}").status_code == 200
    removed = r.expect(20102, timeout=3)
    assert bind["token"] in [v.decode() for v in read_pb(removed.body).get(1, [])]
    r.close()


def test_deleting_the_router_deletes_its_terminators(live, net):
    admin, ids, host, client, router = net
    doomed = enroll_router(live, admin, "ct-doomed")
    r = doomed.online()
    bind = host.session(ids["svc"], "Bind")
    assert create_v2(r, "t-doomed", bind["token"], [host.fingerprint])["result"] == 0
    assert admin.delete(f"/edge-routers/{doomed.id}").status_code == 200
    assert r.wait_closed(3)
    assert admin.get("/terminators/t-doomed").status_code == 404
