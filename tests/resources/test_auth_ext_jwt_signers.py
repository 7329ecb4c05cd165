"""External JWT signers: management CRUD, computed certificate fields, the certPem/jwksEndpoint
rule, uniqueness, referenced deletes and the public client-API view."""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes

from tests.conftest import CLIENT, assert_error
from tests.resources.test_cas_enrollments import make_cert, pem, user  # noqa: F401  (fixture)

ZERO = "0001-01-01T00:00:00.000Z"


def signer(name: str, **extra) -> dict:
    body = {"name": name, "issuer": f"https://{name}.example.com", "audience": "ziti", "enabled": True,
            "jwksEndpoint": f"https://{name}.example.com/.well-known/jwks.json"}
    body.update(extra)
    return body


def test_cert_signer_computes_fields(admin):
    cert, _ = make_cert("idp-signing", ca=False)
    id = admin.create("external-jwt-signers", signer("certy", jwksEndpoint=None, certPem=pem(cert), kid="k1",
                                                     scopes=["openid", "email"], clientId="cli",
                                                     externalAuthUrl="https://idp.example.com/auth"))
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert d["certPem"] == pem(cert) and d["jwksEndpoint"] is None
    assert d["fingerprint"] == cert.fingerprint(hashes.SHA1()).hex()
    assert d["commonName"] == "idp-signing"
    assert d["notBefore"].endswith("Z") and d["notBefore"] != ZERO and d["notAfter"] > d["notBefore"]
    assert d["kid"] == "k1" and d["issuer"] == "https://certy.example.com" and d["audience"] == "ziti"
    assert d["claimsProperty"] == "sub" and d["useExternalId"] is False and d["enabled"] is True
    assert d["scopes"] == ["openid", "email"] and d["clientId"] == "cli"
    assert d["externalAuthUrl"] == "https://idp.example.com/auth"
    assert d["_links"] == {"self": {"href": f"./external-jwt-signers/{id}"}}


def test_jwks_signer_has_empty_cert_fields(admin):
    id = admin.create("external-jwt-signers", signer("jwks", claimsProperty="  ", useExternalId=True))
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert d["certPem"] is None and d["jwksEndpoint"].endswith("/jwks.json")
    assert d["commonName"] == "" and d["notBefore"] == ZERO and d["notAfter"] == ZERO
    assert d["fingerprint"] is None and d["kid"] is None  # upstream answers null for unset strings
    assert d["claimsProperty"] == "sub" and d["useExternalId"] is True
    found = admin.get("/external-jwt-signers", params={"filter": 'useExternalId = true and enabled = true'}).json()
    assert [x["id"] for x in found["data"]] == [id]


def test_cert_pem_xor_jwks_endpoint(admin):
    cert, _ = make_cert("x", ca=False)
    err = assert_error(admin.post("/external-jwt-signers", json=signer("neither", jwksEndpoint=None)),
                       400, "INVALID_FIELD")
    # upstream's field error arrives as a generic cause carrying its text
    assert err["cause"] == {"code": "UNHANDLED", "message": "the value '<nil>' for 'certPem' is invalid: "
                                                            "jwksEndpoint or certPem is required"}
    both = signer("both", certPem=pem(cert))
    err = assert_error(admin.post("/external-jwt-signers", json=both), 400, "INVALID_FIELD")
    assert err["cause"] == {
        "code": "UNHANDLED",
        "message": f"the value '{both['jwksEndpoint']}' for 'jwksEndpoint' is invalid: "
                   "only one of jwksEndpoint or certPem may be defined"}
    id = admin.create("external-jwt-signers", signer("one"))
    assert_error(admin.patch(f"/external-jwt-signers/{id}", json={"certPem": pem(cert)}),
                 400, "INVALID_FIELD")
    # PUT replaces: switch from JWKS to a certificate
    assert (
        admin.put(f"/external-jwt-signers/{id}", json=signer("one", jwksEndpoint=None, certPem=pem(cert))).status_code
        == 200
    )
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert d["jwksEndpoint"] is None and d["commonName"] == "x"


