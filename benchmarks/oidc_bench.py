"""OIDC bearer tokens vs legacy ``zt-session`` tokens on the same request, in one process.

Creates a controller on a fresh database, logs the admin in both ways (``/authenticate`` and the
``/oidc`` code flow with PKCE), then calls ``GET /edge/client/v1/current-identity`` in alternating
rounds with each token (the ASGI app called directly, no network), and prints the CPU time per
request of each and the ratio bearer/zt-session (goal <= 1.3: the JWT signature is verified once
per token and cached; the revocation list is one indexed lookup per request).

    .venv/bin/python benchmarks/oidc_bench.py [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import secrets
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from starlette.testclient import TestClient  # noqa: E402

from ziti_lite.app import create_app  # noqa: E402
from ziti_lite.config import Settings  # noqa: E402

PASSWORD = "bench-Passw0rd"
REDIRECT = "http://127.0.0.1:1/auth/callback"


def oidc_token(c: TestClient) -> str:
    verifier = secrets.token_urlsafe(40)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    r = c.get("/oidc/authorize", params={"client_id": "openziti", "response_type": "code", "scope": "openid",
                                         "redirect_uri": REDIRECT, "code_challenge": challenge,
                                         "code_challenge_method": "S256"}, follow_redirects=False)
    req_id = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["authRequestID"][0]
    r = c.post(f"/oidc/login/password?authRequestID={req_id}", json={"username": "admin", "password": PASSWORD},
               follow_redirects=False)
    r = c.get(r.headers["location"], follow_redirects=False)
    code = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["code"][0]
    r = c.post("/oidc/oauth/token", data={"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                                          "redirect_uri": REDIRECT})
    return r.json()["access_token"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        app = create_app(Settings(db=f"{d}/bench.db", admin_user="admin", admin_password=PASSWORD))
        with TestClient(app) as c:
            legacy = c.post("/edge/client/v1/authenticate?method=password",
                            json={"username": "admin", "password": PASSWORD}).json()["data"]["token"]
            headers = {"zt-session": {"zt-session": legacy}, "bearer": {"authorization": f"Bearer {oidc_token(c)}"}}
            per: dict[str, list[float]] = {k: [] for k in headers}
            for _ in range(args.rounds):
                for kind, h in headers.items():
                    start = time.process_time()
                    for _ in range(args.requests):
                        r = c.get("/edge/client/v1/current-identity", headers=h)
                        assert r.status_code == 200, r.text
                    per[kind].append((time.process_time() - start) / args.requests * 1e6)
        app.state.controller.store.close()
    a, b = statistics.median(per["zt-session"]), statistics.median(per["bearer"])
    print(f"zt-session: {a:.0f} us CPU/request   bearer: {b:.0f} us CPU/request   ratio {b / a:.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
