"""ziti-lite beside the OpenZiti controller on the same machine, same requests, alternating rounds.

Needs an OpenZiti ``ziti`` binary (v1.3.3 for the comparison in the README): ``$ZITI_BIN``,
``$ZITI_CLI``, the interop tests' cached build or ``ziti`` on PATH; without one it says so and
exits 0. It starts ``ziti edge quickstart
--no-router`` (the controller alone, its own PKI and bbolt database in a temporary directory) and
``ziti-lite serve`` on a fresh file, both on loopback, and seeds both through their management
APIs with the same network: identities (default 10,000), services (1,000) with a Dial policy
each (100 policies over 10 services each), an edge router with edge-router and
service-edge-router policies, one user with a password and one device enrolled with a
certificate. Then for each operation it alternates rounds (ziti-lite, OpenZiti, ziti-lite, ...)
of ``--seconds`` under ``-c`` keep-alive TLS connections and reports the median req/s of each and
the ratio ziti-lite / OpenZiti, then the RSS of both processes. Reads, sessions, logins (with the
count of answers other than 200, 429 among them) and writes: policy create, update (role change)
and delete, identity create, identity create with a one-time-token enrollment, and completing
such enrollments with a CSR. Deletes and enrollments use up what earlier operations made (the
policies of the create rounds, the identities of the OTT-create rounds), a share per round: a
round ends early when its share is used up, and its rate is counted over the time it ran.

    .venv/bin/python benchmarks/vs_openziti.py [--identities 10000] [--rounds 3] [--seconds 3] [-c 16]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import free_port, row, start_server, stop_server, wait_ready, write_rows  # noqa: E402
from benchmarks.login_bench import Conn, request, tls_context  # noqa: E402
from benchmarks.scale_bench import rss_mb  # noqa: E402

MGMT, CLIENT = "/edge/management/v1", "/edge/client/v1"
ADMIN_PASSWORD = "bench-Passw0rd"
USER_PASSWORD = "User-Passw0rd-1"


def low_free_port() -> int:
    """A free loopback port below 32768: the quickstart's --ctrl-port flag is an int16."""
    import random
    import socket
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit("no free port below 32768")


def ziti_binary() -> str | None:
    """$ZITI_BIN, $ZITI_CLI or the interop tests' cached build (tests/interop/test_ziti_cli.py),
    else ``ziti`` on PATH: the ``ziti`` binary holds the controller too."""
    cached = Path.home() / ".cache" / "ziti-lite" / "ziti-cli-v1.3.3" / "ziti"
    for candidate in (os.environ.get("ZITI_BIN"), os.environ.get("ZITI_CLI"), str(cached) if cached.exists() else None):
        if candidate:
            return candidate
    return shutil.which("ziti")


class Target:
    def __init__(self, name: str, port: int, proc: subprocess.Popen):
        self.name, self.port, self.proc = name, port, proc
        self.token = self.user_token = self.cert_token = ""
        self.ids: list[str] = []
        self.services: list[str] = []
        self.policies: list[str] = []
        self.ott_ids: list[str] = []    # the identities the OTT-create rounds made (the enrollment pool)
        self.cert = self.key = ""
        self.pid = proc.pid

    async def call(self, conn: Conn, method: str, path: str, body=None, token: str | None = None,
                   ctype: str = "application/json", raw: bytes | None = None) -> tuple[int, dict]:
        headers = {"zt-session": token if token is not None else self.token}
        if raw is not None:
            req = (f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: {ctype}\r\n"
                   f"zt-session: {headers['zt-session']}\r\ncontent-length: {len(raw)}\r\n\r\n").encode() + raw
        else:
            req = request(method, path, body, headers)
        status, data = await conn.call(req)
        try:
            return status, json.loads(data) if data else {}
        except ValueError:
            return status, {"raw": data.decode(errors="replace")}


async def many(target: Target, jobs, conns: int = 8) -> list:
    """Run (method, path, body) jobs over ``conns`` connections; returns the answers in order."""
    pool = [await Conn.open(target.port, tls_context()) for _ in range(conns)]
    out: list = [None] * len(jobs)
    it = iter(enumerate(jobs))

    async def worker(conn):
        for i, (method, path, body) in it:
            status, data = await target.call(conn, method, path, body)
            if status >= 300:
                raise RuntimeError(f"{target.name}: {method} {path} -> {status} {str(data)[:300]}")
            out[i] = data
    await asyncio.gather(*(worker(c) for c in pool))
    for c in pool:
        c.close()
    return out


