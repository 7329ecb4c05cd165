"""Policy engine benchmark: relationship reads and policy writes at the upstream "large" scale.

Builds a controller with 100,000 identities (benchmarks/seed.py), 10,000 services, 100 edge
routers, 1,000 service policies, 100 edge router policies and 100 service edge router policies
with realistic role attributes, inserted straight through SQL, then derives every policy link
with ``ziti_lite.policy.links.rebuild``. Then, in process (starlette TestClient, admin session):

* ``GET /identities/{id}/services?policyType=dial`` (page of 10 with totalCount) and
  ``GET /services/{id}/identities``: median / p99, beside the bare SQL of the same answer;
* creating and changing a typical service policy, and one that selects ``#all`` identities,
  beside the bare SQL that materialises the same membership, and how long another writer
  (a second SQLite connection) waits meanwhile;
* creating an identity and changing its role attributes (entity-side link maintenance).

    .venv/bin/python benchmarks/policy_bench.py [--db /tmp/policy-bench.db] [--keep]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", category=DeprecationWarning)

import apsw  # noqa: E402

from benchmarks import seed as identity_seed  # noqa: E402
from benchmarks.common import insert_rows, median_p99, new_row, scratch_db  # noqa: E402

N_SERVICES, N_ROUTERS, N_SP, N_ERP, N_SERP = 10_000, 100, 1_000, 100, 100
SERVICE_ATTRS = [f"app-{n:04d}" for n in range(2000)]
ROUTER_ATTRS = ["public", "eu", "us", "apac", "edge-dc1", "edge-dc2"]


def populate(db: str) -> dict:
    """Everything but the identities (seeded first): services, routers, policies; then the links."""
    from ziti_lite.db.store import Store
    from ziti_lite.policy import links
    rnd = random.Random(7)
    store = Store(db)
    id_attrs = list(identity_seed.ATTRS)
    services = [new_row(f"svc-{n:05d}", role_attributes=json.dumps(
        [SERVICE_ATTRS[n % len(SERVICE_ATTRS)]] + (["shared"] if n < 10 else [])),
        encryption_required=1) for n in range(N_SERVICES)]
    routers = [new_row(f"er-{n:03d}", is_edge=1, is_verified=1,
                    role_attributes=json.dumps(rnd.sample(ROUTER_ATTRS, 2))) for n in range(N_ROUTERS)]
    sps = []
    for n in range(N_SP):
        if n == 0:  # one policy everybody has: shared services for #all identities
            ir, sem = ["#all"], "AnyOf"
        elif n % 10 == 0:
            ir, sem = ["#" + rnd.choice(id_attrs)], "AnyOf"                       # ~9 % of identities
        else:
            ir, sem = sorted("#" + a for a in rnd.sample(id_attrs, 2)), "AllOf"   # ~0.8 % of identities
        sr = ["#shared"] if n == 0 else ["#" + rnd.choice(SERVICE_ATTRS)]          # ~5 services
        sps.append(new_row(f"sp-{n:04d}", type="Dial" if n % 3 else "Bind", semantic=sem,
                        identity_roles=json.dumps(ir), service_roles=json.dumps(sr), posture_check_roles="[]"))
    erps = [new_row(f"erp-{n:03d}", semantic="AnyOf", identity_roles=json.dumps(["#" + rnd.choice(id_attrs)]),
                 edge_router_roles=json.dumps(["#" + rnd.choice(ROUTER_ATTRS)])) for n in range(N_ERP)]
    serps = [new_row(f"serp-{n:03d}", semantic="AnyOf", service_roles=json.dumps(["#" + rnd.choice(SERVICE_ATTRS)]),
                  edge_router_roles=json.dumps(["#" + rnd.choice(ROUTER_ATTRS)])) for n in range(N_SERP)]
    t0 = time.perf_counter()
    with store.write():
        insert_rows(store, "services", services)
        insert_rows(store, "routers", routers)
        insert_rows(store, "service_policies", sps)
        insert_rows(store, "edge_router_policies", erps)
        insert_rows(store, "service_edge_router_policies", serps)
    t1 = time.perf_counter()
    with store.write():
        links.rebuild(store)
    t2 = time.perf_counter()
    store.execute("ANALYZE")
    stats = {t: store.value(f"SELECT count(*) FROM {t}") for t in (
        "identities", "services", "routers", "service_policies", "service_policy_identities",
        "service_policy_services", "edge_router_policy_identities", "entity_role_attributes")}
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return {"insert_s": t1 - t0, "rebuild_s": t2 - t1, **stats}


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def fmt(ms: list[float]) -> str:
    median, p99 = median_p99(ms)
    return f"median {median:7.3f} ms  p99 {p99:7.3f} ms  (n={len(ms)})"


class WriterProbe:
    """A second connection that wants to write while the controller writes: it polls until it
    finds the write lock taken (the request's transaction began), then waits for it. The wait
    is how long any other writer is held up by that transaction."""

    def __init__(self, db: str):
        self.db = db
        self.waited: float | None = None
        self.go = threading.Event()

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        self.go.wait()

    def _run(self) -> None:
        conn = apsw.Connection(self.db)
        conn.setbusytimeout(0)
        self.go.set()
        deadline = time.perf_counter() + 5
        while time.perf_counter() < deadline:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except apsw.BusyError:
                t = time.perf_counter()
                conn.setbusytimeout(60_000)
                conn.execute("BEGIN IMMEDIATE")
                self.waited = (time.perf_counter() - t) * 1000
                conn.execute("ROLLBACK")
                break
            conn.execute("ROLLBACK")
            time.sleep(0.0002)
        conn.close()

    def join(self) -> float:
        self.thread.join()
        return self.waited or 0.0


def run(db: str) -> None:
    from starlette.testclient import TestClient

    from ziti_lite.app import create_app
    from ziti_lite.config import Settings
    from ziti_lite.db.store import Store

    app = create_app(Settings(db=db, admin_user=identity_seed.ADMIN_USER, admin_password=identity_seed.ADMIN_PASSWORD))
    # the app's connection belongs to the server's event loop thread: the benchmark's own SQL
    # (sample picking, bare-SQL baselines) goes through a second connection
    store = Store(db)
    M = "/edge/management/v1"
    with TestClient(app) as c:
        r = c.post(M + "/authenticate?method=password",
                   json={"username": identity_seed.ADMIN_USER, "password": identity_seed.ADMIN_PASSWORD})
        h = {"zt-session": r.json()["data"]["token"]}

        # a typical identity: the median number of dial services among a sample
        sample = store.column("SELECT id FROM identities WHERE is_default_admin = 0 ORDER BY id LIMIT 200 OFFSET 5000")
        counts = sorted((store.value(
            "SELECT count(DISTINCT s.service_id) FROM service_policy_identities i JOIN service_policy_services s"
            " ON s.policy_id = i.policy_id WHERE i.identity_id = ? AND i.type = 'Dial'", (i,)), i) for i in sample)
        n_services, ident = counts[len(counts) // 2]
        svc = store.value("SELECT service_id FROM service_policy_services WHERE policy_id ="
                          " (SELECT id FROM service_policies WHERE name = 'sp-0001')")
        shared = store.value("SELECT id FROM services WHERE name = 'svc-00000'")
        print(f"\nsample identity {ident}: {n_services} dial services; sample service {svc}")

        def get(path):
            def f():
                r = c.get(M + path, headers=h)
                assert r.status_code == 200, r.text
            return f

        def bare(where: str, params: list, table: str):
            def f():
                store.value(f"SELECT count(*) FROM {table} t WHERE {where}", params)
                store.all(f"SELECT t.* FROM {table} t WHERE {where} ORDER BY t.id LIMIT 10 OFFSET 0", params)
            return f

        from ziti_lite.handlers import relations
        print("\n== reads (in-process HTTP via TestClient, admin session) ==")
        for label, path, where, params, table in (
                ("GET /identities/{id}/services?policyType=dial", f"/identities/{ident}/services?policyType=dial",
                 relations.IDENTITY_SERVICES.format(" AND i.type = ?"), [ident, "Dial"], "services"),
                ("GET /services/{id}/identities", f"/services/{svc}/identities",
                 relations.SERVICE_IDENTITIES.format(""), [svc], "identities"),
                ("GET /services/{id}/identities (#all: 100k)", f"/services/{shared}/identities",
                 relations.SERVICE_IDENTITIES.format(""), [shared], "identities"),
                ("GET /identities/{id}/edge-routers", f"/identities/{ident}/edge-routers",
                 relations.IDENTITY_ROUTERS, [ident], "routers"),
                ("GET /identities/{id} (point read, reference)", f"/identities/{ident}", None, None, None)):
            get(path)()
            print(f"{label:48s} HTTP  {fmt(timed(get(path), 300))}")
            if where:
                print(f"{'':48s} SQL   {fmt(timed(bare(where, params, table), 300))}")
        total = c.get(M + f"/identities/{ident}/services?policyType=dial", headers=h).json()["meta"]["pagination"]
        print(f"  (page of 10, totalCount {total['totalCount']})")

        print("\n== writes (HTTP, one transaction each; 'writer wait' = a 2nd connection's BEGIN IMMEDIATE) ==")
        attrs = list(identity_seed.ATTRS)
        rnd = random.Random(11)

        def post_sp(body):
            r = c.post(M + "/service-policies", json=body, headers=h)
            assert r.status_code == 201, r.text
            return r.json()["data"]["id"]

        def typical_body(n):
            return {"name": f"bench-sp-{n}", "type": "Dial", "semantic": "AllOf",
                    "identityRoles": ["#" + a for a in rnd.sample(attrs, 2)],
                    "serviceRoles": ["#" + rnd.choice(SERVICE_ATTRS)]}

        created, times = [], []
        for n in range(30):
            body = typical_body(n)
            t = time.perf_counter()
            created.append(post_sp(body))
            times.append((time.perf_counter() - t) * 1000)
        members = store.value("SELECT avg(c) FROM (SELECT count(*) c FROM service_policy_identities"
                              " WHERE policy_id IN (SELECT value FROM json_each(?)) GROUP BY policy_id)",
                              (json.dumps(created),))
        label = f"create typical SP (~{members} identities x ~5 services)"
        print(f"{label:48s} {fmt(times)}")
        times = []
        for pid in created:
            body = {"identityRoles": ["#" + a for a in rnd.sample(attrs, 2)]}
            t = time.perf_counter()
            assert c.patch(M + f"/service-policies/{pid}", json=body, headers=h).status_code == 200
            times.append((time.perf_counter() - t) * 1000)
        print(f"{'PATCH typical SP identityRoles':48s} {fmt(times)}")

        def bare_materialise(roles: list[str], semantic: str):
            from ziti_lite.policy import evaluate
            from ziti_lite.policy.model import IDENTITY
            sql, params = evaluate.member_sql(IDENTITY, roles, semantic)

            def f():
                with store.write():
                    store.execute("INSERT INTO service_policies (id, created_at, updated_at, name, type, semantic)"
                                  " VALUES ('bare', 'x', 'x', 'bare', 'Dial', ?)", (semantic,))
                    store.execute("INSERT INTO service_policy_identities (policy_id, identity_id, type)"
                                  f" SELECT 'bare', id, 'Dial' FROM ({sql})", params)
                    store.execute("DELETE FROM service_policies WHERE id = 'bare'")
            return f
        print(f"{'  bare SQL: insert typical membership (+delete)':48s} "
              f"{fmt(timed(bare_materialise(['#engineering', '#region-eu'], 'AllOf'), 30))}")

        times, waits = [], []
        all_ids = []
        for n in range(3):
            probe = WriterProbe(db)
            probe.start()
            t = time.perf_counter()
            all_ids.append(post_sp({"name": f"bench-all-{n}", "type": "Bind", "semantic": "AnyOf",
                                    "identityRoles": ["#all"], "serviceRoles": ["#" + SERVICE_ATTRS[n]]}))
            times.append((time.perf_counter() - t) * 1000)
            waits.append(probe.join())
        print(f"{'create #all SP (100k identities)':48s} {fmt(times)}  writer wait max {max(waits):.0f} ms")
        times, waits = [], []
        for n, pid in enumerate(all_ids):
            for roles in (["#" + attrs[n]], ["#all"]):
                probe = WriterProbe(db)
                probe.start()
                t = time.perf_counter()
                assert c.patch(M + f"/service-policies/{pid}", json={"identityRoles": roles}, headers=h).status_code == 200
                times.append((time.perf_counter() - t) * 1000)
                waits.append(probe.join())
        print(f"{'PATCH #all <-> #attr identityRoles':48s} {fmt(times)}  writer wait max {max(waits):.0f} ms")
        times = []
        for pid in all_ids:
            t = time.perf_counter()
            assert c.patch(M + f"/service-policies/{pid}", json={"serviceRoles": ["#shared"]}, headers=h).status_code == 200
            times.append((time.perf_counter() - t) * 1000)
        print(f"{'PATCH #all SP serviceRoles only':48s} {fmt(times)}")
        print(f"{'  bare SQL: insert #all membership (+delete)':48s} {fmt(timed(bare_materialise(['#all'], 'AnyOf'), 3))}")
        times = []
        for pid in all_ids + created:
            t = time.perf_counter()
            assert c.delete(M + f"/service-policies/{pid}", headers=h).status_code == 200
            times.append((time.perf_counter() - t) * 1000)
        print(f"{'DELETE SP (typical and #all)':48s} {fmt(times)}")

        times, new_ids = [], []
        for n in range(50):
            body = {"name": f"bench-identity-{n}", "type": "User", "isAdmin": False,
                    "roleAttributes": rnd.sample(attrs, 3)}
            t = time.perf_counter()
            r = c.post(M + "/identities", json=body, headers=h)
            times.append((time.perf_counter() - t) * 1000)
            new_ids.append(r.json()["data"]["id"])
        print(f"{'create identity with 3 attributes':48s} {fmt(times)}")
        times = []
        for iid in new_ids:
            t = time.perf_counter()
            assert c.patch(M + f"/identities/{iid}", json={"roleAttributes": rnd.sample(attrs, 3)}, headers=h).status_code == 200
            times.append((time.perf_counter() - t) * 1000)
        print(f"{'PATCH identity roleAttributes':48s} {fmt(times)}")
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="database file to create (default: a temporary file)")
    ap.add_argument("--keep", action="store_true", help="keep the database file afterwards")
    a = ap.parse_args()
    with scratch_db(a.db, a.keep, "policy-bench-", "bench.db") as db:
        t = time.perf_counter()
        s = identity_seed.seed(db, 100_000)
        print(f"seeded {s['identities']} identities in {time.perf_counter() - t:.1f} s")
        p = populate(db)
        print(f"inserted services/routers/policies in {p['insert_s']:.1f} s; links.rebuild {p['rebuild_s']:.1f} s")
        print("rows: " + ", ".join(f"{k} {v}" for k, v in p.items() if not k.endswith("_s")))
        run(db)


if __name__ == "__main__":
    main()