def test_cert_pem_must_hold_one_certificate(admin):
    a, _ = make_cert("a", ca=False)
    b, _ = make_cert("b", ca=False)
    for bad in ("garbage", pem(a) + pem(b), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"):
        assert_error(
            admin.post("/external-jwt-signers", json=signer("bad", jwksEndpoint=None, certPem=bad)),
            400,
            "INVALID_CERT_PEM",
        )


def test_patch_recomputes_certificate_fields(admin):
    a, _ = make_cert("first", ca=False)
    b, _ = make_cert("second", ca=False)
    id = admin.create("external-jwt-signers", signer("rotating", jwksEndpoint=None, certPem=pem(a)))
    assert (
        admin.patch(f"/external-jwt-signers/{id}", json={"certPem": pem(b), "claimsProperty": "email"}).status_code
        == 200
    )
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert d["commonName"] == "second" and d["fingerprint"] == b.fingerprint(hashes.SHA1()).hex()
    assert d["claimsProperty"] == "email" and d["name"] == "rotating" and d["audience"] == "ziti"


def test_unique_fields(admin):
    admin.create("external-jwt-signers", signer("u1", kid="kid-1"))
    err = assert_error(
        admin.post("/external-jwt-signers", json=signer("u2", issuer="https://u1.example.com")),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "issuer"
    err = assert_error(admin.post("/external-jwt-signers", json=signer("u3", kid="kid-1")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "kid"
    err = assert_error(
        admin.post("/external-jwt-signers", json=signer("u1", issuer="https://other")), 400, "COULD_NOT_VALIDATE"
    )
    assert err["cause"]["field"] == "name"
    err = assert_error(admin.post("/external-jwt-signers", json=signer("u4", issuer=" ")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "issuer"
    body = signer("u5")
    del body["audience"]
    err = assert_error(admin.post("/external-jwt-signers", json=body), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "audience"


def _policy(name: str, allowed=(), required=None) -> dict:
    return {
        "name": name,
        "primary": {
            "cert": {"allowed": True, "allowExpiredCerts": True},
            "extJwt": {"allowed": True, "allowedSigners": list(allowed)},
            "updb": {
                "allowed": True,
                "lockoutDurationMinutes": 0,
                "maxAttempts": 0,
                "minPasswordLength": 5,
                "requireMixedCase": False,
                "requireNumberChar": False,
                "requireSpecialChar": False,
            },
        },
        "secondary": {"requireTotp": False, "requireExtJwtSigner": required},
    }


def test_delete_refused_while_referenced(admin):
    s1 = admin.create("external-jwt-signers", signer("ref-a"))
    s2 = admin.create("external-jwt-signers", signer("ref-b"))
    p1 = admin.create("auth-policies", _policy("uses-a", allowed=[s1]))
    p2 = admin.create("auth-policies", _policy("requires-b", required=s2))
    err = assert_error(admin.delete(f"/external-jwt-signers/{s1}"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert p1 in err["cause"]["value"]
    err = assert_error(admin.delete(f"/external-jwt-signers/{s2}"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert p2 in err["cause"]["value"]
    assert admin.delete(f"/auth-policies/{p1}").status_code == 200
    assert admin.delete(f"/external-jwt-signers/{s1}").status_code == 200
    assert admin.patch(f"/auth-policies/{p2}", json={"secondary": {"requireExtJwtSigner": ""}}).status_code == 200
    assert admin.delete(f"/external-jwt-signers/{s2}").status_code == 200


def test_client_api_view_is_public_and_enabled_only(admin, anon):
    on = admin.create(
        "external-jwt-signers", signer("visible", clientId="zac", scopes=["openid"], externalAuthUrl="https://idp/auth")
    )
    admin.create("external-jwt-signers", signer("hidden", enabled=False))
    bare = admin.create("external-jwt-signers", signer("bare", audience=None))
    r = anon.as_prefix(CLIENT).get("/external-jwt-signers")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"]["pagination"]["totalCount"] == 2
    items = {x["id"]: x for x in body["data"]}
    assert set(items) == {on, bare}
    assert set(items[on]) == {
        "id",
        "createdAt",
        "updatedAt",
        "tags",
        "_links",
        "name",
        "externalAuthUrl",
        "scopes",
        "clientId",
        "audience",
    }
    assert items[on]["clientId"] == "zac" and items[on]["scopes"] == ["openid"]
    assert items[bare]["externalAuthUrl"] is None and items[bare]["scopes"] is None
    assert "clientId" not in items[bare] and "audience" not in items[bare]
    r = anon.as_prefix(CLIENT).get("/external-jwt-signers", params={"filter": 'name = "bare"'})
    assert [x["id"] for x in r.json()["data"]] == [bare]


def test_management_requires_admin(admin, user, anon):  # noqa: F811
    id = admin.create("external-jwt-signers", signer("adm"))
    for api in (user, anon):
        assert_error(api.get("/external-jwt-signers"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/external-jwt-signers/{id}"), 401, "UNAUTHORIZED")
        assert_error(api.post("/external-jwt-signers", json=signer("nope")), 401, "UNAUTHORIZED")
        assert_error(api.delete(f"/external-jwt-signers/{id}"), 401, "UNAUTHORIZED")
