"""Writes ``net-v<N>.db.gz`` beside this script: a populated controller database of each earlier
schema version, which ``tests/db/test_store_migrations.py`` migrates and compares with a fresh one.

``schema-v<N>.sql`` is ``schema.sql`` as ziti-lite released it at version N (version 1: the
schema before the search indexes, commit d84a799). The network is made through today's API, in
process (identities enrolled with certificates, an MFA-less admin, services, configs, policies
of every kind, posture checks, an edge router, a CA), and its rows are copied into a file made
from the old schema, so the fixture is what a controller of that version held: the same tables,
the same rows, and that version's ``user_version``.

Run it again when a migration adds a schema version (the previous version's schema.sql goes
into ``schema-v<N>.sql`` first), naming the new version (no version: all of them)::

    python tests/data/make_schema_fixtures.py 2
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile
from pathlib import Path

import apsw

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from ziti_lite.app import create_app  # noqa: E402
from ziti_lite.config import Settings  # noqa: E402
from ziti_lite.pki.csr import build_csr  # noqa: E402

MGMT = "/edge/management/v1"
PASSWORD = "fixture-Passw0rd"


def populate(path: str) -> None:
    app = create_app(Settings(db=path, admin_user="admin", admin_password=PASSWORD))
    with TestClient(app) as client:
        r = client.post(MGMT + "/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
        h = {"zt-session": r.json()["data"]["token"]}

        def create(collection: str, body: dict) -> str:
            r = client.post(f"{MGMT}/{collection}", json=body, headers=h)
            assert r.status_code == 201, r.text
            return r.json()["data"]["id"]

        ct = client.get(MGMT + "/config-types?filter=name=\"intercept.v1\"", headers=h).json()["data"][0]["id"]
        cfg = create("configs", {"name": "web-intercept", "configTypeId": ct,
                                 "data": {"protocols": ["tcp"], "addresses": ["web.ziti"],
                                          "portRanges": [{"low": 80, "high": 80}]}})
        for name in ("web", "db", "payroll-eu"):
            create("services", {"name": name, "encryptionRequired": True, "roleAttributes": [name],
                                "configs": [cfg] if name == "web" else []})
        create("service-policies", {"name": "web-dial", "type": "Dial", "semantic": "AnyOf",
                                    "identityRoles": ["#staff"], "serviceRoles": ["#web"]})
        create("service-policies", {"name": "db-bind", "type": "Bind", "semantic": "AllOf",
                                    "identityRoles": ["#servers"], "serviceRoles": ["#db"]})
        create("edge-routers", {"name": "branch-router", "roleAttributes": ["branch"]})
        create("edge-router-policies", {"name": "staff-branch", "semantic": "AnyOf", "identityRoles": ["#staff"],
                                        "edgeRouterRoles": ["#branch"]})
        create("service-edge-router-policies", {"name": "web-branch", "semantic": "AnyOf", "serviceRoles": ["#web"],
                                                "edgeRouterRoles": ["#branch"]})
        create("posture-checks", {"name": "mac-ok", "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"],
                                  "roleAttributes": ["web"]})
        create("auth-policies", {"name": "certs-only", "primary": {
            "cert": {"allowed": True, "allowExpiredCerts": False},
            "extJwt": {"allowed": False, "allowedSigners": []},
            "updb": {"allowed": False, "lockoutDurationMinutes": 0, "maxAttempts": 5, "minPasswordLength": 5,
                     "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False}},
            "secondary": {"requireTotp": False}})
        for n, role in enumerate(("staff", "staff", "servers", "staff")):
            iid = create("identities", {"name": f"user-{n}", "type": "Device", "isAdmin": False,
                                        "roleAttributes": [role], "enrollment": {"ott": True}})
            if n < 3:   # enrolled: a certificate authenticator; the last keeps its enrollment
                token = client.get(f"{MGMT}/identities/{iid}", headers=h).json()["data"]["enrollment"]["ott"]["token"]
                key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption()).decode()
                r = client.post(f"/enroll?method=ott&token={token}", content=build_csr(iid, key_pem=key)[0],
                                headers={"content-type": "application/x-pem-file"})
                assert r.status_code == 200, r.text
        create("identities", {"name": "password-user", "type": "User", "isAdmin": False,
                              "enrollment": {"updb": "password-user"}})
    app.state.controller.store.close()


def make(version: int) -> Path:
    out = HERE / f"net-v{version}.db"
    schema = (HERE / f"schema-v{version}.sql").read_text()
    with tempfile.TemporaryDirectory() as d:
        current = os.path.join(d, "current.db")
        populate(current)
        if out.exists():
            out.unlink()
        conn = apsw.Connection(str(out))
        conn.execute("PRAGMA foreign_keys = OFF")
        with conn:
            conn.execute(schema)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("ATTACH ? AS cur", (current,))
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
            for t in tables:
                if "_search" in t:   # full-text indexes: their triggers fill them as the rows arrive
                    continue
                cols = ", ".join(f'"{r[1]}"' for r in conn.execute(f'PRAGMA main.table_info("{t}")'))
                conn.execute(f'INSERT INTO main."{t}" ({cols}) SELECT {cols} FROM cur."{t}"')
        conn.execute("DETACH cur")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("VACUUM")
        conn.close()
    packed = out.with_name(out.name + ".gz")
    with open(out, "rb") as raw, gzip.GzipFile(packed, "wb", compresslevel=9, mtime=0) as gz:
        gz.write(raw.read())
    out.unlink()
    return packed


if __name__ == "__main__":
    wanted = [int(v) for v in sys.argv[1:]]   # versions to write (default: every schema-v<N>.sql)
    for v in sorted(int(p.stem.removeprefix("schema-v")) for p in HERE.glob("schema-v*.sql")):
        if wanted and v not in wanted:
            continue
        made = make(v)
        print(f"{made}: {made.stat().st_size} bytes")
