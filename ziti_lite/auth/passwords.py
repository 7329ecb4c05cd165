"""Password hashing: Argon2id with upstream's parameters (t=1, m=3 MiB, p=4, 32-byte key,
10-byte salt, base64 text), so hashes stay compatible with an upstream database.

Hashing takes milliseconds: callers on the event loop use ``hash_async``/``verify_async``,
which run it in a worker thread (the KDF releases the GIL).
"""

from __future__ import annotations

import base64
import hmac
import os
import threading

from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from starlette.concurrency import run_in_threadpool

SALT_BYTES = 10


_kdf_lock = threading.Lock()  # concurrent Argon2id derivations fail with MemoryError in cryptography


def _kdf(password: str, salt: bytes) -> bytes:
    with _kdf_lock:
        return _argon2(password, salt)


def _argon2(password: str, salt: bytes) -> bytes:
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


async def hash_async(password: str) -> tuple[str, str]:
    return await run_in_threadpool(hash_password, password)


async def verify_async(password: str, hashed: str | None, salt: str | None) -> bool:
    return await run_in_threadpool(verify_password, password, hashed, salt)
