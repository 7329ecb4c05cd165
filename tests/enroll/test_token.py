"""Enrollment from an identity provider: ``POST /enroll/token`` with a JWT of an external JWT
signer (api-v2.md §5). The issuer is the tests' own: an RSA key whose certificate is the signer's
``certPem`` (a JWKS endpoint on loopback in the slow test at the end)."""

from __future__ import annotations

import pytest
from cryptography import x509

from tests.auth.test_extjwt import AUDIENCE, ISSUER, JwksServer, Keys, claims, ext_login, fp_kid, jwk, pem, sign
from tests.conftest import CLIENT, assert_error
from tests.enroll.conftest import csr
from ziti_lite import clock

ENROLL = CLIENT + "/enroll/token"


def signer_body(**extra) -> dict:
    body = {"name": "idp", "enabled": True, "issuer": ISSUER, "audience": AUDIENCE, "certPem": pem(Keys.cert),
            "useExternalId": True, "enrollToCertEnabled": True, "enrollToTokenEnabled": True,
            "enrollNameClaimsSelector": "/preferred_username", "enrollAttributeClaimsSelector": "/groups"}
    body.update(extra)
    return body


def token(sub: str, **extra) -> str:
    extra.setdefault("preferred_username", f"user-{sub}")
    return sign(Keys.main, fp_kid(), claims(sub, **extra))


def enroll(client, jwt: str | None, body: dict | None = None, **headers):
    if jwt is not None:
        headers["authorization"] = f"Bearer {jwt}"
    return client.post(ENROLL, json={} if body is None else body, headers=headers)


def leaf(chain_pem: str) -> str:
    return chain_pem.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"


def find(admin, external_id: str) -> list[dict]:
    return admin.get("/identities", params={"filter": f'externalId = "{external_id}"'}).json()["data"]


@pytest.fixture
def signer(cadmin) -> str:
    return cadmin.create("external-jwt-signers", signer_body())


def test_to_cert_makes_the_identity_and_its_certificate_logs_in(ctl, cadmin, certs, keys, signer):
    r = enroll(certs.client, token("alice", groups=["sales", "", "emea"]), {"clientCsr": csr(keys[0], "whatever")})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"] == {} and set(body["data"]) == {"cert", "ca"}
    chain = x509.load_pem_x509_certificates(body["data"]["cert"].encode())
    assert chain[0].issuer == x509.load_pem_x509_certificate(ctl.state["signer_cert"].encode()).subject
    assert body["data"]["ca"].count("BEGIN CERTIFICATE") >= 1
    [ident] = find(cadmin, "alice")
    assert ident["name"] == "user-alice" and ident["roleAttributes"] == ["emea", "sales"]
    assert ident["authPolicyId"] == "default" and ident["externalId"] == "alice"
    assert ident["authenticators"].get("cert")
    r = certs.cert_login(leaf(body["data"]["cert"]))
    assert r.status_code == 200, r.text
    assert r.json()["data"]["identityId"] == ident["id"]


def test_to_token_makes_an_identity_that_logs_in_with_such_jwts(cadmin, certs, signer):
    jwt = token("bob", groups="ops")
    assert_error(ext_login(certs.client, jwt), 401, "INVALID_AUTH")   # nobody yet
    r = enroll(certs.client, jwt)
    assert r.status_code == 200, r.text
    assert r.json() == {"data": {"data": None, "meta": None}, "meta": {}}
    [ident] = find(cadmin, "bob")
    assert ident["name"] == "user-bob" and ident["roleAttributes"] == ["ops"]
    assert ident["authenticators"] == {}
    r = ext_login(certs.client, jwt)
    assert r.status_code == 200, r.text
    assert r.json()["data"]["identityId"] == ident["id"]
    # the same sub again, either way: already enrolled
    assert_error(enroll(certs.client, token("bob")), 409, "ENROLLMENT_IDENTITY_ALREADY_ENROLLED")


def test_default_selectors_and_the_signers_auth_policy(cadmin, certs):
    policy = cadmin.create("auth-policies", {
        "name": "idp-enrolled", "secondary": {"requireTotp": False},
        "primary": {"cert": {"allowed": False, "allowExpiredCerts": False},
                    "extJwt": {"allowed": True, "allowedSigners": []},
                    "updb": {"allowed": False, "lockoutDurationMinutes": 0, "maxAttempts": 0,
                             "minPasswordLength": 5, "requireMixedCase": False, "requireNumberChar": False,
                             "requireSpecialChar": False}}})
    cadmin.create("external-jwt-signers", signer_body(
        enrollToCertEnabled=False, enrollNameClaimsSelector="", enrollAttributeClaimsSelector="missing",
        enrollAuthPolicyId=policy))
    assert enroll(certs.client, token("carol")).status_code == 200
    [ident] = find(cadmin, "carol")
    assert ident["name"] == "carol" and ident["roleAttributes"] is None and ident["authPolicyId"] == policy
    assert ext_login(certs.client, token("carol")).status_code == 200


