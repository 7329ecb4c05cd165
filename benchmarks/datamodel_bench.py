"""``make bench`` (the router data model): what streaming the model to v2.0 routers costs.

One ``ziti-lite serve`` on a database seeded with 10,000 identities (``seed.py``), 1,000 services
and 20 service policies (through the API), and ten routers that speak the v2.0 control channel
(the tests' pure-Python router: grouped hello, ``SubscribeToDataModelRequest``). Measured:

1. the full state: time from a router's subscription to the whole ``DataState`` read, and its
   bytes; the baseline is the same entities read through the management API (identities and
   services, pages of 500) in the same run;
2. one change reaching ten routers: an identity created (joining a Dial policy by its role
   attribute) until the change set that carries it has reached every router; the baseline is the
   create request's own latency.

Loopback only, stops by itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import seed as seeding  # noqa: E402
from common import free_port, median_p99, row, start_server, stop_server, wait_ready, write_rows  # noqa: E402

MGMT, CLIENT = "/edge/management/v1", "/edge/client/v1"


def main() -> None:
    ap = argparse.ArgumentParser(description="the router data model: full state and change delays")
    ap.add_argument("--identities", type=int, default=10_000)
    ap.add_argument("--services", type=int, default=1_000)
    ap.add_argument("--routers", type=int, default=10)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--json", help="write the figures as rows of make bench's table")
    a = ap.parse_args()
    import httpx

    from tests.ctrl.conftest import new_key
    from tests.ctrl.fake_router import FakeRouter
    from tests.enroll.conftest import csr
    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-rdm-bench-"))
    db = str(tmp / "rdm.db")
    seeding.seed(db, a.identities)
    port, ctrl_port = free_port(), free_port()
    log = open(tmp / "ziti-lite.log", "wb")  # noqa: SIM115 - open while the server runs
    server = start_server(db, port, log, "--host", "127.0.0.1", "--ctrl-port", str(ctrl_port), "--edge-port", "0")
    routers: list[FakeRouter] = []
    try:
        url = f"https://127.0.0.1:{port}"
        wait_ready(url, server)
        http = httpx.Client(base_url=url, verify=False, timeout=60)
        token = http.post(f"{MGMT}/authenticate?method=password", json={
            "username": seeding.ADMIN_USER, "password": seeding.ADMIN_PASSWORD}).json()["data"]["token"]
        http.headers["zt-session"] = token

        def create(collection: str, body: dict) -> str:
            r = http.post(f"{MGMT}/{collection}", json=body)
            assert r.status_code == 201, r.text
            return r.json()["data"]["id"]
        for i in range(a.services):
            create("services", {"name": f"svc-{i:05d}", "roleAttributes": [f"team-{i % 20}"],
                                "encryptionRequired": True})
        for i in range(20):
            create("service-policies", {"name": f"dial-{i}", "type": "Dial" if i % 2 else "Bind",
                                        "semantic": "AnyOf", "identityRoles": [f"#{seeding.ATTRS[i]}"],
                                        "serviceRoles": [f"#team-{i}"]})
        bundle = _ca_bundle(url)
        enrolled = []
        for i in range(a.routers):
            rid = create("edge-routers", {"name": f"rdm-router-{i}", "roleAttributes": ["public"]})
            ott = http.get(f"{MGMT}/edge-routers/{rid}").json()["data"]["enrollmentToken"]
            key = new_key()
            r = http.post(f"{CLIENT}/enroll/erott?token={ott}", json={"certCsr": csr(key, rid),
                                                                      "serverCertCsr": csr(new_key(), rid)})
            assert r.status_code == 200, r.text
            enrolled.append((rid, r.json()["data"]["cert"], key))

        # 1. the full state
        full_s, sizes = [], []
        for i, (rid, cert, key) in enumerate(enrolled):
            fr = FakeRouter.connect(ctrl_port, cert, key, bundle)
            routers.append(fr)
            fr.hello_v2(rid)
            t0 = time.monotonic()
            fr.subscribe(f"bench-{i}")
            state = fr.expect(20500, timeout=60)
            full_s.append(state.received - t0)
            sizes.append(len(state.body))
            fr.client_hello("127.0.0.1", 4000 + i)
        t0 = time.monotonic()
        for collection in ("identities", "services"):
            offset = 0
            while True:
                page = http.get(f"{MGMT}/{collection}?limit=500&offset={offset}").json()
                offset += 500
                if offset >= page["meta"]["pagination"]["totalCount"]:
                    break
        api_s = time.monotonic() - t0

        # 2. one change reaching every router
        delays, posts = [], []
        for i in range(a.changes):
            t0 = time.monotonic()
            new = create("identities", {"name": f"rdm-change-{i}", "type": "Device", "isAdmin": False,
                                        "roleAttributes": [seeding.ATTRS[1]]})
            posts.append(time.monotonic() - t0)
            arrivals = [fr.expect(20501, timeout=10, where=lambda m, new=new: new.encode() in m.body).received
                        for fr in routers]
            delays.append(max(arrivals) - t0)
            time.sleep(0.05)
        full_med = statistics.median(full_s)
        d50, d99 = median_p99(delays)
        p50, _ = median_p99(posts)
        print(f"router data model: {a.identities} identities, {a.services} services, 20 policies; "
              f"{a.routers} v2 routers (the tests' pure-Python router); {os.cpu_count()} CPUs\n")
        print("| measured | ziti-lite | baseline (same run) | ratio |\n|---|---|---|---|")
        print(f"| full state: subscription to DataState read (median of {a.routers}) | {full_med * 1000:.0f} ms,"
              f" {statistics.median(sizes) / 1e6:.2f} MB | reading the same entities through the API "
              f"(pages of 500): {api_s * 1000:.0f} ms | {full_med / api_s:.2f} |")
        print(f"| one change reaching all {a.routers} routers, p50 / p99 of {a.changes} | {d50 * 1000:.0f} ms /"
              f" {d99 * 1000:.0f} ms | the create request itself, p50: {p50 * 1000:.1f} ms | {d50 / p50:.1f} |")
        write_rows(a.json, "router data model", [
            row("RDM full state (10k identities, 1k services)", f"{full_med * 1000:.0f} ms, "
                f"{statistics.median(sizes) / 1e6:.2f} MB", f"API read {api_s * 1000:.0f} ms", full_med / api_s),
            row(f"RDM change to {a.routers} routers p50/p99", f"{d50 * 1000:.0f}/{d99 * 1000:.0f} ms",
                f"create {p50 * 1000:.1f} ms", d50 / p50, "< 1 s", d99 < 1.0)])
    finally:
        for fr in routers:
            fr.close()
        stop_server(server)
        log.close()


def _ca_bundle(url: str) -> str:
    """The controller's CA bundle (``/.well-known/est/cacerts``, PKCS#7) as PEM text."""
    import base64
    import ssl
    import urllib.request

    from cryptography.hazmat.primitives.serialization import Encoding, pkcs7
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(url + "/.well-known/est/cacerts", context=ctx, timeout=10) as r:
        der = base64.b64decode(r.read())
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in pkcs7.load_der_pkcs7_certificates(der))


if __name__ == "__main__":
    main()
