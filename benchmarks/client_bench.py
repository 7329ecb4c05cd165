"""Client API benchmark: what an SDK calls all day, at the "many services" scale.

Builds a controller with 10,000 services (each with an ``intercept.v1`` config), 2,000 other
identities, 100 edge routers and 101 service policies, inserted straight through SQL; one
identity may dial 1,000 of the services (one Dial policy ``#bench`` -> ``#granted``), every
identity and service may use every router. Links are derived with ``policy.links.rebuild``.
The identity logs in with ``configTypes: ["all"]``. Then, in process (requests driven straight
into the ASGI controller on one event loop, no network, no TLS), median and p99 of:

* ``GET /edge/client/v1/services`` (first page: 10 rows with totalCount), ``limit=100`` and
  ``limit=-1`` (all 1,000), each row with permissions, merged config and posture queries;
* ``POST /edge/client/v1/sessions`` (a new Dial session per request, for 1,000 services), and
  asking again for an existing one;

each beside the bare SQL of the same answer on the same file (apsw, no HTTP, no rendering
beyond encoding the rows).

    .venv/bin/python benchmarks/client_bench.py [--db /tmp/client-bench.db] [--keep] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import uuid
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", category=DeprecationWarning)

import apsw  # noqa: E402
import msgspec  # noqa: E402

from benchmarks.common import insert_rows, median_p99, new_row, scratch_db  # noqa: E402
from ziti_lite import clock  # noqa: E402

N_SERVICES, N_GRANTED, N_IDENTITIES, N_ROUTERS, N_OTHER_SP = 10_000, 1_000, 2_000, 100, 100
INTERCEPT = "g7cIWbcGg"
ADMIN_PASSWORD = "bench-Passw0rd"
CLIENT = "/edge/client/v1"


def populate(ctl) -> str:
    """Services, configs, identities, routers, policies; returns the bench identity's id."""
    from ziti_lite.policy import links
    store = ctl.store
    rnd = random.Random(11)
    granted = set(rnd.sample(range(N_SERVICES), N_GRANTED))
    configs, services = [], []
    for n in range(N_SERVICES):
        cfg = new_row(f"cfg-{n:05d}", config_type_id=INTERCEPT, data=json.dumps(
            {"protocols": ["tcp"], "addresses": [f"svc-{n:05d}.ziti"], "portRanges": [{"low": 443, "high": 443}]}))
        configs.append(cfg)
        attrs = ["granted"] if n in granted else [f"app-{n % 500:03d}"]
        services.append(new_row(f"svc-{n:05d}", role_attributes=json.dumps(attrs), configs=json.dumps([cfg["id"]]),
                             encryption_required=1))
    me = new_row("bench-device", type_id="Default", role_attributes=json.dumps(["bench"]))
    others = [new_row(f"device-{n:05d}", type_id="Default", role_attributes=json.dumps([f"team-{n % 100:02d}"]))
              for n in range(N_IDENTITIES)]
    routers = [new_row(f"er-{n:03d}", is_edge=1, is_verified=1, role_attributes=json.dumps(["public"]))
               for n in range(N_ROUTERS)]
    sps = [new_row("dial-granted", type="Dial", semantic="AnyOf", identity_roles=json.dumps(["#bench"]),
                service_roles=json.dumps(["#granted"]), posture_check_roles="[]")]
    sps += [new_row(f"sp-{n:03d}", type="Dial" if n % 2 else "Bind", semantic="AnyOf",
                 identity_roles=json.dumps([f"#team-{n:02d}"]), service_roles=json.dumps([f"#app-{n * 5 % 500:03d}"]),
                 posture_check_roles="[]") for n in range(N_OTHER_SP)]
    erp = new_row("erp-all", semantic="AnyOf", identity_roles=json.dumps(["#all"]), edge_router_roles=json.dumps(["#public"]))
    serp = new_row("serp-all", semantic="AnyOf", service_roles=json.dumps(["#all"]), edge_router_roles=json.dumps(["#public"]))
    with store.write():
        insert_rows(store, "configs", configs)
        insert_rows(store, "services", services)
        store.executemany("INSERT INTO service_configs (service_id, config_id) VALUES (?, ?)",
                          [(s["id"], json.loads(s["configs"])[0]) for s in services])
        insert_rows(store, "identities", [me] + others)
        insert_rows(store, "routers", routers)
        insert_rows(store, "service_policies", sps)
        insert_rows(store, "edge_router_policies", [erp])
        insert_rows(store, "service_edge_router_policies", [serp])
        links.rebuild(store)
    return me["id"]


