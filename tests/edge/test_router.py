"""The embedded router against a pure-Python protocol client (``client.py``): what real SDKs
never send (bad frames, floods, peers that stop reading, hosts that never answer), the exact
answers SDKs depend on, terminators and revocation as the API shows them."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest

from tests.conftest import CLIENT
from tests.edge import client as ec
from tests.edge.conftest import enroll, wait_for
from ziti_lite.edge.channel import CHANNEL_QUEUE, CONN_QUEUE

pytestmark = pytest.mark.slow   # a live server with its edge router over TLS


@pytest.fixture(scope="module")
def net(edge):
    admin = edge.admin()
    ids = {}
    ids["svc"] = admin.create("services", {"name": "p-plain", "encryptionRequired": False, "roleAttributes": ["p"]})
    ids["enc"] = admin.create("services", {"name": "p-enc", "encryptionRequired": True, "roleAttributes": ["p"]})
    for kind, role in (("Bind", "#p-host"), ("Dial", "#p-client")):
        admin.create("service-policies", {"name": f"p-{kind}", "type": kind, "semantic": "AnyOf",
                                          "identityRoles": [role], "serviceRoles": ["#p"]})
    for name, role in (("p-host", "p-host"), ("p-client", "p-client"), ("p-other", "p-client")):
        iid, path = enroll(edge, admin, name, [role])
        ids[name] = iid
        ids[name + ".id"] = identity(path)
    return admin, ids


def identity(path: str) -> ec.Identity:
    with open(path) as f:
        d = json.load(f)["id"]
    return ec.Identity(d["cert"], d["key"], d["ca"])


class Who:
    """An identity logged in over the client API with its certificate."""

    def __init__(self, edge, ident: ec.Identity):
        self.edge, self.ident = edge, ident
        self.http, r = edge.cert_login(ident.cert_pem, ident.key_pem)
        assert r.status_code == 200, r.text
        self.token = r.json()["data"]["token"]
        self.api_session_id = r.json()["data"]["id"]

    def session(self, service_id: str, kind: str) -> dict:
        r = self.http.post(CLIENT + "/sessions", json={"serviceId": service_id, "type": kind},
                           headers={"zt-session": self.token})
        assert r.status_code == 201, r.text
        return r.json()["data"]

    async def channel(self, hello: bool = True) -> ec.EdgeClient:
        c = await ec.EdgeClient.open("127.0.0.1", self.edge.ctl.edge_router.port, self.ident)
        if hello:
            r = await c.hello(self.token)
            assert r.content == ec.RESULT and r.headers[ec.RESULT_SUCCESS] == b"\x01"
        return c


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def closed_soon(c: ec.EdgeClient, timeout: float = 5) -> bool:
    try:
        await asyncio.wait_for(c.closed.wait(), timeout)
        return True
    except TimeoutError:
        return False


async def alive(c: ec.EdgeClient) -> bool:
    """A latency probe is answered (with its reflected header)."""
    r = await c.request(ec.LATENCY, {128: struct.pack("<Q", 12345)}, timeout=5)
    return r.content == ec.RESULT and r.headers.get(128) == struct.pack("<Q", 12345)


async def bound(edge, ids: dict, service: str) -> tuple[Who, Who, ec.EdgeClient, ec.EdgeClient]:
    """The host and the client of the test network, a channel each, the host bound to
    ``service`` as connection 1."""
    host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
    h, c = await host.channel(), await client.channel()
    await h.bind(1, host.session(service, "Bind")["token"])
    return host, client, h, c


async def circuit(host: ec.EdgeClient, dialer: ec.EdgeClient, bind_id: int, dial_id: int, dial_token: str,
                  accept_id: int, **extra) -> ec.Msg:
    """Dial through the router; the host accepts with ``accept_id``. Returns the dialer's reply."""
    pending = asyncio.ensure_future(dialer.dial(dial_id, dial_token, **extra))
    d = await asyncio.wait_for(host.dials.get(), 5)
    assert d.u32(ec.CONN_ID) == bind_id
    connected = await host.accept(d, accept_id)
    assert connected.content == ec.STATE_CONNECTED
    return await pending


