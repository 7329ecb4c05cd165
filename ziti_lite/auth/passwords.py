"""Password hashing: Argon2id with upstream's parameters (t=1, m=3 MiB, p=4, 32-byte key,
10-byte salt, base64 text), so hashes stay compatible with an upstream database.

The KDF is ``argon2-cffi``'s ``hash_secret_raw``: byte-identical to ``cryptography``'s Argon2id
with the same parameters (a test checks it), thread-safe, and it releases the GIL, so two
derivations really run at once. (``cryptography`` 50's Argon2id deadlocks inside OpenSSL when
two threads derive at once; it is used, behind a process-wide lock, only where argon2-cffi is
missing.)

Requests never derive on the event loop: ``hash_async``/``verify_async`` run the KDF in a small
dedicated pool (one thread per CPU, at most 4). Admission is bounded by time, not by a count: a
derivation is queued when the work ahead of it would let it start within ``MAX_WAIT`` (1 s, at the
measured cost of a derivation, so a slow box queues fewer), and refused at once with 429
``RATE_LIMITED`` beyond it. A legitimate client has one login in flight, so 16 or 64 of them,
even all on one account, queue and are served; a flood beyond a second of work is refused and
costs the attacker round trips. Two lanes keep the flood behind the users: logins that cannot
succeed (unknown user, disabled identity) and those for an account whose last password check
failed go to the untrusted lane, which runs only when the trusted lane is empty and is admitted
against both lanes' work, so a flood of unknown names never refuses nor delays a known user.
Within a lane the workers take the keys (usernames) in turn: a burst of wrong passwords against
one account queues behind itself, not in front of other users' logins.
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
TRUSTED, UNTRUSTED = 0, 1   # the two lanes: see the module docstring


class Limiter:
    """Admission and turn order for KDF work (see the module docstring)."""

    MAX_WAIT = 1.0      # seconds a derivation may be expected to wait for a worker; beyond it: 429
    START_COST = 0.02   # a derivation's seconds until one is measured (an estimate on the slow side)
    SMOOTHING = 0.2     # weight of the newest derivation in the moving average of the cost

    def __init__(self, workers: int | None = None):
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self.pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="ziti-lite-kdf")
        self.cost = self.START_COST     # moving average of one derivation's seconds, in a worker
        self.rejected = 0
        # per lane, admitted work waits in one FIFO per key (the username); each pool thread,
        # when free, takes the trusted lane's next key's oldest job in turn (round-robin), the
        # untrusted lane's only when the trusted lane is empty, in the thread itself (no trip
        # through the event loop)
        self.lanes: tuple[collections.OrderedDict[str, collections.deque], ...] = (
            collections.OrderedDict(), collections.OrderedDict())
        self.queued = [0, 0]    # jobs admitted and not started, per lane
        self.running = 0
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        """Derivations admitted and not finished."""
        return self.queued[TRUSTED] + self.queued[UNTRUSTED] + self.running

    def expected_wait(self, lane: int = TRUSTED) -> float:
        """Seconds a job admitted now to ``lane`` would wait for a worker: the work ahead of it
        (the trusted lane's for a trusted job, both lanes' for an untrusted one, and what runs)
        spread over the workers."""
        ahead = self.running + self.queued[TRUSTED] + (self.queued[UNTRUSTED] if lane == UNTRUSTED else 0)
        return ahead * self.cost / self.workers

    async def run(self, fn, *args, key: str = "", lane: int = TRUSTED):
        if self.expected_wait(lane) > self.MAX_WAIT:
            self.rejected += 1
            raise ApiError("RATE_LIMITED", message="too many authentication requests; try again later")
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        job = (done, loop, fn, args)
        with self._lock:
            self.lanes[lane].setdefault(key, collections.deque()).append(job)
            self.queued[lane] += 1
        self.pool.submit(self._work)    # one turn per job: the thread takes whichever job is next
        try:
            return await done
        except asyncio.CancelledError:  # the client went away: a job not started leaves the queue
            with self._lock:
                queue = self.lanes[lane].get(key)
                if queue is not None and job in queue:
                    queue.remove(job)
                    self.queued[lane] -= 1
                    if not queue:
                        del self.lanes[lane][key]
            raise

    def _next(self):
        with self._lock:
            for lane, waiting in enumerate(self.lanes):
                while waiting:
                    key, queue = waiting.popitem(last=False)
                    job = queue.popleft()
                    if queue:
                        waiting[key] = queue    # the key goes to the back of the ring
                    self.queued[lane] -= 1
                    if not job[0].done():       # its request was cancelled meanwhile: skip it
                        self.running += 1
                        return job
        return None

    def _work(self) -> None:
        job = self._next()
        if job is None:
            return
        done, loop, fn, args = job
        started = time.monotonic()
        try:
            result, error = fn(*args), None
        except BaseException as e:  # handed to the waiting request
            result, error = None, e
        took = time.monotonic() - started
        with self._lock:
            self.running -= 1
            self.cost += (took - self.cost) * self.SMOOTHING
        loop.call_soon_threadsafe(_settle, done, result, error)


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


async def verify_async(password: str, hashed: str | None, salt: str | None, key: str = "",
                       trusted: bool = True) -> bool:
    """``key``: whose login this is (the username), for the turn order among waiting work;
    ``trusted=False`` for a login that cannot succeed (no such user, disabled) or whose account's
    last password check failed: it waits in the second lane."""
    return await limiter().run(verify_password, password, hashed, salt, key=key,
                               lane=TRUSTED if trusted else UNTRUSTED)