async def seed(target: Target, n_identities: int, n_services: int, n_policies: int, tmp: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    conn = await Conn.open(target.port, tls_context())
    status, data = await target.call(conn, "POST", CLIENT + "/authenticate?method=password",
                                     {"username": "admin", "password": ADMIN_PASSWORD}, token="")
    assert status == 200, data
    target.token = data["data"]["token"]
    t0 = time.perf_counter()
    idents = await many(target, [("POST", MGMT + "/identities", {"name": f"user-{n:06d}.device", "type": "User",
                                  "isAdmin": False, "roleAttributes": [f"team-{n % 100:02d}"]})
                                 for n in range(n_identities)])
    target.ids = [d["data"]["id"] for d in idents]
    svcs = await many(target, [("POST", MGMT + "/services", {"name": f"svc-{n:05d}", "encryptionRequired": True,
                                "roleAttributes": [f"app-{n // 10:03d}", "bench"]}) for n in range(n_services)])
    target.services = [d["data"]["id"] for d in svcs]
    pols = await many(target, [("POST", MGMT + "/service-policies", {
        "name": f"sp-{n:03d}", "type": "Dial", "semantic": "AnyOf",
        "identityRoles": [f"#team-{n % 100:02d}", "#bench-user"], "serviceRoles": [f"#app-{n:03d}"],
        "postureCheckRoles": []}) for n in range(n_policies)])
    target.policies = [d["data"]["id"] for d in pols]
    seeding = time.perf_counter() - t0
    conn.close()
    conn = await Conn.open(target.port, tls_context())   # the first one sat idle: servers may have closed it
    # an edge router and its policies, so that sessions can be asked for
    await many(target, [("POST", MGMT + "/edge-routers", {"name": "er-1", "roleAttributes": ["public"],
                                                          "isTunnelerEnabled": False}),
                        ("POST", MGMT + "/edge-router-policies", {"name": "erp-all", "semantic": "AnyOf",
                         "identityRoles": ["#all"], "edgeRouterRoles": ["#public"]}),
                        ("POST", MGMT + "/service-edge-router-policies", {"name": "serp-all", "semantic": "AnyOf",
                         "serviceRoles": ["#all"], "edgeRouterRoles": ["#public"]})], conns=1)
    conn.close()
    conn = await Conn.open(target.port, tls_context())
    # the user who logs in with a password and lists services; the device with a certificate
    status, data = await target.call(conn, "POST", MGMT + "/identities", {"name": "bench-user", "type": "User",
                                     "isAdmin": False, "roleAttributes": ["bench-user"]})
    assert status == 201, data
    uid = data["data"]["id"]
    status, data = await target.call(conn, "POST", MGMT + "/authenticators", {"method": "updb", "identityId": uid,
                                     "username": "bench-user", "password": USER_PASSWORD})
    assert status == 201, data
    status, data = await target.call(conn, "POST", CLIENT + "/authenticate?method=password",
                                     {"username": "bench-user", "password": USER_PASSWORD}, token="")
    assert status == 200, data
    target.user_token = data["data"]["token"]
    status, data = await target.call(conn, "POST", MGMT + "/identities", {"name": "bench-device", "type": "Device",
                                     "isAdmin": False, "enrollment": {"ott": True}})
    assert status == 201, data
    did = data["data"]["id"]
    status, data = await target.call(conn, "GET", MGMT + f"/identities/{did}")
    ott = data["data"]["enrollment"]["ott"]["token"]
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, did)]))
           .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    status, data = await target.call(conn, "POST", f"{CLIENT}/enroll?method=ott&token={ott}", raw=csr,
                                     ctype="application/x-pem-file", token="")
    assert status == 200, (status, data)
    chain = data.get("raw") or data["data"]["cert"]
    target.cert, target.key = str(tmp / f"{target.name}.pem"), str(tmp / f"{target.name}.key")
    Path(target.cert).write_text(chain)
    Path(target.key).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
    conn.close()
    print(f"  seeded {target.name}: {n_identities:,} identities, {n_services:,} services, {n_policies} policies"
          f" in {seeding:.1f} s through the API")