# ------------------------------------------------------------------ hello
def test_hello_is_acknowledged_then_a_bad_token_or_certificate_closes(edge, net):
    admin, ids = net

    async def scenario():
        client = Who(edge, ids["p-client.id"])
        other = Who(edge, ids["p-other.id"])
        # an unknown token: acknowledged like upstream, then closed (the SDK refreshes its session)
        c = await client.channel(hello=False)
        r = await c.hello("00000000-0000-4000-8000-000000000000")
        assert r.headers[ec.RESULT_SUCCESS] == b"\x01"
        assert await closed_soon(c)
        # another identity's token with this identity's certificate
        c = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, ids["p-client.id"])
        await c.hello(other.token)
        assert await closed_soon(c)
        # the right pair works and answers latency probes
        c = await client.channel()
        assert await alive(c)
        assert not c.closed.is_set()
        await c.close()
    run(scenario())


def test_hello_reply_headers(edge, net):
    admin, ids = net

    async def scenario():
        who = Who(edge, ids["p-client.id"])
        c = await who.channel(hello=False)
        r = await c.hello(who.token)
        assert r.seq == -1   # the Go channel's hello sequence
        assert r.headers[ec.REPLY_FOR] == struct.pack("<i", 0)
        assert r.headers[8] == edge.ctl.edge_router.router_id.encode()
        assert r.headers[4].decode().startswith("v2.0.3|ziti-lite-")
        assert r.headers[ec.SUPPORTS_BIND_SUCCESS] == b"\x01"
        await c.close()
    run(scenario())


def test_alpn_ziti_edge_is_offered(edge, net):
    """C SDK 1.5+ and the Go router speak ALPN ``ziti-edge``; SDKs that offer nothing still connect."""
    admin, ids = net

    async def scenario():
        ctx = ec.tls_context(ids["p-client.id"], ids["p-client.id"].ca_pem)
        ctx.set_alpn_protocols(["ziti-edge"])
        _, writer = await asyncio.open_connection("127.0.0.1", edge.ctl.edge_router.port, ssl=ctx,
                                                  server_hostname="127.0.0.1")
        assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "ziti-edge"
        writer.close()
        await writer.wait_closed()
    run(scenario())


# ------------------------------------------------------------------ framing trouble stays on its channel
@pytest.mark.parametrize("trouble", ["bad-magic", "huge-hello", "huge-headers", "truncated-header", "before-hello"])
def test_broken_frames_close_only_their_channel(edge, net, trouble):
    admin, ids = net

    async def scenario():
        who = Who(edge, ids["p-client.id"])
        bystander = await who.channel()
        c = await who.channel(hello=trouble not in ("huge-hello", "before-hello"))
        if trouble == "bad-magic":
            c.raw(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 20)
        elif trouble == "huge-hello":
            c.send(ec.HELLO, {ec.SESSION_TOKEN: b"x" * 5000})
        elif trouble == "huge-headers":
            c.raw(ec.MAGIC + struct.pack("<iiII", ec.DATA, 5, 10 * 1024 * 1024, 0))
        elif trouble == "truncated-header":
            c.raw(ec.MAGIC + struct.pack("<iiII", ec.DATA, 5, 6, 0) + b"\x01\x00\x00\x00\x09\x00")
        elif trouble == "before-hello":
            c.send(ec.BIND, {ec.CONN_ID: ec.u32(1)}, b"token")
        assert await closed_soon(c)
        assert await alive(bystander)
        await bystander.close()
    run(scenario())


def test_unknown_content_types_are_ignored(edge, net):
    admin, ids = net

    async def scenario():
        c = await Who(edge, ids["p-client.id"]).channel()
        for content in (7, 999, 60796, 61000, -5):
            c.send(content, {ec.CONN_ID: ec.u32(3)}, b"whatever")
        assert await alive(c)
        await c.close()
    run(scenario())


