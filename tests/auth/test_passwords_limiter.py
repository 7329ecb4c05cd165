"""Password checks run off the event loop, in parallel, behind an admission limit that answers
429 RATE_LIMITED (upstream's envelope) instead of queueing a flood in front of real users."""

from __future__ import annotations

import os
import threading

import pytest
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from tests.conftest import CLIENT, MGMT, assert_error
from ziti_lite.auth import passwords

GUARD = 30.0


@pytest.mark.parametrize("password", ["a", "admin-Passw0rd", "ünï-cödé" * 10])
def test_hashes_are_byte_identical_to_cryptographys_argon2id(password):
    salt = os.urandom(passwords.SALT_BYTES)
    want = Argon2id(salt=salt, length=32, iterations=1, lanes=4, memory_cost=3 * 1024).derive(password.encode())
    assert passwords._kdf(password, salt) == want
    hashed, salt_text = passwords.hash_password(password)
    assert passwords.verify_password(password, hashed, salt_text)
    assert not passwords.verify_password(password + "x", hashed, salt_text)


def test_two_threads_derive_at_once():
    """The old KDF deadlocked (or raised MemoryError) with two threads; this one must not."""
    results: list[bool] = []

    def work():
        for _ in range(20):
            h, s = passwords.hash_password("pw-" + threading.current_thread().name)
            results.append(passwords.verify_password("pw-" + threading.current_thread().name, h, s))
    threads = [threading.Thread(target=work, name=f"t{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD)
    assert not any(t.is_alive() for t in threads)
    assert results == [True] * 40


@pytest.fixture
def held_kdf(monkeypatch):
    """A KDF that blocks until released, in a limiter that admits two derivations."""
    release = threading.Event()
    real = passwords._kdf

    def slow(password, salt):
        release.wait(GUARD)
        return real(password, salt)
    monkeypatch.setattr(passwords, "_kdf", slow)
    monkeypatch.setattr(passwords.Limiter, "MIN", 2)
    monkeypatch.setattr(passwords.Limiter, "MAX", 2)
    monkeypatch.setattr(passwords.Limiter, "START", 2)
    limiter = passwords.Limiter(workers=2)
    monkeypatch.setattr(passwords, "_limiter", limiter)
    yield release, limiter
    release.set()
    limiter.pool.shutdown(wait=True)


def test_a_flood_of_logins_gets_429_and_the_loop_keeps_serving(client, held_kdf):
    release, limiter = held_kdf
    url = CLIENT + "/authenticate?method=password"
    answers: list = []

    def bad_login():
        answers.append(client.post(url, json={"username": "admin", "password": "wrong-password"}))
    waiting = [threading.Thread(target=bad_login) for _ in range(2)]
    for t in waiting:
        t.start()
    for _ in range(int(GUARD * 100)):
        if limiter.pending == 2:
            break
        threading.Event().wait(0.01)
    assert limiter.pending == 2
    # the KDF is busy: other requests are still answered, and one more login is refused at once
    assert client.get("/version").status_code == 200
    err = assert_error(client.post(url, json={"username": "admin", "password": "xxxxxx"}), 429, "RATE_LIMITED")
    assert err["message"]
    err = assert_error(client.post(MGMT + "/authenticate?method=password",
                                   json={"username": "admin", "password": "xxxxxx"}), 429, "RATE_LIMITED")
    release.set()
    for t in waiting:
        t.join(GUARD)
    assert [a.status_code for a in answers] == [401, 401]
    assert limiter.rejected == 2


def test_the_limit_adapts_to_waiting(monkeypatch):
    limiter = passwords.Limiter(workers=1)
    try:
        start = limiter.limit
        limiter._timed(0.0, lambda: None, ())  # queued at monotonic 0: waited "forever"
        assert limiter.limit < start
        import time
        for _ in range(200):
            limiter._timed(time.monotonic(), lambda: None, ())
        assert limiter.limit == limiter.MAX
    finally:
        limiter.pool.shutdown()
