"""Scale benchmark: a million identities, 10,000 services and 1,000 service policies.

The database is seeded once (``seed.py``'s identities with their authenticators and
enrollments, plus services and policies straight through SQL, links derived with
``policy.links.rebuild``) and cached in ``benchmarks/.cache/`` (outside git); later runs reuse it.
Then ``ziti-lite serve`` runs on a copy-free open of that file (loopback, TLS) and each request is
timed sequentially over one keep-alive connection (the server's latency, not throughput):

* first page of identities with ``totalCount`` (goal < 20 ms);
* ``name contains`` / ``icontains`` searches with ``totalCount``: a selective needle (goal
  < 20 ms) and, for the record, an unselective one;
* a typical policy write: ``POST /service-policies`` naming 20 identities and a service
  attribute, then ``PATCH`` of its identity roles, then ``DELETE`` (goal < 100 ms);
* the server's RSS (goal < 500 MB) and the database file size.

Beside each read, the bare SQL of the same answer on the same file in this process (apsw, the
same page + count, no HTTP): ``bare`` columns; and the plain scan the search replaced
(``instr(name, ?)`` page + count) for the "before" figure.

    .venv/bin/python benchmarks/scale_bench.py [--identities 1000000] [--rounds 30] [--reseed]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import apsw  # noqa: E402

from benchmarks.common import free_port, insert_rows, login, median_p99, new_row, start_server, stop_server, wait_ready  # noqa: E402
from benchmarks.login_bench import Conn, request, tls_context  # noqa: E402
from benchmarks.seed import ADMIN_PASSWORD, ADMIN_USER, seed  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"
MGMT = "/edge/management/v1"
N_SERVICES, N_POLICIES, N_ATTR_POLICIES = 10_000, 1_000, 10
UNSELECTIVE = "garcia"
SELECTIVE = ""      # set from the database: the "last-device-number" part of one identity's name


def seeded(identities: int, reseed: bool) -> Path:
    import hashlib

    from ziti_lite.db.store import schema_sql
    CACHE.mkdir(exist_ok=True)
    # a change of the schema's statements (not of its comments) seeds anew
    statements = "\n".join(line for line in schema_sql().splitlines() if not line.lstrip().startswith("--"))
    schema = hashlib.sha256(statements.encode()).hexdigest()[:10]
    db = CACHE / f"scale-{identities}-{schema}.db"
    if db.exists() and not reseed:
        return db
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            os.remove(f"{db}{suffix}")
    t0 = time.perf_counter()
    stats = seed(str(db), identities)
    t1 = time.perf_counter()
    add_services_and_policies(str(db))
    from ziti_lite.db import search
    c = apsw.Connection(str(db))
    for table in ("services", "service_policies"):
        search.optimize(c, table)
    c.close()
    print(f"seeded {stats['identities']:,} identities in {t1 - t0:.0f} s, services and policies in"
          f" {time.perf_counter() - t1:.0f} s -> {db}")
    return db


def add_services_and_policies(db: str) -> None:
    from ziti_lite.db.store import Store
    from ziti_lite.policy import links
    store = Store(db)
    rnd = random.Random(7)
    ids = store.column("SELECT id FROM identities WHERE is_default_admin = 0")
    services = [new_row(f"svc-{n:05d}", role_attributes=json.dumps([f"app-{n % 500:03d}"]), configs="[]",
                        encryption_required=1) for n in range(N_SERVICES)]
    sps = []
    for n in range(N_POLICIES):
        if n < N_ATTR_POLICIES:     # a few broad ones by attribute (each ~9 % of the identities)
            roles = [f"#{a}" for a in ("finance", "support", "ops", "lab", "hq", "ci", "interns", "partners",
                                       "managers", "on-call")[n:n + 1]]
        else:                       # most name a team: 20 identities by id
            roles = [f"@{i}" for i in rnd.sample(ids, 20)]
        sps.append(new_row(f"sp-{n:04d}", type="Dial" if n % 2 else "Bind", semantic="AnyOf",
                           identity_roles=json.dumps(roles), service_roles=json.dumps([f"#app-{n % 500:03d}"]),
                           posture_check_roles="[]"))
    with store.write():
        insert_rows(store, "services", services)
        insert_rows(store, "service_policies", sps)
        links.rebuild(store)
    store.execute("ANALYZE")
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def rss_mb(pid: int) -> tuple[float, float]:
    vals = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                k, v = line.split(":")
                vals[k] = int(v.split()[0]) / 1024
    return vals.get("VmRSS", 0.0), vals.get("VmHWM", 0.0)


def bare_timings(db: str, rounds: int) -> dict:
    """The same pages and counts straight through apsw on the same file."""
    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    conn.execute("PRAGMA cache_size = -65536")

    def timed(fn) -> tuple[float, float]:
        fn()
        samples = []
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t)
        return median_p99(samples)

    def page():
        conn.execute("SELECT * FROM identities ORDER BY id LIMIT 10").fetchall()
        conn.execute("SELECT count(*) FROM identities").fetchall()

    def scan(needle):
        def run():
            conn.execute("SELECT * FROM identities WHERE instr(name, ?) > 0 ORDER BY id LIMIT 10", (needle,)).fetchall()
            conn.execute("SELECT count(*) FROM identities WHERE instr(name, ?) > 0", (needle,)).fetchall()
        return run

    def fts(needle):
        """What the filter compiler emits for ``name contains``: count in the index, then the page."""
        from ziti_lite import zitiql as zq
        from ziti_lite.db import filters as fq
        from ziti_lite.db import search
        c = fq.compile_query(zq.Query(zq.Compare(zq.Ref("name"), zq.CONTAINS, needle)),
                             {"name": fq.Symbol("string", "t.name", search="identities")})

        def run():
            total = conn.execute(*c.count).fetchone()[0]
            where = search.probe_variant(c.where) if total > 2000 else c.where
            conn.execute(f"SELECT t.* FROM identities t WHERE {where} ORDER BY t.id LIMIT 10", c.params).fetchall()
        return run

    out = {"page": timed(page), "fts_selective": timed(fts(SELECTIVE)), "fts_unselective": timed(fts(UNSELECTIVE))}
    few = max(3, rounds // 10)     # the scans take seconds at a million rows
    out["scan_selective"] = median_p99([_once(scan(SELECTIVE)) for _ in range(few)])
    out["scan_unselective"] = median_p99([_once(scan(UNSELECTIVE)) for _ in range(few)])
    conn.close()
    return out


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


async def served(port: int, token: str, rounds: int, sample_ids: list[str]) -> dict:
    conn = await Conn.open(port, tls_context())
    h = {"zt-session": token}

    async def timed(req: bytes, expect: int = 200, n: int = rounds) -> tuple[float, float, bytes]:
        status, body = await conn.call(req)
        assert status == expect, (status, body[:300])
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            status, body = await conn.call(req)
            samples.append(time.perf_counter() - t)
            assert status == expect, (status, body[:300])
        return (*median_p99(samples), body)

    def listing(filter_text: str | None = None) -> bytes:
        q = "?limit=10" + (f"&filter={urllib.parse.quote(filter_text)}" if filter_text else "")
        return request("GET", MGMT + "/identities" + q, headers=h)

    out = {}
    for key, req in (("page", listing()),
                     ("deep", request("GET", MGMT + "/identities?limit=10&offset=100000", headers=h)),
                     ("selective", listing(f'name contains "{SELECTIVE}"')),
                     ("iselective", listing(f'name icontains "{SELECTIVE.upper()}"')),
                     ("unselective", listing(f'name contains "{UNSELECTIVE}"'))):
        p50, p99, body = await timed(req)
        out[key] = (p50, p99, json.loads(body)["meta"]["pagination"]["totalCount"])
    out["detail"] = (await timed(request("GET", MGMT + f"/identities/{sample_ids[0]}", headers=h)))[:2]

    # a typical policy write: 20 identities by id and a service attribute; then patch, delete
    creates, patches, deletes = [], [], []
    for n in range(min(rounds, 20)):
        body = {"name": f"bench-sp-{n}-{time.time_ns()}", "type": "Dial", "semantic": "AnyOf",
                "identityRoles": [f"@{i}" for i in sample_ids[n * 20:(n + 1) * 20]],
                "serviceRoles": [f"#app-{n:03d}"], "postureCheckRoles": []}
        t = time.perf_counter()
        status, resp = await conn.call(request("POST", MGMT + "/service-policies", body, headers=h))
        creates.append(time.perf_counter() - t)
        assert status == 201, resp[:300]
        pid = json.loads(resp)["data"]["id"]
        t = time.perf_counter()
        status, resp = await conn.call(request("PATCH", MGMT + f"/service-policies/{pid}",
                                               {"identityRoles": [f"@{i}" for i in sample_ids[n * 20 + 5:(n + 1) * 20 + 5]]},
                                               headers=h))
        patches.append(time.perf_counter() - t)
        assert status == 200, resp[:300]
        t = time.perf_counter()
        status, resp = await conn.call(request("DELETE", MGMT + f"/service-policies/{pid}", headers=h))
        deletes.append(time.perf_counter() - t)
        assert status == 200, resp[:300]
    out["sp_create"], out["sp_patch"], out["sp_delete"] = median_p99(creates), median_p99(patches), median_p99(deletes)
    # and one broad policy by attribute (~9 % of the identities), for the record
    body = {"name": f"bench-broad-{time.time_ns()}", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#sales"],
            "serviceRoles": ["#app-001"], "postureCheckRoles": []}
    t = time.perf_counter()
    status, resp = await conn.call(request("POST", MGMT + "/service-policies", body, headers=h))
    out["sp_broad"] = time.perf_counter() - t
    assert status == 201, resp[:300]
    pid = json.loads(resp)["data"]["id"]
    t = time.perf_counter()
    status, resp = await conn.call(request("DELETE", MGMT + f"/service-policies/{pid}", headers=h))
    out["sp_broad_delete"] = time.perf_counter() - t
    conn.close()
    return out


def ms(x: float) -> str:
    return f"{x * 1000:8.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--identities", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--reseed", action="store_true")
    a = ap.parse_args()
    db = seeded(a.identities, a.reseed)
    size = sum(os.path.getsize(f"{db}{s}") for s in ("", "-wal") if os.path.exists(f"{db}{s}"))
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    sizes = {}
    try:
        for name, n in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"):
            sizes[name] = n
    except apsw.SQLError:
        pass
    global SELECTIVE
    SELECTIVE = conn.execute("SELECT name FROM identities WHERE is_default_admin = 0 LIMIT 1 OFFSET 424242 % ?",
                             (a.identities,)).fetchone()[0].split(".", 1)[1]
    sample_ids = [r[0] for r in conn.execute("SELECT id FROM identities WHERE is_default_admin = 0 LIMIT 500 OFFSET 12345")]
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("identities", "services", "service_policies", "service_policy_identities")}
    conn.close()

    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-scale-"))
    port = free_port()
    log = open(tmp / "server.log", "wb")
    t0 = time.perf_counter()
    proc = start_server(db, port, log)
    try:
        origin = f"https://127.0.0.1:{port}"
        wait_ready(origin + "/edge/client/v1", proc)
        startup = time.perf_counter() - t0
        token = login(origin + MGMT, ADMIN_USER, ADMIN_PASSWORD)
        rss_start = rss_mb(proc.pid)
        s = asyncio.run(served(port, token, a.rounds, sample_ids))
        rss_end = rss_mb(proc.pid)
    finally:
        stop_server(proc)
        log.close()
        (tmp / "server.log").unlink()
        tmp.rmdir()
    b = bare_timings(str(db), a.rounds)

    print(f"\nziti-lite at scale: {counts['identities']:,} identities, {counts['services']:,} services,"
          f" {counts['service_policies']:,} service policies ({counts['service_policy_identities']:,} policy-identity"
          f" links); sequential requests on one keep-alive TLS connection, {a.rounds} rounds, median / p99\n")
    print(f"{'':48} {'ziti-lite p50':>13} {'p99':>11}   {'bare SQL p50':>12} {'p99':>11}   goal")
    rows = [("first page of identities + totalCount", s["page"], b["page"], "< 20 ms"),
            (f'contains "{SELECTIVE}" + totalCount', s["selective"], b["fts_selective"], "< 20 ms"),
            (f'icontains "{SELECTIVE.upper()}" + totalCount', s["iselective"], b["fts_selective"], "< 20 ms"),
            (f'contains "{UNSELECTIVE}" + totalCount', s["unselective"], b["fts_unselective"], "(for the record)")]
    for label, (p50, p99, *rest), (b50, b99), goal in rows:
        extra = f"  totalCount {rest[0]:,}" if rest else ""
        print(f"{label:48} {ms(p50)} {ms(p99)}   {ms(b50)} {ms(b99)}   {goal}{extra}")
    print(f"{'offset=100000 page + totalCount':48} {ms(s['deep'][0])} {ms(s['deep'][1])}")
    print(f"{'identity detail':48} {ms(s['detail'][0])} {ms(s['detail'][1])}")
    print(f"\nbefore (the plain scan the search replaced, bare SQL page + count):"
          f" selective {ms(b['scan_selective'][0])}, unselective {ms(b['scan_unselective'][0])}")
    print(f"\npolicy writes (20 identities by id, one service attribute):  create {ms(s['sp_create'][0])}"
          f" p99 {ms(s['sp_create'][1])}; patch roles {ms(s['sp_patch'][0])} p99 {ms(s['sp_patch'][1])};"
          f" delete {ms(s['sp_delete'][0])}   goal < 100 ms")
    print(f"broad policy (#sales, ~9 % of identities): create {ms(s['sp_broad'])}, delete {ms(s['sp_broad_delete'])}")
    print(f"\nserver RSS: {rss_start[0]:.0f} MB after start-up, {rss_end[0]:.0f} MB at the end, peak {rss_end[1]:.0f} MB"
          f"   goal < 500 MB;  start-up {startup:.1f} s")
    big = ", ".join(f"{k} {v / 1e6:.0f}" for k, v in list(sizes.items())[:8])
    print(f"database file: {size / 1e6:.0f} MB   (largest, MB: {big})")


if __name__ == "__main__":
    main()
