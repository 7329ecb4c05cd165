"""Router-assigned connection ids (header 1012) as the Go SDK uses them, checked with the
pure-Python protocol client: what the Go SDK interop test (``test_go_sdk.py``) found.

* The Go SDK sends DialSuccess without waiting for anything and its crypto header as Data on the
  router's id right behind it (often in the same TLS record): that Data must reach the dialer,
  after the dialer's StateConnected.
* A DialSuccess that comes after the dial was given up is closed on the accepted connection's id:
  a StateClosed on the bind id would close the Go SDK's whole listener."""

from __future__ import annotations

import asyncio

import pytest

from tests.edge import client as ec
from tests.edge import test_router
from tests.edge.test_router import Who, run

pytestmark = pytest.mark.slow   # a live edge router over TLS

net = test_router.net   # the same services and identities as there, on this module's router


def test_data_right_behind_the_dial_success_reaches_the_dialer(edge, net):
    _, ids = net

    async def scenario():
        host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
        h, c = await host.channel(), await client.channel()
        r = await h.bind(5, host.session(ids["svc"], "Bind")["token"], _1012=b"\x01", _1024=b"\x01")
        assert r.content == ec.STATE_CONNECTED
        for n in range(3):
            pending = asyncio.ensure_future(c.dial(20 + n, client.session(ids["svc"], "Dial")["token"]))
            d = await asyncio.wait_for(h.dials.get(), 5)
            assigned = d.u32(ec.ROUTER_CONN_ID)
            # one write: DialSuccess, then at once the host's first data (the Go SDK's crypto header)
            h.reply(d, ec.DIAL_SUCCESS, {ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(0)}, ec.u32(assigned))
            h.data(assigned, b"header-%d" % n)
            h.data(assigned, b"second-%d" % n)
            r = await pending
            assert r.content == ec.STATE_CONNECTED
            first, second = await c.next(20 + n), await c.next(20 + n)
            assert (first.content, first.body) == (ec.DATA, b"header-%d" % n)
            assert (second.content, second.body) == (ec.DATA, b"second-%d" % n)
            c.data(20 + n, b"back")
            m = await h.next(assigned)
            assert (m.content, m.body) == (ec.DATA, b"back")
        await h.close()
        await c.close()
    run(scenario())


def test_a_late_dial_success_closes_the_accepted_id_not_the_listener(edge, net, monkeypatch):
    _, ids = net
    router = edge.ctl.edge_router
    monkeypatch.setattr(router.dialer, "timeout", 0.5)

    async def scenario():
        host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
        h, c = await host.channel(), await client.channel()
        await h.bind(7, host.session(ids["svc"], "Bind")["token"], _1012=b"\x01")
        pending = asyncio.ensure_future(c.dial(1, client.session(ids["svc"], "Dial")["token"]))
        d = await asyncio.wait_for(h.dials.get(), 5)
        r = await pending        # nobody answered in time: the dialer is refused
        assert r.content == ec.STATE_CLOSED
        assigned = d.u32(ec.ROUTER_CONN_ID)
        h.reply(d, ec.DIAL_SUCCESS, {ec.CONN_ID: ec.u32(7), ec.SEQ: ec.u32(0)}, ec.u32(assigned))
        m = await h.next(assigned)
        assert m.content == ec.STATE_CLOSED and m.body == b"dial timed out"
        assert h.queue(7).empty()      # nothing for the bind id: the listener lives on
        router.dialer.timeout = 5.0
        pending = asyncio.ensure_future(c.dial(2, client.session(ids["svc"], "Dial")["token"]))
        d = await asyncio.wait_for(h.dials.get(), 5)
        h.reply(d, ec.DIAL_SUCCESS, {ec.CONN_ID: ec.u32(7), ec.SEQ: ec.u32(0)}, d.headers[ec.ROUTER_CONN_ID])
        assert (await pending).content == ec.STATE_CONNECTED
        await h.close()
        await c.close()
    run(scenario())
