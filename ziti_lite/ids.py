"""Entity ids and opaque tokens."""

import os
import secrets
import threading
import time
import uuid

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


_SPACE = 62 ** 10


def new_id() -> str:
    """A short random id like upstream's shortids (10 chars of [0-9a-zA-Z], ~59 bits).

    One uniform draw below 62**10 (60 random bits, the ~27 % above it drawn again), written in
    base 62: the same distribution as ten ``secrets.choice`` calls at a tenth of the cost."""
    while True:
        n = secrets.randbits(60)
        if n < _SPACE:
            break
    out = []
    for _ in range(10):
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(out)


_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_last = [0, 0]                                 # the last id's ms and counter: never go back
_lock = threading.Lock()
_HOST = int.from_bytes(os.urandom(2), "big")   # this process, as cuid's fingerprint block


def _b36(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 36)
        out.append(_B36[r])
    return "".join(reversed(out))


def new_sortable_id() -> str:
    """An id that sorts after every one made before it (upstream's cuids, 25 characters).

    API sessions need it: a real router ends a full API-session sync by dropping the sessions it
    holds that were not in the sync and whose id sorts at or below the sync's highest, so a session
    created during the sync survives only if its id sorts above every older one. ``c``, the time
    in ms, a counter, the process, random: the time and the counter order them, also
    within a millisecond and if the clock steps back."""
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last[0]:
            _last[0], _last[1] = ms, 0
        elif _last[1] + 1 < 36 ** 4:
            _last[1] += 1
        else:
            _last[0], _last[1] = _last[0] + 1, 0
        ms, n = _last
    return ("c" + _b36(ms, 8) + _b36(n, 4) + _b36(_HOST % 36 ** 4, 4)
            + _b36(secrets.randbits(41) % 36 ** 8, 8))


def new_token() -> str:
    """API session, session and enrollment tokens are random UUIDs upstream."""
    return str(uuid.uuid4())
