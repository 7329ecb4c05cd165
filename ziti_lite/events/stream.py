"""``GET /ziti-lite/v1/events``: the event stream as server-sent events, for browsers and scripts.

Admins only: the ``zt-session`` header, or (``EventSource`` cannot send headers) a ticket from
``POST /ziti-lite/v1/events/tickets``, good once and for 60 seconds, that stands for the admin's
API session. ``?types=entityChange,edge.apiSessions`` chooses namespaces (default all). Each
event is one ``data:`` line of the same JSON as the events file; a comment line every 15 s keeps
proxies from closing a quiet stream. The stream ends when its API session ends (logout, deletion,
expiry) or the client goes; a client too slow to read loses events (counted as ``sse`` drops).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import time
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from .. import clock, permissions
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import op
from ..errors import CouldNotValidate, Unauthorized
from ..permissions import STREAM
from .bus import Bus, Subscriber, parse_types

TICKET_SECONDS = 60
KEEPALIVE_SECONDS = 15.0
QUEUE = 1000
_END = b""


class Stream(Subscriber):
    """One SSE client: its own bounded queue, filled by the bus, drained by the response."""

    kind = "sse"

    def __init__(self, types: frozenset[str] | None, api_session_id: str):
        self.wanted = types
        # the API session's own end is always watched, whatever the client chose
        self.types = None if types is None else types | {"edge.apiSessions"}
        self.api_session_id = api_session_id
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE)
        self.ended = False

    def offer(self, namespace: str, line: bytes, event: dict) -> bool:
        if (namespace == "edge.apiSessions" and event.get("event_type") == "deleted"
                and event.get("id") == self.api_session_id):
            self.end()
        if self.ended or (self.wanted is not None and namespace not in self.wanted):
            return True
        try:
            self.queue.put_nowait(line)
        except asyncio.QueueFull:
            return False
        return True

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            try:
                self.queue.put_nowait(_END)
            except asyncio.QueueFull:   # the reader finds ``ended`` once it catches up
                pass


def _tickets(bus: Bus) -> dict[str, tuple[str, float]]:
    now = time.monotonic()
    for t, (_, until) in list(bus.tickets.items()):
        if until < now:
            del bus.tickets[t]
    return bus.tickets


@op("POST", "/ziti-lite/v1/events/tickets", apis=("client",), auth="admin", op_id="createEventsTicket",
    tag="ziti-lite", status=201, perm=STREAM)
async def create_ticket(ctx: Ctx) -> env.JSON:
    """A one-time ticket for ``GET /ziti-lite/v1/events?ticket=`` (60 s), bound to this API session."""
    assert ctx.session is not None
    ticket = secrets.token_urlsafe(24)
    _tickets(ctx.ctl.events)[ticket] = (ctx.session.id, time.monotonic() + TICKET_SECONDS)
    expires = clock.fmt(clock.now() + dt.timedelta(seconds=TICKET_SECONDS))
    return env.ok({"ticket": ticket, "expiresAt": expires}, status=201)


def may_stream(store, api_session_id: str) -> bool:
    """Whether the API session still exists and its identity may read the event streams (an
    admin, or the ``ops`` permission: ``permissions.STREAM``), enabled."""
    row = store.one(
        "SELECT i.is_admin, i.is_default_admin, i.disabled_at, i.permissions FROM api_sessions s JOIN identities i"
        " ON i.id = s.identity_id WHERE s.id = ?", (api_session_id,))
    return bool(row is not None and not row["disabled_at"] and permissions.allows(
        bool(row["is_admin"] or row["is_default_admin"]), permissions.parse(row["permissions"]), STREAM))


async def _session_id(ctx: Ctx) -> str:
    """The API session the stream belongs to: the header's, or the ticket's (used up)."""
    if ctx.request.headers.get("zt-session"):
        await ctx.ctl.authorize(ctx, "admin", STREAM)
        assert ctx.session is not None
        return ctx.session.id
    ticket = ctx.q("ticket")
    held = _tickets(ctx.ctl.events).pop(ticket, None) if ticket else None
    if held is None or not may_stream(ctx.store, held[0]):
        raise Unauthorized()
    return held[0]


@op("GET", "/ziti-lite/v1/events", apis=("client",), auth="public", op_id="streamEvents", tag="ziti-lite",
    query=("types", "ticket"))
async def stream_events(ctx: Ctx) -> StreamingResponse:
    """Events as ``text/event-stream`` until the API session ends."""
    session_id = await _session_id(ctx)
    try:
        types = parse_types(ctx.q("types"))
    except ValueError as e:
        raise CouldNotValidate("types", str(e), ctx.q("types")) from None
    bus = ctx.ctl.events
    stream = Stream(types, session_id)
    bus.subscribe(stream)
    store = ctx.store

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b": ziti-lite events\n\n"
            while not stream.ended:
                try:
                    line = await asyncio.wait_for(stream.queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    if not may_stream(store, session_id):
                        break   # ended where no event told us (another process), or no longer allowed
                    yield b": keepalive\n\n"
                    continue
                if not line:   # _END
                    break
                yield b"data: " + line + b"\n\n"
        finally:
            bus.unsubscribe(stream)

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
