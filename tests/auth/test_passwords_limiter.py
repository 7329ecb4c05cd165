"""Password checks run off the event loop, in parallel, behind admission bounded by the time a
login would wait: legitimate clients (one login in flight each) queue and are served, a flood
beyond a second of work is answered 429 RATE_LIMITED (upstream's envelope), and logins that
cannot succeed wait behind those of known users. The KDF is made slow on purpose (held until
released), so nothing depends on the machine's speed."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from tests.auth.conftest import PASSWORD
from tests.conftest import CLIENT, MGMT, assert_error
from ziti_lite.auth import passwords
from ziti_lite.errors import ApiError

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
    """A KDF made slow on purpose: each derivation blocks until the test releases it, so what
    is queued stays queued. The limiter runs two workers (one where a test checks the order) and
    starts from a derivation cost of ``cost`` seconds (nothing finishes before the release, so
    the estimate does not move): it admits work that would start within MAX_WAIT = 1 s of it."""
    release = threading.Event()
    release.set()
    real = passwords._kdf
    started: list[str] = []

    def slow(password, salt):
        started.append(password)
        release.wait(GUARD)
        return real(password, salt)
    monkeypatch.setattr(passwords, "_kdf", slow)

    def make(cost: float, workers: int = 2) -> passwords.Limiter:
        monkeypatch.setattr(passwords.Limiter, "START_COST", cost)
        limiter = passwords.Limiter(workers=workers)
        monkeypatch.setattr(passwords, "_limiter", limiter)
        release.clear()     # from here on derivations wait (before: the test's setup runs freely)
        started.clear()
        made.append(limiter)
        return limiter
    made: list[passwords.Limiter] = []
    yield release, make, started
    release.set()
    for limiter in made:
        limiter.pool.shutdown(wait=True)


def wait_for(cond) -> None:
    for _ in range(int(GUARD * 100)):
        if cond():
            return
        threading.Event().wait(0.01)
    raise AssertionError("not reached")


def logins(client, creds: list[tuple[str, str]]) -> tuple[list[threading.Thread], list]:
    """One thread per (username, password), each logging in once; started, not joined."""
    answers: list = []

    def one(username, password):
        answers.append(client.post(CLIENT + "/authenticate?method=password",
                                   json={"username": username, "password": password}).status_code)
    threads = [threading.Thread(target=one, args=c) for c in creds]
    for t in threads:
        t.start()
    return threads, answers


@pytest.mark.parametrize("accounts", [1, pytest.param(64, marks=pytest.mark.slow)])   # 64 users: 1 s to create
def test_64_clients_with_a_slow_kdf_queue_and_all_log_in(net, client, held_kdf, accounts):
    """64 concurrent logins, all to one account (automation sharing a service identity) or one
    account each, while every derivation is held: all 64 wait in the queue at once (a 10 ms
    derivation on two workers: 0.32 s of work ahead of the last), none is refused, all log in."""
    release, make, _ = held_kdf
    users = [net.user()[1] for _ in range(accounts)]
    limiter = make(cost=0.01)
    threads, answers = logins(client, [(users[i % accounts], PASSWORD) for i in range(64)])
    wait_for(lambda: limiter.pending == 64)
    assert limiter.rejected == 0
    release.set()
    for t in threads:
        t.join(GUARD)
    assert answers == [200] * 64
    assert limiter.rejected == 0 and limiter.pending == 0


def test_a_flood_of_logins_gets_429_and_users_and_the_loop_keep_being_served(net, client, held_kdf):
    """At a cost of 1 s a derivation on one worker, two bad logins fill the queue: a third is
    refused at once with 429 on both APIs, /version answers, and a known user's login is still
    admitted (the flood waits in the untrusted lane, which never delays the trusted one)."""
    release, make, started = held_kdf
    _, user = net.user()
    limiter = make(cost=1.0, workers=1)
    flood, flood_answers = logins(client, [(f"nobody-{i}", "wrong-password") for i in range(2)])
    wait_for(lambda: limiter.pending == 2)
    assert client.get("/version").status_code == 200
    err = assert_error(client.post(CLIENT + "/authenticate?method=password",
                                   json={"username": "nobody-x", "password": "xxxxxx"}), 429, "RATE_LIMITED")
    assert err["message"]
    assert_error(client.post(MGMT + "/authenticate?method=password",
                             json={"username": "nobody-y", "password": "xxxxxx"}), 429, "RATE_LIMITED")
    good, good_answers = logins(client, [(user, PASSWORD)])
    wait_for(lambda: limiter.pending == 3)
    release.set()
    for t in flood + good:
        t.join(GUARD)
    assert flood_answers == [401] * 2 and good_answers == [200]
    assert limiter.rejected == 2
    # one flood derivation held the worker; the user's went next, before the queued one
    assert started == ["wrong-password", PASSWORD, "wrong-password"]


def behind_a_blocker(client, limiter, release, blocker_password: str, first: tuple[str, str],
                     second: tuple[str, str]) -> tuple[list, list]:
    """A login holding the one worker, then ``first`` and ``second`` queued behind it in that
    order, then the KDF released: the answers of ``first`` and ``second``."""
    blocker, _ = logins(client, [("nobody-" + blocker_password, blocker_password)])
    wait_for(lambda: limiter.running == 1)
    one, first_answers = logins(client, [first])
    wait_for(lambda: limiter.pending == 2)
    two, second_answers = logins(client, [second])
    wait_for(lambda: limiter.pending == 3)
    release.set()
    for t in blocker + one + two:
        t.join(GUARD)
    return first_answers, second_answers


def test_a_wrong_password_moves_the_account_to_the_untrusted_lane(net, client, held_kdf):
    """After a failed check an account's logins wait behind the trusted lane until one succeeds."""
    release, make, started = held_kdf
    _, suspect = net.user(password="Suspect-Passw0rd")
    _, other = net.user(password="Other-Passw0rd")
    assert net.authenticate(suspect, "wrong-password").status_code == 401
    limiter = make(cost=0.01, workers=1)
    first_answers, second_answers = behind_a_blocker(client, limiter, release, "block-1",
                                                     (suspect, "Suspect-Passw0rd"), (other, "Other-Passw0rd"))
    assert first_answers == [200] and second_answers == [200]
    # the account that arrived later but whose last check succeeded went first
    assert started == ["block-1", "Other-Passw0rd", "Suspect-Passw0rd"]
    assert limiter.queued == [0, 0]
    # its good login restored it: now it is served in the trusted lane again
    release.clear()
    started.clear()
    _, second_answers = behind_a_blocker(client, limiter, release, "block-2",
                                         ("nobody-3", "block-3"), (suspect, "Suspect-Passw0rd"))
    assert second_answers == [200]
    assert started == ["block-2", "Suspect-Passw0rd", "block-3"]


