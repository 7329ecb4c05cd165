"""Entity ids and opaque tokens."""

import secrets
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


def new_token() -> str:
    """API session, session and enrollment tokens are random UUIDs upstream."""
    return str(uuid.uuid4())