# ------------------------------------------------------------------ driving the ASGI app
async def call(app, method: str, path: str, token: str | None = None, body: bytes = b"") -> tuple[int, bytes]:
    path, _, query = path.partition("?")
    headers = [(b"content-type", b"application/json")]
    if token:
        headers.append((b"zt-session", token.encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "https", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 1280)}
    sent = False
    out: dict = {"status": 0, "body": []}

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        elif message["type"] == "http.response.body":
            out["body"].append(message.get("body", b""))

    await app(scope, receive, send)
    return out["status"], b"".join(out["body"])


def stats(samples: list[float]) -> dict:
    median, p99 = median_p99(samples)
    return {"n": len(samples), "median_ms": round(median * 1000, 3), "p99_ms": round(p99 * 1000, 3)}


async def timed(fn, rounds: int) -> dict:
    samples = []
    for i in range(rounds):
        t = time.perf_counter()
        await fn(i)
        samples.append(time.perf_counter() - t)
    return stats(samples)


# ------------------------------------------------------------------ bare SQL of the same answers
PAGE_SQL = ("SELECT t.* FROM services t WHERE t.id IN (SELECT s.service_id FROM service_policy_identities i"
            " JOIN service_policy_services s ON s.policy_id = i.policy_id WHERE i.identity_id = ?)"
            " ORDER BY t.id LIMIT ? OFFSET 0")
COUNT_SQL = ("SELECT count(*) FROM services t WHERE t.id IN (SELECT s.service_id FROM service_policy_identities i"
             " JOIN service_policy_services s ON s.policy_id = i.policy_id WHERE i.identity_id = ?)")
PERMS_SQL = ("SELECT s.service_id, i.type FROM service_policy_identities i JOIN service_policy_services s"
             " ON s.policy_id = i.policy_id WHERE i.identity_id = ? AND s.service_id IN (SELECT value FROM json_each(?))")
CONFIGS_SQL = ("SELECT c.id, ct.name, c.data FROM configs c JOIN config_types ct ON ct.id = c.config_type_id"
               " WHERE c.id IN (SELECT value FROM json_each(?))")


def bare_list(conn, identity_id: str, limit: int) -> bytes:
    total = conn.execute(COUNT_SQL, (identity_id,)).fetchone()[0]
    cur = conn.execute(PAGE_SQL, (identity_id, limit))
    names = [d[0] for d in cur.getdescription()]
    rows = [dict(zip(names, r)) for r in cur]
    ids = json.dumps([r["id"] for r in rows])
    perms: dict = {}
    for sid, typ in conn.execute(PERMS_SQL, (identity_id, ids)):
        perms.setdefault(sid, []).append(typ)
    cfg_ids = [c for r in rows for c in json.loads(r["configs"])]
    configs = {cid: (name, msgspec.Raw(data)) for cid, name, data in conn.execute(CONFIGS_SQL, (json.dumps(cfg_ids),))}
    data = []
    for r in rows:
        r["permissions"] = perms.get(r["id"], [])
        r["config"] = {configs[c][0]: configs[c][1] for c in json.loads(r["configs"]) if c in configs}
        data.append(r)
    return msgspec.json.encode({"data": data, "meta": {"pagination": {"limit": limit, "offset": 0, "totalCount": total}}})


def bare_session(conn, identity_id: str, api_session_id: str, service_id: str) -> None:
    allowed = conn.execute("SELECT 1 FROM service_policy_identities i JOIN service_policy_services s"
                           " ON s.policy_id = i.policy_id AND s.service_id = ? WHERE i.identity_id = ? AND i.type = 'Dial'"
                           " LIMIT 1", (service_id, identity_id)).fetchone()
    routers = conn.execute(
        "SELECT t.id, t.name FROM routers t WHERE t.is_edge = 1"
        " AND t.id IN (SELECT r.router_id FROM edge_router_policy_identities i JOIN edge_router_policy_routers r"
        " ON r.policy_id = i.policy_id WHERE i.identity_id = ?)"
        " AND t.id IN (SELECT r.router_id FROM service_edge_router_policy_services s JOIN service_edge_router_policy_routers r"
        " ON r.policy_id = s.policy_id WHERE s.service_id = ?) ORDER BY t.name LIMIT 25", (identity_id, service_id)).fetchall()
    assert allowed and routers
    now = clock.stamp()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO sessions (id, created_at, updated_at, token, api_session_id, identity_id, service_id, type)"
                 " VALUES (?,?,?,?,?,?,?,'Dial')", ("b" + uuid.uuid4().hex, now, now, str(uuid.uuid4()),
                                                    api_session_id, identity_id, service_id))
    conn.execute("COMMIT")
    msgspec.json.encode({"data": {"edgeRouters": [{"name": n} for _, n in routers]}})