# ------------------------------------------------------------------ sessions: the texts SDKs react to
def test_refusals_carry_the_texts_sdks_react_to(edge, net):
    admin, ids = net

    async def scenario():
        who = Who(edge, ids["p-client.id"])
        c = await who.channel()
        r = await c.dial(1, "00000000-0000-4000-8000-000000000000")
        assert r.content == ec.STATE_CLOSED and r.body == b"Invalid Session"
        dial_enc = who.session(ids["enc"], "Dial")["token"]
        r = await c.dial(2, dial_enc)   # no public key for an encryptionRequired service
        assert r.content == ec.STATE_CLOSED and b"encryption required" in r.body
        dial_plain = who.session(ids["svc"], "Dial")["token"]
        r = await c.bind(3, dial_plain)
        assert r.content == ec.STATE_CLOSED and r.body == b"incorrect session type"
        r = await c.dial(4, dial_plain)   # nobody hosts it
        assert r.content == ec.STATE_CLOSED and r.body == f"service {ids['svc']} has no terminators".encode()
        # a session of another API session of the same identity: the SDK must fetch a new one
        later = Who(edge, ids["p-client.id"])
        c2 = await later.channel()
        r = await c2.dial(1, dial_plain)
        assert r.content == ec.STATE_CLOSED and r.body == b"Invalid Session"
        await c.close()
        await c2.close()
    run(scenario())


