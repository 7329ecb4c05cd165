"""``make fuzz``: schemathesis against ziti-lite's own served OpenAPI spec; no response may be a 5xx.

1. start ``ziti-lite serve`` on a fresh database in a temporary directory (loopback, TLS);
2. run ``schemathesis`` (``st run``) on ``GET /edge/management/v1/specs/edge-management/spec``
   and on the client API's spec (``--api`` picks one) with the ``not_a_server_error`` check and a
   bounded number of examples per operation and phase, logged in as the default admin;
3. print how many test cases ran and how many answers were 5xx, per operation, and the server's
   own log of unhandled errors.

The fuzzer calls every operation, the self-destructive ones included (disable the admin, change
its password or its auth policy, delete its session...). To keep testing as the admin, this file
is also the schemathesis hooks file (``SCHEMATHESIS_HOOKS=.../fuzz.py``): its auth provider logs in
again whenever a request answers 401, first repairing the default admin's rows straight in the
database (the repair is test-harness work, never something the server does).

    .venv/bin/python benchmarks/fuzz.py [--max-examples 25] [--phases examples,coverage,fuzzing]

schemathesis is looked up as ``$SCHEMATHESIS`` (path of ``st``), next to this Python, or on PATH.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also when schemathesis loads the hooks

from benchmarks import common  # noqa: E402

ADMIN_USER = "admin"
ADMIN_PASSWORD = "fuzz-Passw0rd"
APIS = {"management": ("/edge/management/v1", "edge-management"), "client": ("/edge/client/v1", "edge-client")}


# ====================================================================== hooks (run inside st)
def _repair(db: str, saved_path: str) -> None:
    """Put the default admin back as it was at the start: enabled, its password, the default
    auth policy, no MFA. Done through a second SQLite connection (WAL: the server sees it)."""
    with open(saved_path) as f:
        saved = json.load(f)
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        admin = saved["identity"]
        conn.execute("UPDATE identities SET disabled_at = NULL, disabled_until = NULL, failed_logins = 0,"
                     " auth_policy_id = 'default', is_admin = 1 WHERE id = ?", (admin,))
        conn.execute("UPDATE auth_policies SET primary_ = ?, secondary = ? WHERE id = 'default'",
                     (saved["primary"], saved["secondary"]))
        conn.execute("DELETE FROM mfa WHERE identity_id = ?", (admin,))
        a = saved["authenticator"]
        conn.execute("DELETE FROM authenticators WHERE identity_id = ? AND method = 'updb' AND id != ?", (admin, a["id"]))
        conn.execute("DELETE FROM authenticators WHERE username = ? AND id != ?", (a["username"], a["id"]))
        cols = ", ".join(a)
        conn.execute(f"INSERT OR REPLACE INTO authenticators ({cols}) VALUES ({', '.join('?' * len(a))})",
                     list(a.values()))
        conn.execute("COMMIT")
    finally:
        conn.close()


def _register_hooks() -> None:
    import schemathesis

    base, db, saved = os.environ["FUZZ_BASE"], os.environ["FUZZ_DB"], os.environ["FUZZ_SAVED"]

    @schemathesis.auth(refresh_interval=600)
    class AdminSession:
        """The admin's zt-session; after a 401 schemathesis asks again: repair, then log in."""

        def get(self, case, ctx):
            # a 401 may mean a disabled admin, a changed password, or a session made partial by
            # an auth policy that now wants TOTP: repair first, always
            _repair(db, saved)
            return common.login(base, ADMIN_USER, ADMIN_PASSWORD)

        def set(self, case, data, ctx):
            case.headers = case.headers or {}
            case.headers["zt-session"] = data


if __name__ != "__main__" and os.environ.get("FUZZ_BASE"):
    _register_hooks()