def raw_request(method: str, path: str, raw: bytes, ctype: str, headers: dict | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", f"content-type: {ctype}",
             f"content-length: {len(raw)}"] + [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + raw


async def named(t: Target, collection: str, prefix: str) -> list[dict]:
    """Every entity of ``collection`` whose name starts with ``prefix``: the plain list in pages
    of 500 (a ``contains`` filter timed out on OpenZiti right after the write rounds), each page
    asked again after a 503."""
    conn = await Conn.open(t.port, tls_context())
    out: list[dict] = []
    offset = 0
    while True:
        for attempt in range(10):
            status, data = await t.call(conn, "GET", f"{MGMT}/{collection}?limit=500&offset={offset}")
            if status != 503:
                break
            await asyncio.sleep(1)
        assert status == 200, (status, str(data)[:300])
        out += [e for e in data["data"] if e["name"].startswith(prefix)]
        offset += len(data["data"])
        if len(data["data"]) < 500:
            break
    conn.close()
    return out


def _csr() -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    return (x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench-enrolled")]))
            .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))


def pool_delete(t: Target, rounds: int) -> list[list[bytes]]:
    """The policies the create rounds made, a share per round: one DELETE each."""
    ids = [e["id"] for e in asyncio.run(named(t, "service-policies", "bench-"))]
    admin = {"zt-session": t.token}
    reqs = [request("DELETE", f"{MGMT}/service-policies/{i}", headers=admin) for i in ids]
    return [reqs[r::rounds] for r in range(rounds)]


def pool_enroll(t: Target, rounds: int) -> list[list[bytes]]:
    """The identities the OTT-create rounds made (their ids kept from the answers; listing 20,000
    identities with their details took OpenZiti minutes), a share per round: one enrollment (a
    new key's CSR, made beforehand) each."""
    details = asyncio.run(many(t, [("GET", f"{MGMT}/identities/{i}", None) for i in t.ott_ids]))
    tokens = [d["data"]["enrollment"]["ott"]["token"] for d in details
              if (d["data"].get("enrollment") or {}).get("ott")]
    reqs = [raw_request("POST", f"{CLIENT}/enroll?method=ott&token={tok}", _csr(), "application/x-pem-file")
            for tok in tokens]
    return [reqs[r::rounds] for r in range(rounds)]


