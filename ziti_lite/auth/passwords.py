"""Password hashing: Argon2id with upstream's parameters (t=1, m=3 MiB, p=4, 32-byte key,
10-byte salt, base64 text), so hashes stay compatible with an upstream database.

The KDF is ``argon2-cffi``'s ``hash_secret_raw``: byte-identical to ``cryptography``'s Argon2id
with the same parameters (a test checks it), thread-safe, and it releases the GIL, so two
derivations really run at once. (``cryptography`` 50's Argon2id deadlocks inside OpenSSL when
two threads derive at once; it is used, behind a process-wide lock, only where argon2-cffi is
missing.)

Requests never derive on the event loop: ``hash_async``/``verify_async`` run the KDF in a small
dedicated pool (one thread per CPU, at most 4), behind an adaptive admission limit in the
manner of upstream's authentication rate limiter: at most ``limit`` derivations may be queued
or running; one more is refused at once with 429 ``RATE_LIMITED``, so a flood of bad logins
costs the attacker round trips instead of making every real login wait behind it. The limit
shrinks while derivations wait longer than ``TARGET_WAIT`` to start and grows back while they
do not. Admitted work takes the workers in turn by username (round-robin): a burst of wrong
passwords against one account queues behind itself, not in front of other users' logins.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import hmac
import os
import threading
import time

from ..errors import ApiError

SALT_BYTES = 10

try:
    from argon2.low_level import Type as _Type
    from argon2.low_level import hash_secret_raw as _hash_secret_raw
except ImportError:  # pragma: no cover - argon2-cffi is a dependency
    _hash_secret_raw = None  # type: ignore[assignment]


_kdf_lock = threading.Lock()  # only for the cryptography fallback


def _kdf(password: str, salt: bytes) -> bytes:
    if _hash_secret_raw is not None:
        return _hash_secret_raw(password.encode(), salt, time_cost=1, memory_cost=3 * 1024, parallelism=4,
                                hash_len=32, type=_Type.ID)
    with _kdf_lock:
        return _argon2_cryptography(password, salt)


def _argon2_cryptography(password: str, salt: bytes) -> bytes:
    from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
    return Argon2id(salt=salt, length=32, iterations=1, lanes=4, memory_cost=3 * 1024).derive(password.encode())


def hash_password(password: str) -> tuple[str, str]:
    """Returns (hash, salt), both standard base64."""
    salt = os.urandom(SALT_BYTES)
    return base64.b64encode(_kdf(password, salt)).decode(), base64.b64encode(salt).decode()


def verify_password(password: str, hashed: str | None, salt: str | None) -> bool:
    if not hashed or not salt:
        # still spend the same work, so that a missing user is not faster than a wrong password
        _kdf(password, b"\0" * SALT_BYTES)
        return False
    return hmac.compare_digest(_kdf(password, base64.b64decode(salt)), base64.b64decode(hashed))


# ------------------------------------------------------------------ off the loop, admitted
class Limiter:
    """Adaptive admission for KDF work (see the module docstring)."""

    MIN, MAX, START = 4, 32, 8
    TARGET_WAIT = 0.1  # seconds a derivation may wait for a worker before the limit shrinks

    def __init__(self, workers: int | None = None):
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self.pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="ziti-lite-kdf")
        self.limit = float(self.START)
        self.pending = 0
        self.rejected = 0
        # admitted work waits in one FIFO per key (the username); each pool thread, when free,
        # takes the next key's oldest job in turn (round-robin), in the thread itself (no trip
        # through the event loop), so a burst against one account waits behind itself while
        # other users' logins are served
        self.waiting: collections.OrderedDict[str, collections.deque] = collections.OrderedDict()
        self._lock = threading.Lock()

    async def run(self, fn, *args, key: str = ""):
        if self.pending >= int(self.limit):
            self.rejected += 1
            raise ApiError("RATE_LIMITED", message="too many authentication requests; try again later")
        self.pending += 1
        queued = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            with self._lock:
                self.waiting.setdefault(key, collections.deque()).append((done, loop, queued, fn, args))
            self.pool.submit(self._work)    # one turn per job: the thread takes whichever job is next
            return await done
        finally:
            self.pending -= 1

    def _next(self):
        with self._lock:
            while self.waiting:
                key, queue = self.waiting.popitem(last=False)
                job = queue.popleft()
                if queue:
                    self.waiting[key] = queue   # the key goes to the back of the ring
                if not job[0].done():           # its request was cancelled meanwhile: skip it
                    return job
        return None

    def _work(self) -> None:
        job = self._next()
        if job is None:
            return
        done, loop, queued, fn, args = job
        try:
            result, error = self._timed(queued, fn, args), None
        except BaseException as e:  # handed to the waiting request
            result, error = None, e
        loop.call_soon_threadsafe(_settle, done, result, error)

    def _timed(self, queued: float, fn, args):
        waited = time.monotonic() - queued
        # the limit moves with how long work waits for a worker (float updates: races only blur it)
        if waited > self.TARGET_WAIT:
            self.limit = max(self.MIN, self.limit * 0.9)
        elif waited < self.TARGET_WAIT / 4:
            self.limit = min(self.MAX, self.limit + 0.5)
        return fn(*args)


def _settle(done: asyncio.Future, result, error) -> None:
    if not done.done():
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)


_limiter: Limiter | None = None


def limiter() -> Limiter:
    global _limiter
    if _limiter is None:
        _limiter = Limiter()
    return _limiter


async def hash_async(password: str, key: str = "") -> tuple[str, str]:
    return await limiter().run(hash_password, password, key=key)


async def verify_async(password: str, hashed: str | None, salt: str | None, key: str = "") -> bool:
    """``key``: whose login this is (the username), for the turn order among waiting work."""
    return await limiter().run(verify_password, password, hashed, salt, key=key)