def test_refusals_are_4xx_and_enroll_nobody(cadmin, certs, keys, signer):
    good_csr = {"clientCsr": csr(keys[1], "x")}
    now = int(clock.now().timestamp())
    assert_error(enroll(certs.client, None), 400, "COULD_NOT_VALIDATE")            # v2.0.3: HTTP 602
    for bad in (sign(Keys.other_rsa, fp_kid(), claims("dave")),                    # another key
                token("dave", exp=now - 10),                                         # expired
                token("dave", aud="someone-else"),                                   # audience
                token("dave", preferred_username=None),                              # no name
                token("dave", groups=[1, 2]),                                        # attributes not strings
                "not-a-jwt"):
        assert_error(enroll(certs.client, bad, good_csr), 400, "INVALID_ENROLLMENT_TOKEN")
    assert_error(enroll(certs.client, token("dave"), {"clientCsr": "garbage"}), 400, "COULD_NOT_PROCESS_CSR")
    err = assert_error(enroll(certs.client, token("dave"), {"clientCsr": 7}), 400, "COULD_NOT_PARSE_BODY")
    assert "cannot unmarshal number into Go struct field TokenEnrollmentRequest.clientCsr" in err["cause"]["message"]
    r = certs.client.post(ENROLL, content=b"plain text", headers={"authorization": f"Bearer {token('dave')}",
                                                                   "content-type": "text/plain"})
    err = assert_error(r, 415, "COULD_NOT_VALIDATE")                               # upstream's answer
    assert err["cause"]["field"] == "Content-Type"
    r = certs.client.post(ENROLL, headers={"authorization": f"Bearer {token('dave')}"})
    err = assert_error(r, 400, "COULD_NOT_VALIDATE")                               # v2.0.3: HTTP 602
    assert err["cause"]["field"] == "tokenEnrollmentRequest"
    assert_error(enroll(certs.client, token("dave"), **{"ziti-token-issuer-id": "no-such-signer"}),
                 400, "INVALID_ENROLLMENT_TOKEN")
    assert find(cadmin, "dave") == []


def test_a_mode_the_signer_does_not_allow(cadmin, certs, keys, signer):
    assert cadmin.patch(f"/external-jwt-signers/{signer}", json={"enrollToTokenEnabled": False}).status_code == 200
    assert_error(enroll(certs.client, token("erin")), 409, "INVALID_ENROLLMENT_NOT_ALLOWED")
    assert cadmin.patch(f"/external-jwt-signers/{signer}",
                        json={"enrollToTokenEnabled": True, "enrollToCertEnabled": False}).status_code == 200
    assert_error(enroll(certs.client, token("erin"), {"clientCsr": csr(keys[2], "x")}),
                 409, "INVALID_ENROLLMENT_NOT_ALLOWED")
    assert cadmin.patch(f"/external-jwt-signers/{signer}", json={"enabled": False}).status_code == 200
    assert_error(enroll(certs.client, token("erin")), 400, "INVALID_ENROLLMENT_TOKEN")
    assert find(cadmin, "erin") == []


def test_a_policy_limited_to_other_signers_refuses_token_enrollment(cadmin, certs, signer):
    other = cadmin.create("external-jwt-signers", {"name": "other", "enabled": True, "issuer": "https://other.test",
                                                   "audience": "x", "jwksEndpoint": "https://other.test/jwks"})
    policy = cadmin.create("auth-policies", {
        "name": "only-other", "secondary": {"requireTotp": False},
        "primary": {"cert": {"allowed": True, "allowExpiredCerts": False},
                    "extJwt": {"allowed": True, "allowedSigners": [other]},
                    "updb": {"allowed": False, "lockoutDurationMinutes": 0, "maxAttempts": 0,
                             "minPasswordLength": 5, "requireMixedCase": False, "requireNumberChar": False,
                             "requireSpecialChar": False}}})
    assert cadmin.patch(f"/external-jwt-signers/{signer}", json={"enrollAuthPolicyId": policy}).status_code == 200
    assert_error(enroll(certs.client, token("frank")), 409, "INVALID_ENROLLMENT_NOT_ALLOWED")


def test_a_name_already_taken_is_a_4xx(cadmin, certs, signer):
    cadmin.create("identities", {"name": "user-gina", "type": "User", "isAdmin": False})
    err = assert_error(enroll(certs.client, token("gina")), 400, "COULD_NOT_VALIDATE")   # v2.0.3: 500
    assert err["cause"]["field"] == "name"
    assert find(cadmin, "gina") == []


def test_the_issuer_id_header_picks_the_signer(cadmin, certs, signer):
    r = enroll(certs.client, token("hank"), **{"ziti-token-issuer-id": signer})
    assert r.status_code == 200, r.text
    assert len(find(cadmin, "hank")) == 1


@pytest.fixture
def jwks(tmp_path, monkeypatch):
    """A JWKS served over HTTPS on 127.0.0.1, its certificate trusted through the environment."""
    server = JwksServer(tmp_path)
    monkeypatch.setenv("ZITI_LITE_JWKS_CA_FILE", str(server.ca_file))
    yield server
    server.close()


@pytest.mark.slow
def test_a_jwks_signer_on_loopback(cadmin, certs, keys, jwks):
    jwks.keys = [jwk(Keys.ec1, "loopback-kid")]
    cadmin.create("external-jwt-signers", signer_body(certPem=None, jwksEndpoint=jwks.url))
    jwt = sign(Keys.ec1, "loopback-kid", claims("ivy", preferred_username="ivy"), alg="ES256")
    r = enroll(certs.client, jwt, {"clientCsr": csr(keys[3], "ivy")})
    assert r.status_code == 200, r.text
    assert certs.cert_login(leaf(r.json()["data"]["cert"])).status_code == 200
    assert jwks.hits == 1
    assert_error(enroll(certs.client, jwt), 409, "ENROLLMENT_IDENTITY_ALREADY_ENROLLED")