def operations(t: Target) -> list[tuple]:
    """(label, requests, expected status, TLS: '' or 'cert'[, pool]). Requests: a list (cycled)
    or a function of the request number; with ``pool`` (a function of the target and the number
    of rounds, run once before the first round) each round sends its share of the pool once."""
    admin = {"zt-session": t.token}
    user = {"zt-session": t.user_token}
    mid = t.ids[len(t.ids) // 2]
    needle = urllib.parse.quote('name contains "004242"')
    def sp(i: int) -> bytes:    # a new name each time
        return request("POST", MGMT + "/service-policies", {
            "name": f"bench-{i}-{time.time_ns()}", "type": "Dial", "semantic": "AnyOf",
            "identityRoles": [f"@{t.ids[i % len(t.ids)]}"], "serviceRoles": [f"@{t.services[i % len(t.services)]}"],
            "postureCheckRoles": []}, admin)
    def patch_sp(i: int) -> bytes:   # a seeded policy's identity roles: the links are worked out anew
        return request("PATCH", f"{MGMT}/service-policies/{t.policies[i % len(t.policies)]}", {
            "identityRoles": [f"#team-{(i * 7) % 100:02d}", "#bench-user"]}, admin)

    def fresh_search(i: int) -> bytes:   # a term no earlier request had: no cache answers it
        flt = urllib.parse.quote(f'name contains "004242" and name != "n-{i}-{time.time_ns()}"')
        return request("GET", MGMT + f"/identities?limit=10&filter={flt}", headers=admin)

    def ident(i: int) -> bytes:
        return request("POST", MGMT + "/identities", {"name": f"bench-id-{i}-{time.time_ns()}", "type": "Device",
                                                      "isAdmin": False, "roleAttributes": ["bench-new"]}, admin)

    def ident_ott(i: int) -> bytes:
        return request("POST", MGMT + "/identities", {"name": f"bench-ott-{i}-{time.time_ns()}", "type": "Device",
                                                      "isAdmin": False, "enrollment": {"ott": True}}, admin)
    return [
        ("point read GET /identities/{id}", [request("GET", MGMT + f"/identities/{mid}", headers=admin)], 200, ""),
        ("list page GET /identities?limit=10", [request("GET", MGMT + "/identities?limit=10", headers=admin)], 200, ""),
        ('search name contains "004242" (the same search again)',
         [request("GET", MGMT + f"/identities?limit=10&filter={needle}", headers=admin)], 200, ""),
        ('search name contains "004242" (a new search each time)', fresh_search, 200, ""),
        ("client API GET /services (bench user)", [request("GET", CLIENT + "/services?limit=100", headers=user)], 200, ""),
        ("POST /sessions (Dial)", [request("POST", CLIENT + "/sessions", {"serviceId": t.services[i], "type": "Dial"},
                                           user) for i in range(10)], 201, ""),
        ("password login", [request("POST", CLIENT + "/authenticate?method=password",
                                    {"username": "bench-user", "password": USER_PASSWORD})], 200, ""),
        ("certificate login", [request("POST", CLIENT + "/authenticate?method=cert", {})], 200, "cert"),
        ("policy create POST /service-policies", sp, 201, ""),
        ("policy update PATCH /service-policies/{id} (roles)", patch_sp, 200, ""),
        ("policy delete DELETE /service-policies/{id}", None, 200, "", pool_delete),
        ("identity create POST /identities", ident, 201, ""),
        ("identity create with an OTT enrollment", ident_ott, 201, ""),
        ("enrollment: OTT completed with a CSR (POST /enroll)", None, 200, "", pool_enroll),
    ]


async def load(t: Target, reqs, expect: int, tls: str, conns: int, seconds: float,
               once: bool = False, created: list | None = None) -> tuple[float, int, collections.Counter]:
    """``conns`` connections send until ``seconds`` passed (or, ``once``, the list is sent):
    the rate of answers with the ``expect``ed status, the count of the others, all statuses;
    the ids of the entities made go to ``created`` when given."""
    ctx = tls_context(t.cert, t.key) if tls else tls_context()
    pool = [await Conn.open(t.port, ctx) for _ in range(conns)]
    ok = bad = 0
    statuses: collections.Counter = collections.Counter()
    stop = time.perf_counter() + seconds
    counter = iter(range(10 ** 9))

    async def one(conn):
        nonlocal ok, bad
        while time.perf_counter() < stop:
            i = next(counter)
            if once and i >= len(reqs):
                return
            status, body = await conn.call(reqs(i) if callable(reqs) else reqs[i % len(reqs)])
            statuses[status] += 1
            if created is not None and status == 201:
                created.append(json.loads(body)["data"]["id"])
            if status == expect:
                ok += 1
            else:
                bad += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(one(c) for c in pool))
    elapsed = time.perf_counter() - t0
    for c in pool:
        c.close()
    return ok / elapsed, bad, statuses


OTT_CREATE = "identity create with an OTT enrollment"
OPS_WITH_POOLS = ("policy delete DELETE /service-policies/{id}", "enrollment: OTT completed with a CSR (POST /enroll)")


