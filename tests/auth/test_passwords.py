"""Password hashing: argon2-cffi gives upstream's (and cryptography's) Argon2id bytes, derivations
run concurrently without failing, and the hashing pool serves waiting keys round-robin."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from ziti_lite.auth import passwords
from tests.auth.conftest import PASSWORD
from tests.conftest import CLIENT, assert_error

# computed with cryptography 's Argon2id(length=32, iterations=1, lanes=4, memory_cost=3072),
# the KDF ziti-lite used before: databases written by it keep working
VECTORS = [
    ("admin-Passw0rd", "AAECAwQFBgcICQ==", "XLhu8svkT3bVZCYhUKVDlRbkIkyZm9K1GMnYenTs3RE="),
    ("pässwörd ☃", "MDEyMzQ1Njc4OQ==", "dqVybY4cM9HbeVyZsvDmFVTDs+VHfq0zF6FVkxAWICY="),
    ("", "AAAAAAAAAAAAAA==", "MQp0L/t9MuQpwooe6sahSmchTN5H/WYkGHHkqRgFeJ4="),
]


@pytest.mark.parametrize("password,salt,hashed", VECTORS)
def test_known_hashes_verify(password, salt, hashed):
    assert passwords.verify_password(password, hashed, salt)
    assert not passwords.verify_password(password + "x", hashed, salt)
    assert base64.b64encode(passwords._argon2(password, base64.b64decode(salt))).decode() == hashed


def test_byte_identical_to_cryptography():
    for i in range(8):
        password, salt = os.urandom(i * 3).hex() + "é" * i, os.urandom(passwords.SALT_BYTES)
        ours = passwords._argon2(password, salt)
        theirs = Argon2id(salt=salt, length=32, iterations=1, lanes=4, memory_cost=3 * 1024).derive(password.encode())
        assert ours == theirs


def test_stored_hash_from_cryptography_logs_in(net, ctl):
    """A password row written with cryptography's KDF (an older ziti-lite database) still logs in."""
    _, username = net.user()
    salt = os.urandom(passwords.SALT_BYTES)
    old = Argon2id(salt=salt, length=32, iterations=1, lanes=4, memory_cost=3 * 1024).derive(b"Older-Passw0rd")
    with ctl.store.write():
        ctl.store.execute("UPDATE authenticators SET password_hash = ?, salt = ? WHERE username = ?",
                          (base64.b64encode(old).decode(), base64.b64encode(salt).decode(), username))
    assert net.authenticate(username, "Older-Passw0rd").status_code == 200
    assert_error(net.authenticate(username, PASSWORD), 401, "INVALID_AUTH")


def test_threads_derive_at_once():
    """cryptography 50 deadlocked / raised MemoryError here; the pool has no lock at all."""
    salt = b"s" * passwords.SALT_BYTES
    want = passwords._argon2("pw", salt)
    with ThreadPoolExecutor(8) as ex:
        assert list(ex.map(lambda _: passwords._argon2("pw", salt), range(64))) == [want] * 64


def test_concurrent_logins(net, client):
    """16 clients at once, good and wrong passwords and unknown users: every answer is right."""
    users = [net.user()[1] for _ in range(4)]
    results, errors = [], []

    def one(i):
        try:
            user = users[i % 4]
            if i % 3 == 0:
                r = client.post(CLIENT + "/authenticate?method=password", json={"username": user, "password": "wrong-pw"})
                results.append((r.status_code, 401))
            elif i % 3 == 1:
                r = client.post(CLIENT + "/authenticate?method=password", json={"username": user, "password": PASSWORD})
                results.append((r.status_code, 200))
            else:
                r = client.post(CLIENT + "/authenticate?method=password", json={"username": f"nobody-{i}", "password": PASSWORD})
                results.append((r.status_code, 401))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 48
    assert [got for got, _ in results] == [want for _, want in results]


# ---------------------------------------------------------------------------- the pool
def _run(coro):
    return asyncio.run(coro)


def test_pool_round_robin_by_key():
    """One slot: five waiters of key "a" then one of "b": "b" runs second, not sixth."""
    order, gate = [], threading.Event()

    def job(name):
        if name == "a0":
            gate.wait(5)
        order.append(name)

    async def main():
        with ThreadPoolExecutor(1) as ex:
            pool = passwords.KdfPool(ex, 1)
            tasks = [asyncio.create_task(pool.run("a", job, "a0"))]
            await asyncio.sleep(0)
            tasks += [asyncio.create_task(pool.run("a", job, f"a{i}")) for i in range(1, 5)]
            tasks.append(asyncio.create_task(pool.run("b", job, "b0")))
            await asyncio.sleep(0.01)
            gate.set()
            await asyncio.gather(*tasks)
            assert pool.running == 0 and not pool.waiting

    _run(main())
    assert order == ["a0", "a1", "b0", "a2", "a3", "a4"]


def test_pool_cancelled_waiter_frees_nothing_twice():
    gate = threading.Event()

    async def main():
        with ThreadPoolExecutor(1) as ex:
            pool = passwords.KdfPool(ex, 1)
            first = asyncio.create_task(pool.run("k", gate.wait, 5))
            await asyncio.sleep(0)
            waiting = asyncio.create_task(pool.run("k", lambda: "late"))
            await asyncio.sleep(0.01)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert not pool.waiting
            gate.set()
            await first
            assert pool.running == 0
            assert await pool.run("k", lambda: "again") == "again"
            assert pool.running == 0

    _run(main())