def test_a_dial_after_its_policy_is_gone_is_an_invalid_session(edge, net):
    """Upstream deletes a session once its policy access is gone, so its router answers the next
    Dial "Invalid Session" (the text that makes an SDK drop the session and ask again)."""
    admin, ids = net
    svc = admin.create("services", {"name": "p-lost", "encryptionRequired": False, "roleAttributes": ["p-lost"]})
    policy = admin.create("service-policies", {"name": "p-lost-dial", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": ["#p-client"], "serviceRoles": ["#p-lost"]})

    async def scenario():
        who = Who(edge, ids["p-client.id"])
        c = await who.channel()
        token = who.session(svc, "Dial")["token"]
        assert admin.delete(f"/service-policies/{policy}").status_code == 200
        r = await c.dial(1, token)
        assert r.content == ec.STATE_CLOSED and r.body == b"Invalid Session"
        await c.close()
    run(scenario())


# ------------------------------------------------------------------ terminators
def test_terminators_follow_binds(edge, net):
    admin, ids = net

    async def scenario():
        host = Who(edge, ids["p-host.id"])
        bind = host.session(ids["svc"], "Bind")["token"]
        h = await host.channel()
        r = await h.bind(7, bind, _1004=struct.pack("<i", 42), _1005=struct.pack("<I", 1), _1006=b"inst-a")
        assert r.content == ec.STATE_CONNECTED and r.u32(ec.CONN_ID) == 7
        terms = admin.get(f'/terminators?filter=service="{ids["svc"]}"').json()["data"]
        assert len(terms) == 1
        t = terms[0]
        assert (t["binding"], t["cost"], t["precedence"], t["identity"]) == ("edge", 42, "required", "inst-a")
        assert t["router"]["id"] == edge.ctl.edge_router.router_id
        assert [x["id"] for x in admin.get(f"/services/{ids['svc']}/terminators").json()["data"]] == [t["id"]]
        client_view = host.http.get(CLIENT + f"/services/{ids['svc']}/terminators", headers={"zt-session": host.token})
        assert client_view.status_code == 200 and [x["id"] for x in client_view.json()["data"]] == [t["id"]]
        # StateClosed on the bind (how a C SDK closes a listener) removes it
        h.send(ec.STATE_CLOSED, {ec.CONN_ID: ec.u32(7), ec.SEQ: ec.u32(1)})
        await asyncio.sleep(0.3)
        assert admin.get(f'/terminators?filter=service="{ids["svc"]}"').json()["data"] == []
        # so does the loss of the channel
        r = await h.bind(8, bind)
        assert r.content == ec.STATE_CONNECTED
        assert len(admin.get(f'/terminators?filter=service="{ids["svc"]}"').json()["data"]) == 1
        await h.close()
        wait_for(lambda: admin.get(f'/terminators?filter=service="{ids["svc"]}"').json()["data"] == [])
        # deleting the terminator through the API tells the host, which re-binds
        h = await host.channel()
        await h.bind(9, bind)
        tid = admin.get(f'/terminators?filter=service="{ids["svc"]}"').json()["data"][0]["id"]
        assert admin.delete(f"/terminators/{tid}").status_code == 200
        m = await h.next(9, timeout=5)
        assert m.content == ec.STATE_CLOSED
        await h.close()
    run(scenario())


def test_bind_success_and_router_assigned_connection_ids(edge, net):
    """Newer SDKs (Go SDK, C SDK 1.6+): the router picks hosted connection ids from 0x80000000 up,
    sends BindSuccess, and sends no StateConnected after DialSuccess."""
    admin, ids = net

    async def scenario():
        host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
        h, c = await host.channel(), await client.channel()
        r = await h.bind(5, host.session(ids["svc"], "Bind")["token"], _1012=b"\x01", _1024=b"\x01")
        assert r.content == ec.STATE_CONNECTED and r.headers.get(ec.ROUTER_CONN_ID) == b"\x01"
        ok = await asyncio.wait_for(h.other.get(), 5)
        assert ok.content == ec.BIND_SUCCESS and ok.u32(ec.CONN_ID) == 5
        pending = asyncio.ensure_future(c.dial(11, client.session(ids["svc"], "Dial")["token"], _1008=b"caller"))
        d = await asyncio.wait_for(h.dials.get(), 5)
        assigned = d.u32(ec.ROUTER_CONN_ID)
        assert assigned >= 0x80000000 and d.headers[ec.CALLER_ID] == b"caller" and ec.CIRCUIT_ID in d.headers
        h.reply(d, ec.DIAL_SUCCESS, {ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(0)}, ec.u32(assigned))
        r = await pending
        assert r.content == ec.STATE_CONNECTED and r.headers[ec.CIRCUIT_ID] == d.headers[ec.CIRCUIT_ID]
        c.data(11, b"to-host")
        m = await h.next(assigned)
        assert (m.content, m.body) == (ec.DATA, b"to-host")
        h.data(assigned, b"to-dialer", fin=True)
        m = await c.next(11)
        assert (m.content, m.body, m.u32(ec.FLAGS)) == (ec.DATA, b"to-dialer", 1)
        await h.close()
        m = await c.next(11)   # the host's channel went: the dialer's connection is closed
        assert m.content == ec.STATE_CLOSED
        await c.close()
    run(scenario())


# ------------------------------------------------------------------ dial failures
def test_a_host_that_never_answers_is_skipped_in_time(edge, net, monkeypatch):
    admin, ids = net
    router = edge.ctl.edge_router
    monkeypatch.setattr(router.dialer, "timeout", 1.0)

    async def scenario():
        host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
        mute, good = await host.channel(), await host.channel()
        bind = host.session(ids["svc"], "Bind")["token"]
        await mute.bind(1, bind, _1004=struct.pack("<i", 1))     # cheaper: tried first
        await good.bind(1, bind, _1004=struct.pack("<i", 9))
        c = await client.channel()
        pending = asyncio.ensure_future(c.dial(1, client.session(ids["svc"], "Dial")["token"]))
        unanswered = await asyncio.wait_for(mute.dials.get(), 5)     # ... and not answered in time
        d = await asyncio.wait_for(good.dials.get(), 5)
        await good.accept(d, 77)
        r = await pending
        assert r.content == ec.STATE_CONNECTED
        late = await asyncio.wait_for(mute.accept(unanswered, 78), 5)   # too late: told it is over
        assert late.content == ec.STATE_CLOSED and late.body == b"dial timed out"
        # a host that answers DialFailed is skipped too; with no host left the dialer hears why
        await good.close()
        pending = asyncio.ensure_future(c.dial(2, client.session(ids["svc"], "Dial")["token"]))
        d = await asyncio.wait_for(mute.dials.get(), 5)
        mute.reply(d, ec.DIAL_FAILED, {ec.CONN_ID: ec.u32(1), ec.SEQ: ec.u32(0)}, b"not listening")
        r = await pending
        assert r.content == ec.STATE_CLOSED and r.body == b"not listening"
        await mute.close()
        await c.close()
    run(scenario())


# ------------------------------------------------------------------ relayed data on the wire
def test_data_arrives_intact_whatever_its_header_order_size_and_cuts(edge, net):
    """Data frames cross with the receiver's connection id and the sender's sequence and flags,
    whatever the order of their headers (a Go channel writes them in map order), with extra
    headers, empty or larger than the router's shared read buffer, and however the sender's
    stream is cut into TLS records (a message split across reads, many messages in one)."""
    admin, ids = net

    async def scenario():
        host, client, h, c = await bound(edge, ids, ids["svc"])
        token = client.session(ids["svc"], "Dial")["token"]
        assert (await circuit(h, c, 1, 5, token, 77)).content == ec.STATE_CONNECTED
        big = bytes(range(256)) * 4096                      # 1 MiB
        sent = [
            ({ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(1)}, b"plain"),
            ({ec.SEQ: ec.u32(2), ec.CONN_ID: ec.u32(5)}, b"sequence first"),
            ({ec.FLAGS: ec.u32(4), ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(3)}, b"flags first"),
            ({ec.SEQ: ec.u32(4), ec.FLAGS: ec.u32(0), ec.CONN_ID: ec.u32(5)}, b"conn id last"),
            ({ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(5), 1015: b"\x01" * 8}, b"another header"),
            ({ec.CONN_ID: ec.u32(5), ec.SEQ: b"\x06\x00"}, b"a short sequence"),
            ({ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(7)}, b""),
            ({ec.CONN_ID: ec.u32(5), ec.SEQ: ec.u32(8)}, big),
            ({ec.SEQ: ec.u32(9), ec.CONN_ID: ec.u32(5)}, big[:100_000]),
        ]
        stream = b"".join(ec.encode(ec.DATA, 100 + i, hs, body) for i, (hs, body) in enumerate(sent))
        for cut in (1, 7, 19, 20, 21, 1000, 40_000, 300_000, len(stream)):   # records of odd sizes
            pos = 0
            while pos < len(stream):
                c.raw(stream[pos:pos + cut])
                pos += cut
                if cut < 100 and pos > 200:              # the rest in one go
                    c.raw(stream[pos:])
                    pos = len(stream)
                await c.drain()
            seqs = []
            for hs, body in sent:
                m = await h.next(77)
                assert m.content == ec.DATA and m.body == body
                assert m.headers[ec.CONN_ID] == ec.u32(77)
                assert m.headers[ec.SEQ] == hs[ec.SEQ]
                assert m.headers.get(ec.FLAGS) == hs.get(ec.FLAGS)
                assert set(m.headers) <= {ec.CONN_ID, ec.SEQ, ec.FLAGS}
                seqs.append(m.seq)
            assert seqs == sorted(set(seqs))                # the router's own sequence, rising
        assert await alive(c) and await alive(h)
        await c.close()
        await h.close()
    run(scenario())


def test_a_receiver_that_pauses_gets_everything_in_order_once_it_reads_again(edge, net):
    """While a receiver does not read, its sender's channel stops being read (flow control);
    once it reads again, the messages the router read before pausing go first, then the rest."""
    admin, ids = net

    async def scenario():
        host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
        h = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, ids["p-host.id"], limit=2 ** 16)
        await h.hello(host.token)
        await h.bind(1, host.session(ids["svc"], "Bind")["token"])
        c = await client.channel()
        token = client.session(ids["svc"], "Dial")["token"]
        assert (await circuit(h, c, 1, 0, token, 9)).content == ec.STATE_CONNECTED
        h.writer.transport.pause_reading()
        n, size = 1000, 20_000      # 20 MB: beyond the socket buffers and what the router queues
        for i in range(n):
            c.data(0, i.to_bytes(4, "little") * (size // 4))
        for _ in range(100):        # the router stops reading the sender meanwhile
            if any(ch.reading_paused for ch in list(edge.ctl.edge_router.channels)):
                break
            await asyncio.sleep(0.05)
        assert any(ch.reading_paused for ch in list(edge.ctl.edge_router.channels))
        h.writer.transport.resume_reading()
        for i in range(n):
            m = await h.next(9, timeout=20)
            assert m.content == ec.DATA and m.body == i.to_bytes(4, "little") * (size // 4), i
        assert await alive(c)
        await c.close()
        await h.close()
    run(scenario())


# ------------------------------------------------------------------ many connections, slow peers
def test_a_thousand_connections_on_one_channel(edge, net):
    admin, ids = net

    async def scenario():
        host, client, h, c = await bound(edge, ids, ids["svc"])
        token = client.session(ids["svc"], "Dial")["token"]

        async def accept_all():
            for n in range(1000):
                h.accept(await h.dials.get(), 10_000 + n)
        acceptor = asyncio.ensure_future(accept_all())
        replies = await asyncio.gather(*(c.dial(i, token, timeout=30) for i in range(1000)))
        assert all(r.content == ec.STATE_CONNECTED for r in replies)
        await acceptor
        assert edge.ctl.edge_router.stats()["connections"] >= 2000
        for i in range(1000):
            c.data(i, f"m{i}".encode())
        got = set()
        for q in list(h.conns.values()):
            while not q.empty():
                got.add(q.get_nowait().body)
        while len(got) < 1000:
            await asyncio.sleep(0.05)
            for q in list(h.conns.values()):
                while not q.empty():
                    got.add(q.get_nowait().body)
        assert got == {f"m{i}".encode() for i in range(1000)}
        await c.close()
        await h.close()
    run(scenario())


async def mute_host(edge, ids, circuits: int) -> tuple[ec.EdgeClient, ec.EdgeClient]:
    """A host with a small socket buffer and ``circuits`` circuits (dialer conn ids 0..n-1) from
    one dialer channel, which then stops reading. Returns (host, dialer)."""
    host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])
    h = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, ids["p-host.id"], limit=2 ** 16)
    await h.hello(host.token)
    await h.bind(1, host.session(ids["svc"], "Bind")["token"])
    c = await client.channel()
    token = client.session(ids["svc"], "Dial")["token"]
    for i in range(circuits):
        assert (await circuit(h, c, 1, i, token, 600 + i)).content == ec.STATE_CONNECTED
    h._task.cancel()   # the host stops reading
    return h, c


def test_a_receiver_that_stops_reading_costs_only_its_own_connection(edge, net):
    admin, ids = net
    router = edge.ctl.edge_router

    async def scenario():
        h, c = await mute_host(edge, ids, 1)
        chunk = b"x" * 65536
        for _ in range(400):    # 25 MiB towards a receiver that takes nothing
            c.data(0, chunk)
        await c.drain()
        # the router holds at most about one queue's worth for it, then stops the feeding
        # channel and, once stalled for seconds, closes that connection only
        queued = [x.queued for ch in list(router.channels) for x in list(ch.conns.values())]
        assert max(queued, default=0) <= CONN_QUEUE + len(chunk) + 1024
        m = await c.next(0, timeout=20)
        while m.content == ec.DATA:
            m = await c.next(0, timeout=20)
        assert m.content == ec.STATE_CLOSED
        assert await alive(c)    # the dialer's channel itself is fine
        await c.close()
        await h.close()
    run(scenario())


def test_a_receiving_channel_holds_a_bounded_total_across_its_connections(edge, net):
    admin, ids = net
    router = edge.ctl.edge_router

    async def scenario():
        h, c = await mute_host(edge, ids, 24)
        chunk = b"y" * 65536
        for _ in range(12):          # 24 connections x 768 KiB: each under its own limit
            for i in range(24):
                c.data(i, chunk)
        await asyncio.sleep(1.0)
        held = max((ch.queued for ch in list(router.channels)), default=0)
        assert held <= CHANNEL_QUEUE + len(chunk) + 1024, held
        assert await closed_soon(c, 0.1) is False
        await c.close()
        await h.close()
    run(scenario())


# ------------------------------------------------------------------ revocation and liveness
def test_disabling_the_identity_closes_its_channel(edge, net):
    admin, ids = net

    async def scenario():
        iid, path = enroll(edge, admin, "p-disable-me", ["p-client"])
        who = Who(edge, identity(path))
        c = await who.channel()
        assert admin.get(f"/identities/{iid}").json()["data"]["hasEdgeRouterConnection"] is True
        r = admin.post(f"/identities/{iid}/disable", json={"durationMinutes": 0})
        assert r.status_code == 200, r.text
        assert await closed_soon(c, 3)
        wait_for(lambda: admin.get(f"/identities/{iid}").json()["data"]["hasEdgeRouterConnection"] is False)
    run(scenario())


def test_a_deleted_service_takes_its_terminators_and_circuits(edge, net):
    admin, ids = net

    async def scenario():
        sid = admin.create("services", {"name": "p-doomed", "encryptionRequired": False, "roleAttributes": ["p"]})
        host, client, h, c = await bound(edge, ids, sid)
        r = await circuit(h, c, 1, 1, client.session(sid, "Dial")["token"], 300)
        assert r.content == ec.STATE_CONNECTED
        assert admin.delete(f"/services/{sid}").status_code == 200
        assert (await c.next(1, timeout=3)).content == ec.STATE_CLOSED
        assert (await h.next(1, timeout=3)).content == ec.STATE_CLOSED   # the bind: re-bind is up to the SDK
        assert admin.get(f'/terminators?filter=service="{sid}"').json()["data"] == []
        await h.close()
        await c.close()
    run(scenario())


def test_a_connected_sdk_keeps_its_api_session_alive(edge, net):
    admin, ids = net
    ctl = edge.ctl

    async def scenario():
        who = Who(edge, ids["p-client.id"])
        c = await who.channel()
        ctl.activity.pop(who.token, None)
        await asyncio.sleep(1.2)
        assert who.token in ctl.activity   # refreshed by the router while the channel is up
        await c.close()
    run(scenario())


def test_the_api_shows_the_router(edge, net):
    admin, ids = net
    router = edge.ctl.edge_router
    url = f"tls://127.0.0.1:{router.port}"
    er = admin.get(f"/edge-routers/{router.router_id}").json()["data"]
    assert er["name"] == "ziti-lite" and er["isOnline"] is True and er["isVerified"] is True
    assert er["supportedProtocols"] == {"tls": url} and er["syncStatus"] == "SYNC_DONE"
    assert er["roleAttributes"] == ["public"]
    # upstream's edge router symbols for the live state are online and connected (isOnline is refused)
    online = admin.get("/edge-routers?filter=online=true").json()["data"]
    assert admin.get("/edge-routers?filter=connected=true").json()["data"] == online
    assert admin.get("/edge-routers?filter=isOnline=true").status_code == 400
    assert [x["id"] for x in online] == [router.router_id]
    who = Who(edge, ids["p-client.id"])
    mine = who.http.get(CLIENT + "/current-identity/edge-routers", headers={"zt-session": who.token}).json()["data"]
    assert [(x["name"], x["supportedProtocols"]) for x in mine] == [("ziti-lite", {"tls": url})]
    session = who.session(ids["svc"], "Dial")
    assert [(x["name"], x["supportedProtocols"]["tls"], x["urls"]["tls"]) for x in session["edgeRouters"]] == [
        ("ziti-lite", url, url)]
    names = {p["name"] for p in admin.get("/edge-router-policies").json()["data"]}
    assert "all-endpoints-public-routers" in names
    names = {p["name"] for p in admin.get("/service-edge-router-policies").json()["data"]}
    assert "all-routers-all-services" in names


def test_an_api_session_certificate_opens_a_channel(edge, net, keys):
    """SDKs may present a short-lived certificate issued to their API session instead of their
    enrolled one; it is good for that API session only."""
    from tests.enroll.conftest import csr
    admin, ids = net

    async def scenario():
        who = Who(edge, ids["p-client.id"])
        r = who.http.post(CLIENT + "/current-api-session/certificates", json={"csr": csr(keys[4], "sess-cert")},
                          headers={"zt-session": who.token})
        assert r.status_code == 201, r.text
        session_ident = ec.Identity(r.json()["data"]["certificate"], keys[4], ids["p-client.id"].ca_pem)
        c = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, session_ident)
        await c.hello(who.token)
        assert await alive(c)
        await c.close()
        other = Who(edge, ids["p-client.id"])   # same identity, another API session
        c = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, session_ident)
        await c.hello(other.token)
        assert await closed_soon(c)
    run(scenario())