def start_openziti(binary: str, home: Path, port: int, log) -> subprocess.Popen:
    return subprocess.Popen([binary, "edge", "quickstart", "--home", str(home), "--ctrl-address", "127.0.0.1",
                             "--ctrl-port", str(port), "--no-router", "-u", "admin", "-p", ADMIN_PASSWORD],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=home.parent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--identities", type=int, default=10_000)
    ap.add_argument("--services", type=int, default=1_000)
    ap.add_argument("--policies", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("-c", type=int, default=16)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", help="also write the figures as rows of make bench's table (table.py)")
    a = ap.parse_args()
    binary = ziti_binary()
    if not binary:
        print("vs_openziti: no OpenZiti `ziti` binary ($ZITI_BIN, $ZITI_CLI, the interop cache or PATH):"
              " side-by-side skipped")
        return
    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-vs-openziti-"))
    lite_port, oz_port = free_port(), low_free_port()
    lite_log, oz_log = open(tmp / "ziti-lite.log", "wb"), open(tmp / "openziti.log", "wb")
    lite = start_server(tmp / "net.db", lite_port, lite_log, "--admin-password", ADMIN_PASSWORD)
    oz = start_openziti(binary, tmp / "oz-home", oz_port, oz_log)
    try:
        wait_ready(f"https://127.0.0.1:{lite_port}{CLIENT}", lite)
        try:
            wait_ready(f"https://127.0.0.1:{oz_port}{CLIENT}", oz)
        except SystemExit:
            raise SystemExit(f"the OpenZiti controller did not start: see {tmp / 'openziti.log'} (--keep)") from None
        time.sleep(2)   # the quickstart creates its admin after the API answers
        targets = [Target("ziti-lite", lite_port, lite), Target("openziti", oz_port, oz)]
        for t in targets:
            for attempt in range(30):
                try:
                    asyncio.run(seed(t, a.identities, a.services, a.policies, tmp))
                    break
                except AssertionError:
                    if attempt == 29 or t.ids:
                        raise
                    time.sleep(1)
        print(f"\nziti-lite vs OpenZiti controller ({binary}), {a.rounds} alternating rounds x {a.seconds:.0f} s,"
              f" c={a.c} keep-alive TLS connections, median req/s\n")
        print(f"{'operation':52} {'ziti-lite':>10} {'OpenZiti':>10} {'ratio':>7}   errors lite/oz")
        ops = {t.name: operations(t) for t in targets}
        rows = []
        for k in range(len(ops["ziti-lite"])):
            rates: dict[str, list[float]] = {"ziti-lite": [], "openziti": []}
            errors = {"ziti-lite": 0, "openziti": 0}
            statuses: dict[str, collections.Counter] = {"ziti-lite": collections.Counter(),
                                                        "openziti": collections.Counter()}
            label = ops["ziti-lite"][k][0]
            pools = {t.name: ops[t.name][k][4](t, a.rounds) for t in targets if len(ops[t.name][k]) > 4}
            for r in range(a.rounds):
                for t in targets:
                    _, reqs, expect, tls, *_ = ops[t.name][k]
                    once = t.name in pools
                    if once:
                        reqs = pools[t.name][r]
                        if not reqs:
                            continue
                    keep = t.ott_ids if label == OTT_CREATE else None
                    rate, bad, st = asyncio.run(load(t, reqs, expect, tls, a.c, a.seconds, once=once, created=keep))
                    rates[t.name].append(rate)
                    errors[t.name] += bad
                    statuses[t.name].update(st)
            lr = statistics.median(rates["ziti-lite"]) if rates["ziti-lite"] else 0.0
            orr = statistics.median(rates["openziti"]) if rates["openziti"] else 0.0
            n = {name: sum(c.values()) for name, c in statuses.items()}
            print(f"{label:52} {lr:10.0f} {orr:10.0f} {lr / orr if orr else float('inf'):7.2f}"
                  f"   {errors['ziti-lite']}/{errors['openziti']}"
                  f"   statuses lite {dict(statuses['ziti-lite'])} oz {dict(statuses['openziti'])}", flush=True)

            def said(name: str) -> str:
                refused = statuses[name].get(429, 0)
                other = errors[name] - refused
                text = f"{other} errors" if "login" not in label else f"{refused} x 429, {other} other errors"
                return text + (f", {n[name]} in all" if label in OPS_WITH_POOLS else "")
            rows.append(row(label, f"{lr:.0f}/s ({said('ziti-lite')})", f"OpenZiti {orr:.0f}/s ({said('openziti')})",
                            lr / orr if orr else None))
        lm, om = rss_mb(lite.pid), rss_mb(oz.pid)
        print(f"{'memory RSS now / peak (MB)':52} {lm[0]:5.0f}/{lm[1]:<4.0f} {om[0]:5.0f}/{om[1]:<4.0f} {lm[0] / om[0]:7.2f}")
        rows.append(row("memory RSS now / peak", f"{lm[0]:.0f} / {lm[1]:.0f} MB", f"OpenZiti {om[0]:.0f} / {om[1]:.0f} MB",
                        lm[0] / om[0]))
        write_rows(a.json, f"ziti-lite vs the OpenZiti controller ({a.identities:,} identities, c={a.c})", rows)
    finally:
        stop_server(lite)
        oz.send_signal(signal.SIGINT)
        try:
            oz.wait(15)
        except subprocess.TimeoutExpired:
            oz.kill()
        lite_log.close()
        oz_log.close()
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