def test_a_flood_beyond_the_queue_is_refused_and_users_go_first():
    """One worker, a derivation of 10 ms: what would start within 0.995 s is admitted (100 jobs),
    the rest of a 300-job flood of unknown names is refused at once; 64 logins of known users
    arriving after it are all admitted and run before the flood's queued work."""
    order: list[str] = []
    gate = threading.Event()

    def kdf(name):
        gate.wait(GUARD)
        order.append(name)

    class Lim(passwords.Limiter):
        START_COST, MAX_WAIT = 0.01, 0.995
    limiter = Lim(workers=1)

    async def main():
        async def attempt(name, key, lane):
            try:
                await limiter.run(kdf, name, key=key, lane=lane)
                return "ok"
            except ApiError as e:
                return e.code
        flood = [asyncio.create_task(attempt(f"bad{i}", f"nobody-{i}", passwords.UNTRUSTED)) for i in range(300)]
        await asyncio.sleep(0)
        users = [asyncio.create_task(attempt(f"good{i}", "svc", passwords.TRUSTED)) for i in range(64)]
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(*flood), await asyncio.gather(*users)
    try:
        flood, users = asyncio.run(main())
    finally:
        limiter.pool.shutdown(wait=True)
    assert flood == ["ok"] * 100 + ["RATE_LIMITED"] * 200
    assert users == ["ok"] * 64
    assert order == ["bad0"] + [f"good{i}" for i in range(64)] + [f"bad{i}" for i in range(1, 100)]
    assert limiter.rejected == 200 and limiter.pending == 0


def test_the_cost_estimate_follows_the_derivations():
    limiter = passwords.Limiter(workers=1)
    try:
        async def main():
            for _ in range(30):
                await limiter.run(lambda: None, key="k")
        asyncio.run(main())
        assert limiter.cost < passwords.Limiter.START_COST / 10   # no-op "derivations" cost ~nothing
        assert limiter.expected_wait() == 0.0
    finally:
        limiter.pool.shutdown()
