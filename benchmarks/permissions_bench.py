"""The cost of OpenZiti 2.0's permission check (issue 34) on a point read and a list page.

In process, requests straight into the ASGI app (no HTTP, no TLS: what is measured is the
controller's own work, where the check's share is largest), on a fresh database of 1,000
identities. The same identity reads the same routes two ways, interleaved round by round:

* with the check: it is no admin and holds ``identity.read`` (``permissions.allows`` decides);
* without it: it is an admin (``isAdmin``), which ``Controller.authorize`` lets through before
  any permission is looked at: the path every request took before issue 34.

Prints the median per request of each over the rounds and the ratio (goal: under 5 %).

    .venv/bin/python benchmarks/permissions_bench.py [--rounds 30] [--calls 200] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", category=DeprecationWarning)

from benchmarks.common import row, write_rows  # noqa: E402
from ziti_lite import permissions  # noqa: E402
from ziti_lite.app import create_app  # noqa: E402
from ziti_lite.config import Settings  # noqa: E402
from ziti_lite.exchange import asgi_request  # noqa: E402

MGMT = "/edge/management/v1"
PASSWORD = "bench-Passw0rd"


async def call(app, method: str, path: str, token: str | None, body: bytes = b"") -> tuple[int, bytes]:
    return await asgi_request(app, method, path, token, body)


async def run(app, rounds: int, calls: int) -> dict[str, dict[str, list[float]]]:
    async def ok(method, path, token, doc=None):
        status, text = await call(app, method, MGMT + path, token, json.dumps(doc).encode() if doc else b"")
        assert status in (200, 201), (path, status, text)
        return json.loads(text)

    admin = (await ok("POST", "/authenticate?method=password", None,
                      {"username": "admin", "password": PASSWORD}))["data"]["token"]
    for i in range(1000):
        await ok("POST", "/identities", admin, {"name": f"bench-{i:04d}", "type": "User", "isAdmin": False,
                                                 "roleAttributes": ["bench"]})
    reader = (await ok("POST", "/identities", admin, {"name": "reader", "type": "User", "isAdmin": False}))["data"]["id"]
    await ok("POST", "/authenticators", admin, {"method": "updb", "identityId": reader, "username": "reader",
                                                 "password": PASSWORD})
    token = (await ok("POST", "/authenticate?method=password", None,
                      {"username": "reader", "password": PASSWORD}))["data"]["token"]
    target = (await ok("GET", '/identities?filter=name="bench-0500"', admin))["data"][0]["id"]
    paths = {"point read": f"/identities/{target}", "list page (10)": "/identities?limit=10&offset=500"}
    modes = {"with the check": {"permissions": ["identity.read"], "isAdmin": False},
             "without (admin)": {"permissions": [], "isAdmin": True}}
    out: dict[str, dict[str, list[float]]] = {p: {m: [] for m in modes} for p in paths}
    for r in range(rounds):
        order = list(modes.items())
        for mode, change in (order if r % 2 == 0 else order[::-1]):   # alternate: no order bias
            await ok("PATCH", f"/identities/{reader}", admin, change)
            for name, path in paths.items():
                await ok("GET", path, token)   # warm: the session row after the change
                start = time.perf_counter()
                for _ in range(calls):
                    await call(app, "GET", MGMT + path, token)
                out[name][mode].append((time.perf_counter() - start) / calls)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", default=None, help="write the figures as rows of make bench's table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(db=f"{tmp}/bench.db", admin_password=PASSWORD, edge_port=0))
        loop = asyncio.new_event_loop()
        try:
            results = loop.run_until_complete(run(app, args.rounds, args.calls))
        finally:
            loop.close()
            app.state.controller.store.close()
    rows = []
    print(f"permission check, {args.rounds} rounds x {args.calls} requests, median µs per request")
    for name, modes in results.items():
        with_check = statistics.median(modes["with the check"]) * 1e6
        without = statistics.median(modes["without (admin)"]) * 1e6
        ratio = with_check / without
        print(f"  {name:16} with the check {with_check:7.1f} µs   without {without:7.1f} µs   ratio {ratio:.3f}")
        rows.append(row(f"permission check: {name}", f"{with_check:.1f} µs", f"{without:.1f} µs", ratio,
                        "< 1.05", ratio < 1.05))
    # the check alone, as authorize makes it for an allowed non-admin: its share of a request
    held, need = frozenset({"identity.read"}), ("identity", "read")
    n = 1_000_000
    start = time.perf_counter()
    for _ in range(n):
        permissions.allows(False, held, need)
    alone = (time.perf_counter() - start) / n * 1e6
    print(f"  the rule alone (permissions.allows, allowed by the action permission): {alone:.2f} µs")
    rows.append(row("permission check: the rule alone", f"{alone:.2f} µs"))
    write_rows(args.json, "permissions", rows)


if __name__ == "__main__":
    main()
