"""Password hashing: Argon2id with upstream's parameters (t=1, m=3 MiB, p=4, 32-byte key,
10-byte salt, base64 text), so hashes stay compatible with an upstream database.

The KDF is argon2-cffi's low-level ``hash_secret_raw`` (the reference libargon2): thread-safe,
it releases the GIL, and its output is byte for byte that of ``cryptography``'s ``Argon2id``
at the same parameters (which deadlocks or fails with ``MemoryError`` when two threads derive
at once, so it needed a process-wide lock).

Hashing takes milliseconds: callers on the event loop use ``hash_async``/``verify_async``,
which run it in a pool of as many threads as the process has cores. Waiting derivations are
served round-robin by key (the login's username): a burst of wrong passwords against a few
accounts queues behind itself, and other users' logins still get their turn at once.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hmac
import os
import weakref
from concurrent.futures import ThreadPoolExecutor

from argon2.low_level import Type, hash_secret_raw

SALT_BYTES = 10
TIME_COST, MEMORY_KIB, LANES, KEY_BYTES = 1, 3 * 1024, 4, 32


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


WORKERS = _cores()


def _argon2(password: str, salt: bytes) -> bytes:
    return hash_secret_raw(password.encode(), salt, time_cost=TIME_COST, memory_cost=MEMORY_KIB,
                           parallelism=LANES, hash_len=KEY_BYTES, type=Type.ID)


def hash_password(password: str) -> tuple[str, str]:
    """Returns (hash, salt), both standard base64."""
    salt = os.urandom(SALT_BYTES)
    return base64.b64encode(_argon2(password, salt)).decode(), base64.b64encode(salt).decode()


def verify_password(password: str, hashed: str | None, salt: str | None) -> bool:
    if not hashed or not salt:
        # still spend the same work, so that a missing user is not faster than a wrong password
        _argon2(password, b"\0" * SALT_BYTES)
        return False
    return hmac.compare_digest(_argon2(password, base64.b64decode(salt)), base64.b64decode(hashed))


class KdfPool:
    """At most ``workers`` derivations at once in a thread pool; the rest wait in one FIFO per
    key, and a free thread takes the next waiter of the next key in turn (round-robin).
    Touched only from its event loop's thread."""

    def __init__(self, executor: ThreadPoolExecutor, workers: int):
        self.executor, self.workers = executor, workers
        self.running = 0
        self.waiting: collections.OrderedDict[str, collections.deque[asyncio.Future]] = collections.OrderedDict()

    async def run(self, key: str, fn, *args):
        loop = asyncio.get_running_loop()
        if self.running >= self.workers or self.waiting:
            turn = loop.create_future()
            self.waiting.setdefault(key, collections.deque()).append(turn)
            try:
                await turn          # our turn: the slot was handed over to us (running already counts it)
            except BaseException:
                if turn.done() and not turn.cancelled():
                    self._release()  # handed over, then cancelled before we ran: pass it on
                else:
                    self._forget(key, turn)
                raise
        else:
            self.running += 1
        try:
            return await loop.run_in_executor(self.executor, fn, *args)
        finally:
            self._release()

    def _forget(self, key: str, turn: asyncio.Future) -> None:
        q = self.waiting.get(key)
        if q is not None:
            try:
                q.remove(turn)
            except ValueError:
                pass
            if not q:
                del self.waiting[key]

    def _release(self) -> None:
        while self.waiting:
            key, q = self.waiting.popitem(last=False)
            turn = q.popleft()
            if q:
                self.waiting[key] = q       # the key goes to the back of the ring
            if not turn.done():
                turn.set_result(None)       # the slot passes on: running stays the same
                return
        self.running -= 1


_executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="argon2")
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, KdfPool] = weakref.WeakKeyDictionary()


def _pool() -> KdfPool:
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = KdfPool(_executor, WORKERS)
    return pool


async def hash_async(password: str, key: str = "") -> tuple[str, str]:
    return await _pool().run(key, hash_password, password)


async def verify_async(password: str, hashed: str | None, salt: str | None, key: str = "") -> bool:
    return await _pool().run(key, verify_password, password, hashed, salt)
