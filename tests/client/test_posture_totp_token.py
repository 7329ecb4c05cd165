"""TOTP tokens (``POST /current-api-session/totp-token``, OpenZiti 2.0): an OIDC session of an
MFA-enrolled identity turns a TOTP code into upstream's token, which renews the session's MFA
pass for the MFA posture checks; refusals as v2.0.3's (no MFA, a wrong code, a legacy session)."""

from __future__ import annotations

import datetime as dt
import secrets

import jwt
import pytest
from cryptography import x509

from tests.auth.conftest import code, secret_of
from tests.client.test_posture import _dial, _guard_web
from tests.conftest import CLIENT, MGMT, Api, assert_error
from tests.oidc.test_provider import bearer, login, start
from tests.oidc.test_provider_steps import finish
from ziti_lite import clock
from ziti_lite.policy import session_posture

PATH = "/current-api-session/totp-token"


def oidc_login(client, who: tuple, secret: str | None = None) -> dict:
    """The token answer of an OIDC login of ``who`` (id, username, password), giving the TOTP
    code of ``secret`` when the login asks for one."""
    verifier = secrets.token_urlsafe(40)
    req_id = start(client, verifier)
    r = login(client, req_id, username=who[1], password=who[2])
    if r.status_code == 200:
        assert r.headers["totp-required"] == "true" and secret
        (query,) = r.json()["authQueries"]
        assert query["typeId"] == "TOTP" and query["isTotpEnrolled"] is True
        r = client.post("/oidc/login/totp", json={"id": req_id, "code": code(secret)}, follow_redirects=False)
    assert r.status_code == 302, r.text
    return finish(client, r.headers["location"], verifier)


class BearerApi(Api):
    """An ``Api`` whose requests carry an OIDC access token instead of a zt-session."""

    def __init__(self, client, access_token: str, prefix: str = CLIENT):
        super().__init__(client, prefix)
        self.access_token = access_token

    def request(self, method, path, headers=None, **kw):
        return super().request(method, path, headers={**bearer(self.access_token), **(headers or {})}, **kw)


def post(client, prefix: str, tokens: dict, body) -> object:
    return client.post(prefix + PATH, json=body, headers=bearer(tokens["access_token"]))


def enroll(client, tokens: dict, verify: bool = True) -> str:
    h = bearer(tokens["access_token"])
    assert client.post(CLIENT + "/current-identity/mfa", headers=h).status_code == 201
    secret = secret_of(client.get(CLIENT + "/current-identity/mfa", headers=h).json()["data"])
    if verify:
        r = client.post(CLIENT + "/current-identity/mfa/verify", json={"code": code(secret)}, headers=h)
        assert r.status_code == 200, r.text
    return secret


@pytest.mark.parametrize("prefix", [CLIENT, MGMT])
def test_a_totp_code_becomes_upstreams_token(net, ctl, prefix):
    client = net.client
    tokens = oidc_login(client, net.alice)
    assert_error(post(client, prefix, tokens, {"code": "123456"}), 409, "MFA_NOT_ENROLLED")
    secret = enroll(client, tokens, verify=False)
    # still unverified: a good code gets a token, as v2.0.3's
    r = post(client, prefix, tokens, {"code": code(secret)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"] is None and set(body["data"]) == {"token", "issuedAt"}
    access = jwt.decode(tokens["access_token"], options={"verify_signature": False})
    server = x509.load_pem_x509_certificate(ctl.state["server_cert"].encode())
    claims = jwt.decode(body["data"]["token"], server.public_key(), algorithms=["ES256", "RS256"],
                        audience=access["aud"])
    assert claims["z_t"] == "t" and claims["z_asid"] == access["z_asid"] and claims["sub"] == access["sub"]
    assert claims["iss"] == access["iss"] and claims["jti"] and "exp" not in claims
    assert clock.parse(body["data"]["issuedAt"]) - dt.datetime.fromtimestamp(claims["iat"], dt.UTC) < dt.timedelta(1)
    assert_error(post(client, prefix, tokens, {"code": "000000" if code(secret) != "000000" else "111111"}),
                 400, "MFA_INVALID_TOKEN")
    assert_error(post(client, prefix, tokens, {}), 400, "COULD_NOT_VALIDATE")
    recovery = client.get(CLIENT + "/current-identity/mfa", headers=bearer(tokens["access_token"]))
    assert_error(post(client, prefix, tokens, {"code": recovery.json()["data"]["recoveryCodes"][0]}),
                 400, "MFA_INVALID_TOKEN")          # TOTP codes only, no recovery code


def test_legacy_sessions_and_strangers_get_no_token(net):
    client = net.client
    tokens = oidc_login(client, net.bob)
    secret = enroll(client, tokens)
    legacy = client.post(CLIENT + "/authenticate?method=password", json={"username": net.bob[1],
                                                                         "password": net.bob[2]})
    token = legacy.json()["data"]["token"]
    (query,) = legacy.json()["data"]["authQueries"]     # the legacy query: typeId MFA, no isTotpEnrolled
    assert query["typeId"] == "MFA" and "isTotpEnrolled" not in query
    assert client.post(CLIENT + "/authenticate/mfa", json={"code": code(secret)},
                       headers={"zt-session": token}).status_code == 200
    for prefix in (CLIENT, MGMT):
        assert_error(client.post(prefix + PATH, json={"code": code(secret)}, headers={"zt-session": token}),
                     400, "INVALID_BACKING_TOKEN_TYPE")
        assert_error(client.post(prefix + PATH, json={"code": code(secret)}), 401, "UNAUTHORIZED")


def test_the_token_renews_the_mfa_pass_of_an_mfa_posture_check(net, ctl):
    """An OIDC login with TOTP passes the check; once its timeout ran out the session is refused
    until a TOTP token is taken (what the Go SDK does when the check's timeout nears)."""
    _guard_web(net, {"name": "mfa-token", "typeId": "MFA", "timeoutSeconds": 120})
    client = net.client
    first = oidc_login(client, net.alice)
    secret = enroll(client, first)
    tokens = oidc_login(client, net.alice, secret)
    amr = jwt.decode(tokens["access_token"], options={"verify_signature": False})["amr"]
    assert sorted(amr) == ["password", "totp"]
    alice = BearerApi(client, tokens["access_token"])
    h = bearer(tokens["access_token"])
    assert client.post(CLIENT + "/sessions", json={"serviceId": net.web, "type": "Dial"}, headers=h).status_code == 201
    clock.advance(121)
    assert session_posture.revoke_failing(ctl) == 1      # what the periodic sweep does
    assert_error(client.post(CLIENT + "/sessions", json={"serviceId": net.web, "type": "Dial"}, headers=h),
                 409, "INVALID_POSTURE")
    q = client.get(f"{CLIENT}/services/{net.web}", headers=h).json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["isPassing"] is False
    r = client.post(CLIENT + PATH, json={"code": code(secret)}, headers=h)
    assert r.status_code == 200, r.text
    q = client.get(f"{CLIENT}/services/{net.web}", headers=h).json()["data"]["postureQueries"][0]["postureQueries"][0]
    assert q["isPassing"] is True and q["timeoutRemaining"] > 100
    assert _dial(alice, net.web).status_code == 201
    # the login's own state is as it was: the token is no login step
    current = client.get(CLIENT + "/current-api-session", headers=h).json()["data"]
    assert current["isMfaRequired"] is True and current["isMfaComplete"] is True
