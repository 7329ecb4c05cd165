"""The embedded router on its own thread and loop: the API is served while the router's loop is
busy; both sides see each other's writes through their own connections; a database that is not
a file keeps the router on the API's loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import httpx
import pytest

from tests.conftest import CLIENT
from tests.edge import client as ec
from tests.edge.conftest import enroll, wait_for
from tests.edge.test_router import Who, alive, bound, circuit, identity, net, run  # noqa: F401 - net is a fixture
from tests.enroll.conftest import running

pytestmark = pytest.mark.slow   # a live server with its edge router over TLS


def test_the_api_answers_while_the_routers_loop_is_held(edge, net):  # noqa: F811
    admin, ids = net
    router = edge.ctl.edge_router
    assert router.apart is not None and router.apart.thread is not threading.current_thread()
    release = threading.Event()
    router.apart.loop.call_soon_threadsafe(release.wait, 30)   # the router's loop does nothing else now
    try:
        with pytest.raises(concurrent.futures.TimeoutError):
            router.apart.call(lambda: None, timeout=0.5)
        r = httpx.get(edge.url + CLIENT + "/version", verify=False, timeout=10)
        assert r.status_code == 200 and r.json()["data"]["version"]
        assert admin.get(f"/edge-routers/{router.router_id}").json()["data"]["isOnline"] is True
    finally:
        release.set()
    assert router.apart.call(lambda: "back") == "back"

    async def scenario():   # and the router carries traffic again
        host, client, h, c = await bound(edge, ids, ids["svc"])
        r = await circuit(h, c, 1, 2, client.session(ids["svc"], "Dial")["token"], 9)
        assert r.content == ec.STATE_CONNECTED
        c.data(2, b"after the hold")
        m = await h.next(9, timeout=10)
        assert m.body == b"after the hold"
        await c.close()
        await h.close()
    run(scenario())


def test_each_side_sees_the_others_writes(edge, net):  # noqa: F811
    """The router writes terminators through its own connection, the API sessions and policies
    through the API's: each reads the other's at once."""
    admin, ids = net
    svc = ids["svc"]

    async def scenario():
        host, client, h, c = await bound(edge, ids, svc)
        terms = admin.get(f"/terminators?filter=service=\"{svc}\"").json()["data"]
        assert [t["binding"] for t in terms] == ["edge"]   # the router's insert, read by the API
        r = admin.delete(f"/terminators/{terms[0]['id']}")      # the API's delete, seen by the router
        assert r.status_code == 200, r.text
        closed = await h.next(1, timeout=10)
        assert closed.content == ec.STATE_CLOSED
        assert await alive(h) and await alive(c)
        await c.close()
        await h.close()
    run(scenario())
    wait_for(lambda: admin.get(f"/terminators?filter=service=\"{svc}\"").json()["data"] == [])


def test_a_database_in_memory_keeps_the_router_on_the_apis_loop(template_db, tmp_path):
    with running(template_db, tmp_path, edge=True, db=":memory:") as live:
        router = live.ctl.edge_router
        assert router.apart is None
        _, path = enroll(live, live.admin(), "mem-sdk")
        who = Who(live, identity(path))

        async def scenario():
            c = await who.channel()
            assert await alive(c)
            await c.close()
        asyncio.run(asyncio.wait_for(scenario(), 30))