def test_route_path_names_the_router_while_a_circuit_runs(edge, net):
    admin, ids = net

    async def scenario():
        host, client, h, c = await bound(edge, ids, ids["svc"])
        dial = client.session(ids["svc"], "Dial")
        assert admin.get(f"/sessions/{dial['id']}/route-path").json()["data"] == {"routePath": []}
        r = await circuit(h, c, 1, 1, dial["token"], 400)
        assert r.content == ec.STATE_CONNECTED
        path = admin.get(f"/sessions/{dial['id']}/route-path").json()["data"]["routePath"]
        assert path == [edge.ctl.edge_router.router_id]
        await h.close()
        await c.close()
    run(scenario())


def test_posture_that_stops_passing_closes_the_connection(edge, net):
    admin, ids = net

    async def scenario():
        sid = admin.create("services", {"name": "p-guarded", "encryptionRequired": False,
                                        "roleAttributes": ["guarded"]})
        check = admin.create("posture-checks", {"name": "p-mac", "typeId": "MAC", "roleAttributes": ["p-mac"],
                                                "macAddresses": ["AA:BB:CC:DD:EE:FF"]})
        admin.create("service-policies", {"name": "p-guarded-dial", "type": "Dial", "semantic": "AnyOf",
                                          "identityRoles": ["#p-client"], "serviceRoles": ["@" + sid],
                                          "postureCheckRoles": ["#p-mac"]})
        admin.create("service-policies", {"name": "p-guarded-bind", "type": "Bind", "semantic": "AnyOf",
                                          "identityRoles": ["#p-host"], "serviceRoles": ["@" + sid]})
        host, client = Who(edge, ids["p-host.id"]), Who(edge, ids["p-client.id"])

        def respond(macs):
            r = client.http.post(CLIENT + "/posture-response",
                                 json={"id": check, "typeId": "MAC", "macAddresses": macs},
                                 headers={"zt-session": client.token})
            assert r.status_code == 201, r.text
        respond(["aa:bb:cc:dd:ee:ff"])
        h, c = await host.channel(), await client.channel()
        await h.bind(1, host.session(sid, "Bind")["token"])
        r = await circuit(h, c, 1, 1, client.session(sid, "Dial")["token"], 700)
        assert r.content == ec.STATE_CONNECTED
        respond(["11:22:33:44:55:66"])          # the device no longer qualifies
        assert (await c.next(1, timeout=3)).content == ec.STATE_CLOSED
        assert (await h.next(700, timeout=3)).content == ec.STATE_CLOSED
        await h.close()
        await c.close()
    run(scenario())


