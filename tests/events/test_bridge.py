"""A producer on another thread's loop (the embedded router) publishes through ``ThreadBus``:
subscribers get its events on the controller's loop, in order, only once a write of the
producer's own store commits; the producer's row triggers follow the controller's subscribers."""

from __future__ import annotations

import asyncio
import threading

from ziti_lite.db.store import Store
from ziti_lite.events import tables
from ziti_lite.events.bridge import ThreadBus
from ziti_lite.events.bus import Bus, Subscriber


class Taken(Subscriber):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []   # (event type, thread that offered it)
        self.arrived = asyncio.Event()

    def offer(self, namespace: str, line: bytes, event: dict) -> bool:
        self.events.append((event["event_type"], threading.get_ident()))
        self.arrived.set()
        return True


class OtherLoop:
    """A loop on a thread of its own, as the router's."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, fn):
        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def sdk(kind: str) -> dict:
    return {"namespace": "sdk", "event_type": kind}


async def settle(main: Taken, n: int) -> None:
    while len(main.events) < n:
        main.arrived.clear()
        await asyncio.wait_for(main.arrived.wait(), 5)


def on_two_loops(db_path, body) -> None:
    """Run ``body(other, bus, bridge, store)`` on this thread's loop: ``bus`` the controller's,
    ``other`` a producer's loop on its own thread, ``bridge`` its ThreadBus, ``store`` its own
    connection (made and closed on its thread)."""
    other = OtherLoop()

    async def scenario():
        bus = Bus("ctl")
        bridge = ThreadBus(bus, asyncio.get_running_loop(), other.loop)
        store = other.call(lambda: Store(str(db_path)))
        try:
            await body(other, bus, bridge, store)
        finally:
            other.call(store.close)
            bridge.close()
    try:
        asyncio.run(scenario())
    finally:
        other.close()


def test_events_reach_the_controllers_loop_in_order_and_after_commit(db_path):
    async def body(other: OtherLoop, bus: Bus, bridge: ThreadBus, store: Store) -> None:
        taken = Taken()
        bus.subscribe(taken)
        here = threading.get_ident()
        other.call(lambda: [bridge.emit(sdk(f"e{i}")) for i in range(50)])
        await settle(taken, 50)
        assert [k for k, _ in taken.events] == [f"e{i}" for i in range(50)]
        assert {t for _, t in taken.events} == {here}   # offered on the controller's loop only

        def in_a_write(fail: bool) -> int:
            try:
                with store.write():
                    bridge.emit(sdk("committed" if not fail else "rolled back"), store)
                    held = len(taken.events)
                    if fail:
                        raise ValueError
            except ValueError:
                pass
            return held
        assert other.call(lambda: in_a_write(True)) == 50
        assert other.call(lambda: in_a_write(False)) == 50   # nothing before the commit
        await settle(taken, 51)
        await asyncio.sleep(0.1)
        assert [k for k, _ in taken.events[50:]] == ["committed"]
    on_two_loops(db_path, body)


def test_the_producers_row_triggers_follow_the_controllers_subscribers(db_path):
    """The triggers of the producer's connection are made and dropped on the producer's loop when
    the controller's bus gains its first and loses its last subscriber (the live stream test sees
    the router's terminators announced through them)."""
    async def body(other: OtherLoop, bus: Bus, bridge: ThreadBus, store: Store) -> None:
        rows = other.call(lambda: tables.watch(store, bridge))
        installed = []

        def triggers() -> list:
            return store.column("SELECT name FROM sqlite_temp_master WHERE type = 'trigger'")

        def installed_now() -> None:
            installed.append((rows.installed, threading.get_ident()))
        bridge.on_active.append(installed_now)
        assert rows.installed is False
        taken = Taken()
        bus.subscribe(taken)
        while not installed:
            await asyncio.sleep(0.01)
        assert installed == [(True, other.thread.ident)]
        assert len(other.call(triggers)) == 7   # on the producer's connection
        bus.unsubscribe(taken)
        while len(installed) < 2:
            await asyncio.sleep(0.01)
        assert installed[1] == (False, other.thread.ident)
        assert other.call(triggers) == []
    on_two_loops(db_path, body)