# ------------------------------------------------------------------ main
async def run(args) -> dict:
    from ziti_lite.app import Controller
    from ziti_lite.config import Settings
    ctl = Controller(Settings(db=args.db, admin_password=ADMIN_PASSWORD))
    t = time.perf_counter()
    me = populate(ctl)
    build_s = time.perf_counter() - t

    status, body = await call(ctl, "POST", "/edge/management/v1/authenticate?method=password",
                              body=json.dumps({"username": "admin", "password": ADMIN_PASSWORD}).encode())
    admin = json.loads(body)["data"]["token"]
    status, body = await call(ctl, "POST", "/edge/management/v1/authenticators", admin, json.dumps(
        {"method": "updb", "identityId": me, "username": "bench-device", "password": ADMIN_PASSWORD}).encode())
    assert status == 201, body
    login = json.dumps({"username": "bench-device", "password": ADMIN_PASSWORD, "configTypes": ["all"]}).encode()
    status, body = await call(ctl, "POST", CLIENT + "/authenticate?method=password", body=login)
    token = json.loads(body)["data"]["token"]
    json.loads(body)["data"]["id"]

    status, body = await call(ctl, "GET", CLIENT + "/services?limit=-1", token)
    page = json.loads(body)
    assert status == 200 and page["meta"]["pagination"]["totalCount"] == N_GRANTED and len(page["data"]) == N_GRANTED
    assert all(s["permissions"] == ["Dial"] and "intercept.v1" in s["config"] for s in page["data"])
    granted = [s["id"] for s in page["data"]]

    results: dict = {"build_s": round(build_s, 1)}

    async def first_page(i):
        s, _ = await call(ctl, "GET", CLIENT + "/services", token)
        assert s == 200

    async def all_rows(i):
        s, _ = await call(ctl, "GET", CLIENT + "/services?limit=-1", token)
        assert s == 200

    async def hundred(i):
        s, _ = await call(ctl, "GET", CLIENT + "/services?limit=100", token)
        assert s == 200

    results["GET /services (first page)"] = await timed(first_page, args.rounds)
    results["GET /services?limit=100"] = await timed(hundred, args.rounds)
    results["GET /services?limit=-1 (1,000 rows)"] = await timed(all_rows, max(20, args.rounds // 10))

    async def new_session(i):
        s, b = await call(ctl, "POST", CLIENT + "/sessions", token,
                          json.dumps({"serviceId": granted[i], "type": "Dial"}).encode())
        assert s == 201, b

    async def same_session(i):
        s, _ = await call(ctl, "POST", CLIENT + "/sessions", token,
                          json.dumps({"serviceId": granted[0], "type": "Dial"}).encode())
        assert s == 201

    results["POST /sessions (new)"] = await timed(new_session, min(N_GRANTED, args.rounds * 5))
    results["POST /sessions (existing)"] = await timed(same_session, args.rounds)

    # bare SQL on its own connection to the same file
    conn = apsw.Connection(args.db)
    conn.setbusytimeout(5000)

    async def bare_first(i):
        bare_list(conn, me, 10)

    async def bare_all(i):
        bare_list(conn, me, -1)

    async def bare_hundred(i):
        bare_list(conn, me, 100)

    results["bare SQL: first page"] = await timed(bare_first, args.rounds)
    results["bare SQL: 100 rows"] = await timed(bare_hundred, args.rounds)
    results["bare SQL: all 1,000 rows"] = await timed(bare_all, max(20, args.rounds // 10))
    # a second API session so the bare inserts do not collide with the ones made above
    status, body = await call(ctl, "POST", CLIENT + "/authenticate?method=password", body=login)
    other_session = json.loads(body)["data"]["id"]

    async def bare_new(i):
        bare_session(conn, me, other_session, granted[i])

    results["bare SQL: new session"] = await timed(bare_new, min(N_GRANTED, args.rounds * 5))
    conn.close()
    ctl.store.close()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    with scratch_db(args.db, args.keep, "client-bench-", "client-bench.db") as db:
        args.db = db
        results = asyncio.run(run(args))
    print(f"built in {results.pop('build_s')} s "
          f"({N_SERVICES} services, {N_GRANTED} dialable by the caller, {N_IDENTITIES + 1} identities)")
    width = max(len(k) for k in results)
    for name, r in results.items():
        print(f"  {name:<{width}}  median {r['median_ms']:>8.3f} ms   p99 {r['p99_ms']:>8.3f} ms   (n={r['n']})")


if __name__ == "__main__":
    main()
