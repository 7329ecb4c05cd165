"""Replies awaited on a channel: answered, timed out, cut off by the channel's end."""

from __future__ import annotations

import asyncio

import pytest

from ziti_lite.channel import wire
from ziti_lite.channel.replies import Replies
from ziti_lite.channel.wire import H, Message


def test_a_reply_ends_its_request_and_only_its_own():
    async def scenario():
        r = Replies()
        sent = []
        fut = r.request(lambda: sent.append(7) or 7, closed=False, timeout=5)
        assert sent == [7]
        assert not r.resolve(Message(2, 1, {H.REPLY_FOR: wire.i32(8)}))   # someone else's
        reply = Message(2, 1, {H.REPLY_FOR: wire.i32(7)})
        assert r.resolve(reply) and await fut is reply
        assert not r.resolve(reply)                                         # answered once
        assert not r.resolve(Message(2, 2, {}))                             # no ReplyFor at all
    asyncio.run(scenario())


def test_no_answer_in_time_and_a_closed_channel():
    async def scenario():
        r = Replies()
        with pytest.raises(TimeoutError):
            await r.request(lambda: 1, closed=False, timeout=0.01)
        assert not r.waiting
        pending = r.request(lambda: 2, closed=False, timeout=5)
        r.fail_all()
        with pytest.raises(ConnectionError):
            await pending
        with pytest.raises(ConnectionError):
            await r.request(lambda: 3, closed=True, timeout=5)             # never sent
    asyncio.run(scenario())
