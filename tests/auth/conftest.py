"""Helpers for the second-factor and auth-policy tests: users with passwords, auth policies
made through the API, and TOTP codes computed on the controller's (movable) clock."""

from __future__ import annotations

import base64
import copy
import urllib.parse

import pyotp
import pytest

from tests.conftest import CLIENT, MGMT, Api
from ziti_lite import clock

PASSWORD = "Secret-Passw0rd"

DEFAULT_POLICY = {
    "primary": {
        "cert": {"allowed": True, "allowExpiredCerts": True},
        "extJwt": {"allowed": True, "allowedSigners": []},
        "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 0, "minPasswordLength": 5,
                 "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False},
    },
    "secondary": {"requireTotp": False},
}


def merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in changes.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


class Net:
    """Builds users and policies through the management API as the admin."""

    def __init__(self, admin: Api):
        self.admin = admin
        self.client = admin.client
        self.n = 0

    def policy(self, **changes) -> str:
        self.n += 1
        body = merge({"name": f"policy-{self.n}", **DEFAULT_POLICY}, changes)
        return self.admin.create("auth-policies", body)

    def identity(self, name: str | None = None, policy: str | None = None, external_id: str | None = None) -> str:
        self.n += 1
        body = {"name": name or f"user-{self.n}", "type": "User", "isAdmin": False}
        if policy:
            body["authPolicyId"] = policy
        if external_id:
            body["externalId"] = external_id
        return self.admin.create("identities", body)

    def user(self, name: str | None = None, policy: str | None = None, password: str = PASSWORD) -> tuple[str, str]:
        """An identity with a password authenticator: (identity id, username)."""
        ident = self.identity(name, policy)
        username = f"login-{ident}"
        self.admin.create("authenticators", {"method": "updb", "identityId": ident, "username": username,
                                             "password": password})
        return ident, username

    def authenticate(self, username: str, password: str = PASSWORD, prefix: str = CLIENT):
        return self.client.post(prefix + "/authenticate?method=password",
                                json={"username": username, "password": password})

    def login(self, username: str, password: str = PASSWORD, prefix: str = CLIENT) -> Api:
        r = self.authenticate(username, password, prefix)
        assert r.status_code == 200, r.text
        return Api(self.client, prefix, r.json()["data"]["token"])


@pytest.fixture
def net(admin) -> Net:
    return Net(admin)


def secret_of(detail: dict) -> str:
    """The TOTP secret from an unverified MFA detail's provisioning URL."""
    query = urllib.parse.urlparse(detail["provisioningUrl"]).query
    return urllib.parse.parse_qs(query)["secret"][0]


def authenticator(secret: str) -> pyotp.TOTP:
    """A stock pyotp TOTP (SHA1, 6 digits, 30 s) computing the codes of ``secret``.

    The controller's secrets are upstream's 80 bits, which pyotp >= 2.10 refuses (it wants 112).
    HMAC zero-pads keys shorter than its block, so the same key with four zero bytes appended
    is the same HMAC key: the codes are exactly those an authenticator app shows for ``secret``.
    """
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    return pyotp.TOTP(base64.b32encode(key + bytes(max(0, 14 - len(key)))).decode())


def code(secret: str, steps: int = 0) -> str:
    """The TOTP code of ``secret`` on the controller clock, ``steps`` periods away."""
    return authenticator(secret).at(clock.now(), counter_offset=steps)


def enroll_totp(api: Api) -> tuple[str, list[str]]:
    """POST + verify a TOTP enrollment for the caller: (secret, recovery codes)."""
    r = api.post("/current-identity/mfa")
    assert r.status_code == 201, r.text
    detail = api.get("/current-identity/mfa").json()["data"]
    secret = secret_of(detail)
    r = api.post("/current-identity/mfa/verify", json={"code": code(secret)})
    assert r.status_code == 200, r.text
    return secret, detail["recoveryCodes"]


__all__ = ["CLIENT", "MGMT", "PASSWORD", "Net", "code", "enroll_totp", "secret_of"]


# the certificate-capable TestClient and its admin, for the method=cert tests (test_certs.py)
from tests.enroll.conftest import cadmin, certs, keys  # noqa: E402,F401
