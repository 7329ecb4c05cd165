"""Replies awaited on a channel: the one mechanism both kinds of channel use (an SDK's with the
embedded router, ``edge/channel.py``; a real router's control channel, ``ctrl/channel.py``).

A request is sent with a sequence number; the peer's message whose ReplyFor header names it ends
the request's future. A request not answered in time ends with ``TimeoutError``, and every
request still waiting when the channel closes with ``ConnectionError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .wire import H, Message


class Replies:
    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future] = {}

    def request(self, send: Callable[[], int], closed: bool, timeout: float) -> asyncio.Future:
        """``send()`` sends the request and returns its sequence number."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if closed:
            fut.set_exception(ConnectionError("channel closed"))
            return fut
        seq = send()
        self.waiting[seq] = fut

        def expire() -> None:
            if self.waiting.pop(seq, None) is fut and not fut.done():
                fut.set_exception(TimeoutError())
        handle = loop.call_later(timeout, expire)
        fut.add_done_callback(lambda _f: handle.cancel())
        return fut

    def resolve(self, m: Message) -> bool:
        """Whether ``m`` answered a request waiting here (it is then that request's reply)."""
        rf = m.headers.get(H.REPLY_FOR)
        if rf is None:
            return False
        fut = self.waiting.pop(int.from_bytes(rf[:4], "little", signed=True), None)
        if fut is None:
            return False
        if not fut.done():
            fut.set_result(m)
        return True

    def fail_all(self) -> None:
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("channel closed"))
        self.waiting.clear()
