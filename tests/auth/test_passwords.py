"""Password hashing: argon2-cffi gives the Argon2id bytes that ziti-lite stored with cryptography
before (fixed vectors, and a stored row logging in through the API), and concurrent logins all
get a right answer, never an error nor a 429 (48 clients are far below a second of queued work).
``tests/auth/test_passwords_limiter.py`` covers the limiter itself."""

from __future__ import annotations

import asyncio
import base64
import os
import threading

import pytest
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from tests.auth.conftest import PASSWORD
from tests.conftest import CLIENT, assert_error
from ziti_lite.auth import passwords

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
    assert base64.b64encode(passwords._kdf(password, base64.b64decode(salt))).decode() == hashed


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


@pytest.mark.slow
def test_concurrent_logins(net, client):
    """16 clients at once, good and wrong passwords and unknown users: every answer is right."""
    users = [net.user()[1] for _ in range(4)]
    results, errors = [], []

    def one(i):
        try:
            user = users[i % 4]
            if i % 3 == 0:
                r = client.post(
                    CLIENT + "/authenticate?method=password", json={"username": user, "password": "wrong-pw"}
                )
                results.append((r.status_code, 401))
            elif i % 3 == 1:
                r = client.post(CLIENT + "/authenticate?method=password", json={"username": user, "password": PASSWORD})
                results.append((r.status_code, 200))
            else:
                r = client.post(
                    CLIENT + "/authenticate?method=password", json={"username": f"nobody-{i}", "password": PASSWORD}
                )
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
    assert all(got == want for got, want in results), results


# ---------------------------------------------------------------------------- turn order
@pytest.fixture
def one_worker():
    lim = passwords.Limiter(workers=1)
    yield lim
    lim.pool.shutdown(wait=True)


def test_waiting_work_takes_turns_by_username(one_worker):
    """One worker: five logins for "a" wait, then one for "b": "b" runs second, not sixth."""
    order, gate = [], threading.Event()

    def job(name):
        if name == "a0":
            gate.wait(10)
        order.append(name)

    async def main():
        tasks = [asyncio.create_task(one_worker.run(job, "a0", key="a"))]
        await asyncio.sleep(0.01)
        tasks += [asyncio.create_task(one_worker.run(job, f"a{i}", key="a")) for i in range(1, 5)]
        tasks.append(asyncio.create_task(one_worker.run(job, "b0", key="b")))
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(*tasks)
        assert not any(one_worker.lanes) and one_worker.pending == 0

    asyncio.run(main())
    assert order == ["a0", "a1", "b0", "a2", "a3", "a4"]


def test_a_cancelled_waiter_is_skipped(one_worker):
    gate, ran = threading.Event(), []

    async def main():
        first = asyncio.create_task(one_worker.run(gate.wait, 10, key="k"))
        await asyncio.sleep(0.01)
        waiting = asyncio.create_task(one_worker.run(lambda: ran.append("late"), key="k"))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert one_worker.pending == 1
        gate.set()
        await first
        assert await one_worker.run(lambda: "again", key="k") == "again"
        assert one_worker.pending == 0 and not any(one_worker.lanes)

    asyncio.run(main())
    assert ran == []


def test_an_error_in_the_kdf_reaches_the_request(one_worker):
    def boom():
        raise ValueError("bad salt")

    async def main():
        with pytest.raises(ValueError, match="bad salt"):
            await one_worker.run(boom, key="k")
        assert one_worker.pending == 0

    asyncio.run(main())
