"""``/fabric/v1/ws-api``: the event stream as the real ``ziti fabric stream events`` reads it.

Upstream's management channel over a WebSocket: each binary WebSocket message is one channel V2
message (20-byte prefix, headers, body; no hello on this underlay). The CLI sends a
StreamEventsRequest (content type 10040) whose JSON body lists ``subscriptions`` by ``type``;
the answer is a channel Result (success, reply-for the request's sequence), then every event of
those types arrives as a StreamEventsEvent (10041) whose body is the event's JSON, the same bytes
as the events file. Admins only (``zt-session`` on the upgrade request); the stream ends when
that API session ends. Subscription types ziti-lite never produces (``fabric.links``,
``metrics``, ``services``, ``fabric.usage``) are accepted and stay silent; options such as an
entity-counts interval are ignored (``--events-counts-interval`` rules).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers

from .. import permissions
from ..api.ops import websocket
from ..auth import sessions
from ..channel import wire
from .bus import NAMESPACES
from .stream import Stream

if TYPE_CHECKING:
    from .bus import Bus
    from .runtime import EventsController

log = logging.getLogger("ziti_lite.events")

# the channel framing is the one codec's (``channel/wire.py``); these are the management
# channel's own content types, and the one-message-per-frame limit of this underlay
RESULT = wire.Content.RESULT
REPLY_FOR, RESULT_SUCCESS = wire.H.REPLY_FOR, wire.H.RESULT_SUCCESS
STREAM_EVENTS_REQUEST = 10040   # mgmt_pb ContentType StreamEventsRequestType
STREAM_EVENTS_EVENT = 10041     # mgmt_pb ContentType StreamEventsEventType
MAX_MESSAGE = 1 << 20

encode = wire.encode


def decode(data: bytes) -> tuple[int, int, dict[int, bytes], bytes]:
    """(content type, sequence, headers, body) of one whole message; ValueError if malformed."""
    try:
        m = wire.decode_one(data, MAX_MESSAGE)
    except wire.WireError as e:
        raise ValueError(str(e)) from None
    return m.content, m.seq, m.headers, m.body


def result(reply_for: int, success: bool, message: str, seq: int) -> bytes:
    return encode(RESULT, seq, {REPLY_FOR: wire.u32(reply_for),
                                RESULT_SUCCESS: b"\x01" if success else b"\x00"}, message.encode())


def subscribed(body: bytes) -> frozenset[str]:
    """The namespaces of a StreamEventsRequest that ziti-lite produces; ValueError if malformed."""
    request = json.loads(body)
    if not isinstance(request, dict) or request.get("format", "json") != "json":
        raise ValueError("only the json format is supported")
    subs = request.get("subscriptions") or []
    if not isinstance(subs, list) or not all(isinstance(s, dict) and isinstance(s.get("type"), str) for s in subs):
        raise ValueError("subscriptions must be a list of objects with a type")
    return frozenset(s["type"] for s in subs if s["type"] in NAMESPACES)


@websocket("/fabric/v1/ws-api")
async def ws_api(ctl: EventsController, scope: Any, receive: Any, send: Any) -> None:
    first = await receive()
    if first["type"] != "websocket.connect":
        return
    headers = Headers(scope=scope)
    session = sessions.lookup(ctl, headers.get("zt-session"), headers)
    # admins and the ``ops`` entity permission, as upstream's ws-api (``permissions.STREAM``)
    if session is None or session.partial or not permissions.allows(
            session.is_admin, session.permissions, permissions.STREAM):
        await send({"type": "websocket.close", "code": 1008})   # the upgrade is refused (403)
        return
    await send({"type": "websocket.accept"})
    channel = _Channel(ctl.events, session.id, receive, send)
    task = asyncio.create_task(channel.reader())
    try:
        await channel.pump()
    except Exception:  # the peer went away mid-send
        log.debug("ws-api stream ended", exc_info=True)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        if channel.stream is not None:
            channel.bus.unsubscribe(channel.stream)


class _Channel:
    """One accepted ws-api connection: the requests it reads (``reader``) and what it sends, the
    answers and then the events of its subscriptions (``pump``), numbered by one sequence."""

    def __init__(self, bus: Bus, api_session_id: str, receive: Any, send: Any) -> None:
        self.bus, self.api_session_id = bus, api_session_id
        self.receive, self.send = receive, send
        self.stream: Stream | None = None
        self.seq = 0
        self.outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def reader(self) -> None:
        while True:
            msg = await self.receive()
            if msg["type"] == "websocket.disconnect":
                break
            data = msg.get("bytes")
            if data is None:
                continue   # text frames carry nothing on this channel
            try:
                content, rseq, _, body = decode(data)
            except ValueError:
                break
            if content != STREAM_EVENTS_REQUEST:
                continue   # latency probes, heartbeats: nothing to answer
            self.seq += 1
            try:
                types = subscribed(body)
            except ValueError as e:
                await self.outgoing.put(result(rseq, False, str(e), self.seq))
                continue
            self._subscribe(types)
            await self.outgoing.put(result(rseq, True, "success", self.seq))
        await self.outgoing.put(None)

    def _subscribe(self, types: frozenset[str]) -> None:
        stream = self.stream
        if stream is None:
            self.stream = Stream(types, self.api_session_id)
            self.bus.subscribe(self.stream)
        else:
            stream.wanted = stream.wanted | types if stream.wanted is not None else None
            stream.types = None if stream.wanted is None else stream.wanted | {"edge.apiSessions"}
            self.bus.rewant()

    async def pump(self) -> None:
        outgoing, send = self.outgoing, self.send
        while True:
            stream = self.stream
            if stream is None:
                item = await outgoing.get()
                if item is None:
                    return
                await send({"type": "websocket.send", "bytes": item})
                continue
            get_out = asyncio.ensure_future(outgoing.get())
            get_event = asyncio.ensure_future(stream.queue.get())
            done, _ = await asyncio.wait({get_out, get_event}, return_when=asyncio.FIRST_COMPLETED)
            for fut in (get_out, get_event):
                if fut not in done:
                    fut.cancel()
            if get_out in done:
                item = get_out.result()
                if item is None:
                    return
                await send({"type": "websocket.send", "bytes": item})
            if get_event in done:
                line = get_event.result()
                if not line:   # the API session ended
                    await send({"type": "websocket.close", "code": 1000})
                    return
                self.seq += 1
                await send({"type": "websocket.send", "bytes": encode(STREAM_EVENTS_EVENT, self.seq, {}, line)})
