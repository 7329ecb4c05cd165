"""Seed a controller database with many identities, for benchmarks.

The controller is first created the normal way (schema, PKI, admin, built-in rows), then the
identities are inserted straight through SQL in one transaction: names like
``maria.garcia-laptop-00042``, 0..4 role attributes drawn from a realistic pool, and what enrolled
identities carry (a certificate or password authenticator for ~80 %, a pending one-time-token
enrollment for ~20 %), so an identity's detail has its usual related rows to render.

    .venv/bin/python benchmarks/seed.py --db /tmp/bench.db --count 100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ziti_lite import clock  # noqa: E402
from ziti_lite.ids import new_id  # noqa: E402

ADMIN_USER = "admin"
ADMIN_PASSWORD = "bench-Passw0rd"

FIRST = ("alex", "maria", "james", "li", "fatima", "olga", "max", "sofia", "noah", "felix", "emma", "ravi",
         "yuki", "omar", "lena", "xavier", "chloe", "lucas", "amara", "igor", "nina", "diego", "hana", "jonas",
         "roxanne", "pedro", "aisha", "tom", "mei", "sven", "zara", "ivan", "ines", "kofi", "lara", "dmitri")
LAST = ("smith", "garcia", "chen", "müller", "kowalski", "okafor", "rossi", "tanaka", "silva", "novak", "fox",
        "nguyen", "haddad", "johansson", "dubois", "patel", "kim", "moreau", "cox", "ivanova", "schmidt",
        "lopez", "brown", "wilson", "knox", "santos", "yilmaz", "costa", "berg", "walsh", "park", "ali")
DEVICE = ("laptop", "phone", "desktop", "tablet", "workstation", "vm", "build-agent", "kiosk", "sensor", "gateway")
ATTRS = ("employees", "contractors", "engineering", "sales", "finance", "support", "ops", "marketing",
         "region-eu", "region-us", "region-apac", "laptops", "mobile", "servers", "iot", "vpn-users",
         "db-admins", "ci", "on-call", "managers", "interns", "partners", "lab", "hq")


def identities(count: int, seed: int = 1):
    """Rows (tuples in INSERT order) of ``count`` realistic identities."""
    rnd = random.Random(seed)
    base = time.time() - 400 * 86400
    for n in range(count):
        first, last, device = rnd.choice(FIRST), rnd.choice(LAST), rnd.choice(DEVICE)
        name = f"{first}.{last}-{device}-{n:05d}"
        attrs = rnd.sample(ATTRS, rnd.choice((0, 1, 2, 2, 3, 3, 4)))
        created = clock.fmt(clock.dt.datetime.fromtimestamp(base + n * 300, clock.UTC))
        tags = json.dumps({"owner": f"{first}.{last}@example.com"}) if n % 3 == 0 else "{}"
        app_data = json.dumps({"costCenter": rnd.randint(1000, 9999)}) if n % 5 == 0 else "{}"
        yield (new_id(), created, created, tags, f"{name}", "Default", 0, json.dumps(attrs),
               "default", None, app_data, rnd.choice((0, 0, 0, 10, 100)), "default")


def authenticators(rows, seed: int = 2):
    """Most identities enrolled: ~75 % with a network-issued certificate, ~5 % with a password."""
    rnd = random.Random(seed)
    for r in rows:
        x = _state(r)
        if x < 0.75:
            fp = f"{rnd.getrandbits(160):040x}"
            yield (new_id(), r[1], r[1], r[0], "cert", None, None, None, fp, CERT_PLACEHOLDER, 1)
        elif x < 0.80:
            yield (new_id(), r[1], r[1], r[0], "updb", r[4].split("-")[0] + f"-{r[0]}", "x" * 44, "y" * 44,
                   None, None, 0)


def enrollments(rows, seed: int = 3):
    """The rest wait for enrollment: a pending one-time-token enrollment each (~20 %)."""
    rnd = random.Random(seed)
    expires = clock.fmt(clock.now() + clock.dt.timedelta(days=3650))
    for r in rows:
        if _state(r) >= 0.80:
            yield (new_id(), r[1], r[1], "ott", r[0], str(uuid.UUID(int=rnd.getrandbits(128))),
                   "eyJhbGciOiJSUzI1NiJ9." + "e" * 300 + ".sig", expires)


def _state(row) -> float:
    """A stable draw in [0, 1) per identity: below 0.75 cert, below 0.80 updb, else not enrolled."""
    return random.Random(row[0]).random()


# a stand-in for the PEM of an enrolled identity's certificate (never rendered in an identity)
CERT_PLACEHOLDER = "-----BEGIN CERTIFICATE-----\nMIIB(benchmark placeholder)\n-----END CERTIFICATE-----\n"


def seed(db: str, count: int = 100_000) -> dict:
    """Create a controller on ``db`` (a new file) and add ``count`` identities. Returns stats."""
    from ziti_lite.app import Controller
    from ziti_lite.config import Settings

    t0 = time.perf_counter()
    ctl = Controller(Settings(db=db, admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    store = ctl.store
    t1 = time.perf_counter()
    rows = list(identities(count))
    with store.write():
        store.executemany(
            "INSERT INTO identities (id, created_at, updated_at, tags, name, type_id, is_admin, role_attributes,"
            " auth_policy_id, external_id, app_data, default_hosting_cost, default_hosting_precedence)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        store.executemany(
            "INSERT INTO authenticators (id, created_at, updated_at, identity_id, method, username, password_hash,"
            " salt, fingerprint, cert_pem, is_issued_by_network) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            authenticators(rows))
        store.executemany(
            "INSERT INTO enrollments (id, created_at, updated_at, method, identity_id, token, jwt, expires_at)"
            " VALUES (?,?,?,?,?,?,?,?)", enrollments(rows))
    t2 = time.perf_counter()
    # a bulk load through the search triggers leaves the FTS5 index in many small segments (each
    # phrase query then reads every one): merge them once, as one would after any bulk load
    from ziti_lite.db import search
    for table in search.SEARCH_INDEXES:
        search.optimize(store.conn, table)
    store.execute("ANALYZE")
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    total = store.value("SELECT count(*) FROM identities")
    sample = store.value("SELECT id FROM identities WHERE is_default_admin = 0 ORDER BY id LIMIT 1 OFFSET ?",
                         (count // 2,))
    store.close()
    return {"db": db, "identities": total, "sample_id": sample, "create_s": t1 - t0, "insert_s": t2 - t1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--count", type=int, default=100_000)
    a = ap.parse_args()
    if os.path.exists(a.db):
        sys.exit(f"{a.db} exists; seed.py creates a new controller file")
    s = seed(a.db, a.count)
    print(f"seeded {s['identities']} identities into {s['db']} (controller {s['create_s']:.1f} s,"
          f" inserts {s['insert_s']:.1f} s); admin {ADMIN_USER} / {ADMIN_PASSWORD}")


if __name__ == "__main__":
    main()
