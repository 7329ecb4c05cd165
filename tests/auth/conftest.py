"""Helpers for the second-factor and auth-policy tests: the tests' builder (users with passwords,
auth policies; ``tests/builders.py``) as ``net``, and TOTP codes computed on the controller's
(movable) clock."""

from __future__ import annotations

import base64
import urllib.parse

import pyotp
import pytest

from tests.builders import PASSWORD, Net
from tests.conftest import CLIENT, MGMT, Api
from ziti_lite import clock


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
