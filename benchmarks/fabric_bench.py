"""Fabric API benchmark: lists of the control channel's live circuits (``/fabric/v1/circuits``,
filtered and paged over an in-memory table through SQLite's ``json_each``) against the same list
of a stored collection (``/fabric/v1/services``, an indexed table) as the baseline, in one run.

In process (Starlette's test client, no TLS), on a fresh database: 100, 1,000 and 10,000 live
circuits (``ziti_lite.ctrl.circuits.Circuit`` records in a stand-in for the control channel's
server), each list called 200 times; prints the mean per request and the ratio to the baseline.

    .venv/bin/python benchmarks/fabric_bench.py [--calls 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", category=DeprecationWarning)

from starlette.testclient import TestClient  # noqa: E402

from ziti_lite.app import create_app  # noqa: E402
from ziti_lite.config import Settings  # noqa: E402
from ziti_lite.ctrl.circuits import Circuit  # noqa: E402

MGMT = "/edge/management/v1"
PASSWORD = "bench-Passw0rd"


def mean_ms(client: TestClient, path: str, headers: dict, calls: int) -> float:
    assert client.get(path, headers=headers).status_code == 200
    start = time.perf_counter()
    for _ in range(calls):
        client.get(path, headers=headers)
    return (time.perf_counter() - start) / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    app = create_app(Settings(db=os.path.join(tempfile.mkdtemp(), "bench.db"), admin_password=PASSWORD))
    ctl = app.state.controller
    with TestClient(app) as c:
        token = c.post(f"{MGMT}/authenticate?method=password",
                       json={"username": "admin", "password": PASSWORD}).json()["data"]["token"]
        h = {"zt-session": token}
        rid = c.post(f"{MGMT}/edge-routers", json={"name": "r"}, headers=h).json()["data"]["id"]
        svc = c.post(f"{MGMT}/services", json={"name": "s", "encryptionRequired": True}, headers=h).json()["data"]["id"]
        print(f"{'circuits':>9}  {'request':<56} {'ms':>7}  vs baseline")
        try:
            for n in (100, 1000, 10000):
                now = time.time()
                live = {f"c{i:05d}": Circuit(f"c{i:05d}", [rid], [], "s", svc, "t", "i", "e", f"client-{i}", {}, now)
                        for i in range(n)}
                ctl.ctrl_server = SimpleNamespace(routers={}, links=SimpleNamespace(table={}),  # type: ignore
                                                  circuits=SimpleNamespace(live=live))
                base = mean_ms(c, "/fabric/v1/services", h, args.calls)
                print(f"{n:>9}  {'/fabric/v1/services (baseline)':<56} {base:7.2f}  1.00")
                for path in ("/fabric/v1/circuits", '/fabric/v1/circuits?filter=clientId="client-5"',
                             "/fabric/v1/circuits?filter=true sort by createdAt desc"):
                    t = mean_ms(c, path, h, args.calls)
                    print(f"{n:>9}  {path:<56} {t:7.2f}  {t / base:.2f}")
        finally:
            ctl.ctrl_server = None


if __name__ == "__main__":
    main()
