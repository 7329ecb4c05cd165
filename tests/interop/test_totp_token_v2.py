"""``POST /current-api-session/totp-token`` against ziti-lite and the real v2.0.3 controller
(``ziti edge quickstart``): the same script (an OIDC login of a password identity, a TOTP code
before MFA enrollment, while it is unverified, a wrong one, none, on a legacy session, on both
APIs) gives the same statuses, error codes, envelope and token claims.

The binary is found as ``make interop`` finds it (``$ZITI_CLI_V2_0_3`` or the cache); skipped,
saying why, where none is at hand."""

from __future__ import annotations

import base64
import hashlib
import secrets
import urllib.parse

import httpx
import jwt
import pytest

from tests.auth.conftest import authenticator
from tests.interop.conftest import start_quickstart
from tests.interop.test_ziti_cli_v2 import V2, _admin_password, _copy
from ziti_lite import testing

pytestmark = pytest.mark.interop
REDIRECT = "http://127.0.0.1:20202/auth/callback"
CLIENT, MGMT = "/edge/client/v1", "/edge/management/v1"
PASSWORD = "Passw0rd-totp"


def _oidc_tokens(c: httpx.Client, username: str, password: str) -> dict:
    """The authorization-code flow with PKCE, as the SDKs drive it."""
    verifier = secrets.token_urlsafe(40)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    q = {"client_id": "openziti", "response_type": "code", "scope": "openid offline_access", "state": "s",
         "redirect_uri": REDIRECT, "code_challenge": challenge, "code_challenge_method": "S256"}
    r = c.get("/oidc/authorize?" + urllib.parse.urlencode(q))
    assert r.status_code in (302, 303), r.text
    req_id = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["authRequestID"][0]
    r = c.post(f"/oidc/login/password?authRequestID={req_id}", json={"username": username, "password": password},
               headers={"accept": "application/json"})
    while r.status_code in (302, 303) and not r.headers["location"].startswith(REDIRECT):
        r = c.get(r.headers["location"])
    assert r.status_code in (302, 303), r.text
    code = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["code"][0]
    r = c.post("/oidc/oauth/token", data={"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                                          "redirect_uri": REDIRECT, "client_id": "openziti"})
    assert r.status_code == 200, r.text
    return r.json()


def _shape(r: httpx.Response) -> tuple:
    body = r.json()
    if "error" in body:
        return r.status_code, body["error"]["code"]
    token = jwt.decode(body["data"]["token"], options={"verify_signature": False})
    return r.status_code, sorted(body["data"]), body["meta"], sorted(token), token["z_t"]


def script(url: str, admin_user: str, admin_password: str) -> list[tuple]:
    with httpx.Client(base_url=url, verify=False, timeout=30) as c:  # noqa: S501 - loopback, fresh PKI
        r = c.post(MGMT + "/authenticate?method=password", json={"username": admin_user, "password": admin_password})
        admin = {"zt-session": r.json()["data"]["token"]}
        r = c.post(MGMT + "/identities", json={"name": "totp-token-user", "type": "User", "isAdmin": False},
                   headers=admin)
        ident = r.json()["data"]["id"]
        r = c.post(MGMT + "/authenticators", headers=admin, json={"method": "updb", "identityId": ident,
                                                                  "username": "totp-token-user", "password": PASSWORD})
        assert r.status_code == 201, r.text
        tokens = _oidc_tokens(c, "totp-token-user", PASSWORD)
        bearer = {"authorization": "Bearer " + tokens["access_token"]}
        out = [("not enrolled", _shape(c.post(CLIENT + "/current-api-session/totp-token", json={"code": "123456"},
                                                headers=bearer)))]
        assert c.post(CLIENT + "/current-identity/mfa", headers=bearer).status_code == 201
        detail = c.get(CLIENT + "/current-identity/mfa", headers=bearer).json()["data"]
        secret = urllib.parse.parse_qs(urllib.parse.urlparse(detail["provisioningUrl"]).query)["secret"][0]
        totp = authenticator(secret)   # pyotp, padded: upstream's secrets are 80 bits
        for api in (CLIENT, MGMT):
            path = api + "/current-api-session/totp-token"
            out.append((api, "unverified", _shape(c.post(path, json={"code": totp.now()}, headers=bearer))))
            wrong = f"{(int(totp.now()) + 500000) % 1000000:06d}"
            out.append((api, "wrong", _shape(c.post(path, json={"code": wrong}, headers=bearer))))
            out.append((api, "no code", _shape(c.post(path, json={}, headers=bearer))))
            r = c.post(api + "/authenticate?method=password", json={"username": "totp-token-user",
                                                                    "password": PASSWORD})
            legacy = {"zt-session": r.json()["data"]["token"]}
            out.append((api, "legacy", _shape(c.post(path, json={"code": totp.now()}, headers=legacy))))
        return out


def test_totp_tokens_answer_as_upstream(ziti2, template_db, tmp_path):
    ctl = testing.start(_copy(template_db, tmp_path / "totp-token.db"), _admin_password())
    try:
        ours = script(ctl.url, "admin", _admin_password())
    finally:
        ctl.stop()
    assert ours[1][2][0] == 200, ours
    real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
    try:
        theirs = script(real.url, real.admin_user, real.admin_password)
    finally:
        real.stop()
    assert ours == theirs, list(zip(ours, theirs, strict=True))
