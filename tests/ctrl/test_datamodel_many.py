"""Ten v2 routers subscribing at once to a data model of a few thousand identities (a full state
of several pieces, each router's written as it reads): each gets the same whole state, a
policy of every identity with all of them linked, and the next change after it; the model
then holds what the database holds."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.ctrl.conftest import enroll_router
from tests.ctrl.fake_router import read_pb
from tests.ctrl.test_datamodel import events
from ziti_lite import clock
from ziti_lite.ctrl import messages
from ziti_lite.db.store import Store
from ziti_lite.ids import new_id

pytestmark = pytest.mark.slow   # a live server, ten routers over TLS

COUNT = 3000


@pytest.fixture(scope="module")
def admin(live):
    return live.admin()


@pytest.fixture(scope="module")
def many(live, admin):
    """``COUNT`` identities written by another connection (as an import would) before any router
    subscribed, and a Dial policy of every identity."""
    other = Store(live.ctl.settings.db)
    now = clock.stamp()
    try:
        with other.write():
            other.executemany("INSERT INTO identities (id, created_at, updated_at, name, type_id, role_attributes)"
                              " VALUES (?, ?, ?, ?, 'Default', '[]')",
                              [(new_id(), now, now, f"rdm-many-{n:05d}") for n in range(COUNT)])
    finally:
        other.close()
    return admin.create("service-policies", {"name": "rdm-many-all", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#all"], "serviceRoles": ["#all"]})


def test_ten_routers_subscribing_at_once_get_the_same_state_and_the_next_change(live, admin, many):
    routers = [enroll_router(live, admin, f"rdm-many-{i}") for i in range(10)]
    got: dict[int, tuple] = {}

    def subscribe(i: int) -> None:
        r = routers[i].connect()
        r.hello_v2(routers[i].id)
        r.subscribe(f"sub-{i}")
        state = r.expect(20500, timeout=30)
        r.client_hello("127.0.0.1", 4800 + i)
        got[i] = (r, state)
    threads = [threading.Thread(target=subscribe, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(got) == list(range(10))
    bodies = {state.body for _, state in got.values()}
    assert len(bodies) == 1                                   # one state, shared
    (body,) = bodies
    assert len(body) > 2 * 64 * 1024                          # written in several pieces
    evs = events(read_pb(body)[1])
    ids = {f[1][0].decode() for a, k, f in evs if k == "identity"}
    assert ids == set(live.ctl.store.column("SELECT id FROM identities"))
    linked = {v.decode() for a, k, f in evs if k == "servicePolicyChange" and f[1] == [many.encode()]
              and f[3] == [messages.RDM_RELATED_IDENTITY] for v in f[2]}
    assert linked == ids

    new = admin.create("identities", {"name": "rdm-many-new", "type": "Device", "isAdmin": False})
    for i, (r, _) in got.items():
        m = r.expect(20501, timeout=5, where=lambda m: new.encode() in m.body)
        assert m.headers[1026] == f"sub-{i}".encode()
    dm = live.ctl.ctrl_server.datamodel
    assert dm.loop is not None
    assert asyncio.run_coroutine_threadsafe(dm.check(), dm.loop).result(30) == 0
    for r, _ in got.values():
        r.close()