# ====================================================================== the driver
def main() -> None:
    import argparse
    import collections
    import shutil
    import subprocess
    import tempfile
    import time

    ap = argparse.ArgumentParser(description="schemathesis against ziti-lite's served spec")
    ap.add_argument("-n", "--max-examples", type=int, default=25, help="test cases per operation and phase")
    ap.add_argument("--phases", default="examples,coverage,fuzzing")
    ap.add_argument("--api", choices=("management", "client", "both"), default="both")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workers", default="2")
    ap.add_argument("--max-time", type=int, default=900, help="hard limit for each schemathesis run, seconds")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (database, logs, reports)")
    a = ap.parse_args()

    st = os.environ.get("SCHEMATHESIS") or str(Path(sys.executable).parent / "st")
    if not os.path.exists(st):
        st = shutil.which("st") or ""
    if not st:
        sys.exit("schemathesis not found: pip install schemathesis (make fuzz does), or set SCHEMATHESIS=/path/to/st")

    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-fuzz-"))
    db = tmp / "fuzz.db"
    port = common.free_port()
    origin = f"https://127.0.0.1:{port}"
    log = open(tmp / "server.log", "wb")
    server = common.start_server(db, port, log, "--admin-user", ADMIN_USER, "--admin-password", ADMIN_PASSWORD)
    totals = collections.Counter()
    try:
        common.wait_ready(origin, server)
        _save_admin(db, tmp / "admin.json")
        apis = ("management", "client") if a.api == "both" else (a.api,)
        for api in apis:
            prefix, spec_id = APIS[api]
            report = tmp / f"{api}.ndjson"
            env = dict(os.environ, FUZZ_BASE=origin + APIS["management"][0], FUZZ_DB=str(db),
                       FUZZ_SAVED=str(tmp / "admin.json"), SCHEMATHESIS_HOOKS=str(Path(__file__).resolve()))
            cmd = [st, "run", f"{origin}{prefix}/specs/{spec_id}/spec", "--url", origin + prefix,
                   "--tls-verify", "false", "--checks", "not_a_server_error", "--max-examples", str(a.max_examples),
                   "--phases", a.phases, "--workers", a.workers, "--report", "ndjson", "--report-ndjson-path", str(report),
                   "--request-timeout", "30", "--suppress-health-check", "all", "--warnings", "off", "--no-color"]
            if a.seed is not None:
                cmd += ["--seed", str(a.seed)]
            print(f"== {api} API: {' '.join(cmd[2:4])} ... (max {a.max_examples} examples per operation,"
                  f" phases {a.phases})", flush=True)
            t0 = time.monotonic()
            out = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=a.max_time)
            (tmp / f"{api}.out").write_text(out.stdout + out.stderr)
            stats = _summarise(report)
            took = time.monotonic() - t0
            totals.update(stats["totals"])
            print(f"   {stats['totals']['cases']} cases on {stats['totals']['operations']} operations in {took:.0f} s:"
                  f" {stats['totals']['5xx']} answered 5xx, {stats['totals']['errors']} transport errors"
                  + (f" ({stats['totals']['501']} answered 501 from operations upstream declares but does not"
                     " implement; not counted as failures)" if stats["totals"]["501"] else ""))
            print("   statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(
                stats["by_status"].items(), key=lambda kv: (kv[0] is None, kv[0] or 0))))
            for op, n in sorted(stats["5xx_by_op"].items()):
                print(f"     {'501' if op.endswith('[501]') else '5xx'}  {op.removesuffix(' [501]')}: {n}")
            summary = [ln for ln in (out.stdout + out.stderr).splitlines() if "generated" in ln or "Tested:" in ln]
            for ln in summary[-2:]:
                print("   st:", ln.strip())
            if stats["totals"]["cases"] == 0:
                print((out.stdout + out.stderr)[-3000:])
        unhandled = sum(1 for ln in (tmp / "server.log").read_text(errors="replace").splitlines()
                        if "unhandled error" in ln)
        print(f"\nfuzz total: {totals['cases']} cases, {totals['5xx']} answered 5xx (+{totals['501']} deliberate 501)"
              f" (server log: {unhandled} unhandled errors); details in {tmp if a.keep else 'a removed temp dir'}")
    finally:
        common.stop_server(server)
        log.close()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if totals["5xx"] or not totals["cases"] else 0)


def _save_admin(db, out) -> None:
    conn = sqlite3.connect(db, timeout=10)
    conn.row_factory = sqlite3.Row
    admin = conn.execute("SELECT id FROM identities WHERE is_default_admin = 1").fetchone()["id"]
    auth = dict(conn.execute("SELECT * FROM authenticators WHERE identity_id = ? AND method = 'updb'", (admin,)).fetchone())
    pol = conn.execute("SELECT primary_, secondary FROM auth_policies WHERE id = 'default'").fetchone()
    conn.close()
    with open(out, "w") as f:
        json.dump({"identity": admin, "authenticator": auth, "primary": pol["primary_"], "secondary": pol["secondary"]}, f)


def _summarise(report) -> dict:
    """Cases, 5xx answers and transport errors from schemathesis' ndjson event stream."""
    import collections
    totals = collections.Counter(cases=0, operations=0, errors=0, **{"5xx": 0, "501": 0})
    by_op = collections.Counter()
    by_status = collections.Counter()
    ops = set()
    if not os.path.exists(report):
        return {"totals": totals, "5xx_by_op": by_op, "by_status": by_status}
    with open(report) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            for kind, body in ev.items():
                if kind != "ScenarioFinished" or not isinstance(body, dict):
                    continue
                for case in _cases(body):
                    totals["cases"] += 1
                    label = case.get("label", "?")
                    ops.add(label)
                    status = case.get("status")
                    by_status[status] += 1
                    if status is None:
                        totals["errors"] += 1
                    elif status == 501:
                        totals["501"] += 1  # declared but not implemented, as upstream (not a crash)
                        by_op[f"{label} [501]"] += 1
                    elif status >= 500:
                        totals["5xx"] += 1
                        by_op[label] += 1
    totals["operations"] = len(ops)
    return {"totals": totals, "5xx_by_op": by_op, "by_status": by_status}


def _cases(scenario: dict):
    """Each recorded interaction of a finished scenario: {label, status}."""
    recorder = scenario.get("recorder") or {}
    label = recorder.get("label") or "?"  # "METHOD /path/{template}"
    for inter in (recorder.get("interactions") or {}).values():
        yield {"label": label, "status": (inter.get("response") or {}).get("status_code")}


if __name__ == "__main__":
    main()