def test_metrics_count_edge_bytes_across_closed_channels(edge, net):
    admin, ids = net

    def metric(name: str) -> float:
        text = admin.client.get(edge.url + "/metrics").text
        return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")
                          or line.startswith(name + "{")))

    async def scenario():
        before = metric('ziti_lite_edge_router_bytes_total{direction="in"}')
        c = await Who(edge, ids["p-client.id"]).channel()
        c.send(999, {}, b"z" * 5000)     # ignored, but counted
        assert await alive(c)
        await c.close()
        await asyncio.sleep(0.3)
        assert metric('ziti_lite_edge_router_bytes_total{direction="in"}') >= before + 5000
    run(scenario())


def test_traceroute_is_answered_hop_by_hop(edge, net):
    """``ziti edge traceroute``: hop 1 is this router as ingress, hop 2 as egress, hop 3 the SDK at
    the other end (the probe is passed to it and its answer passed back)."""
    admin, ids = net
    TRACE, TRACE_RESPONSE, HOPS, TIMESTAMP, HOP_TYPE = 60796, 60797, 1016, 1015, 1017

    async def scenario():
        host, client, h, c = await bound(edge, ids, ids["svc"])
        r = await circuit(h, c, 1, 1, client.session(ids["svc"], "Dial")["token"], 401)
        assert r.content == ec.STATE_CONNECTED
        ts = struct.pack("<Q", 987654321)

        async def probe(hops: int, timeout: float = 10) -> ec.Msg:
            return await c.request(TRACE, {ec.CONN_ID: ec.u32(1), HOPS: ec.u32(hops), TIMESTAMP: ts}, timeout=timeout)
        for hops in (1, 2):
            answer = await probe(hops)
            assert answer.content == TRACE_RESPONSE and answer.headers[HOP_TYPE] == b"xgress/edge"
            assert answer.headers[TIMESTAMP] == ts and answer.u32(ec.CONN_ID) == 1 and answer.u32(HOPS) == 0
        pending = asyncio.ensure_future(probe(3))
        far = await asyncio.wait_for(h.other.get(), 5)
        while far.content != TRACE:
            far = await asyncio.wait_for(h.other.get(), 5)
        assert far.u32(HOPS) == 1 and far.headers[TIMESTAMP] == ts
        # as the Go SDK answers: not a reply, but naming the request it answers (header 1019)
        h.send(TRACE_RESPONSE, {ec.CONN_ID: ec.u32(401), HOPS: ec.u32(0), TIMESTAMP: ts, HOP_TYPE: b"sdk/test",
                                1018: b"", 1019: far.headers[1019]})
        answer = await pending
        assert answer.headers[HOP_TYPE] == b"sdk/test" and answer.u32(ec.CONN_ID) == 1 and answer.u32(HOPS) == 0
        await h.close()
        await c.close()
    run(scenario())
