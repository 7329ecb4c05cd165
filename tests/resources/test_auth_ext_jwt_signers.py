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
    assert d["scopes"] == ["email", "openid"] and d["clientId"] == "cli"   # a set: sorted
    assert d["externalAuthUrl"] == "https://idp.example.com/auth"
    assert d["_links"] == {"self": {"href": f"./external-jwt-signers/{id}"}}


def test_scopes_are_a_set_and_an_empty_kid_or_client_id_is_kept(admin):
    """As v1.3.3 and v2.0.3 answer (their scopes are a bucket's keys; kid and clientId are stored
    as sent): ZAC 4.5.1's signer form sends "" for a kid or client id left empty, and reads the
    scopes back as chips."""
    id = admin.create("external-jwt-signers", signer("shape", scopes=["openid", "email", "openid", "Zed"], kid="",
                                                     clientId="", audience="  ", externalAuthUrl=""))
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert d["scopes"] == ["Zed", "email", "openid"]
    assert (d["kid"], d["clientId"], d["audience"], d["externalAuthUrl"]) == ("", "", None, None)
    assert admin.patch(f"/external-jwt-signers/{id}", json={"scopes": ["b", "a"], "kid": "k"}).status_code == 200
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert (d["scopes"], d["kid"], d["clientId"]) == (["a", "b"], "k", "")
    bare = admin.get(f"/external-jwt-signers/{admin.create('external-jwt-signers', signer('bare'))}").json()["data"]
    assert (bare["kid"], bare["clientId"], bare["scopes"]) == (None, None, None)


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
        "targetToken",
    }   # OpenZiti 2.0's targetToken; enrollTo*Enabled only when true (upstream's omitempty)
    assert items[on]["clientId"] == "zac" and items[on]["scopes"] == ["openid"]
    assert items[on]["targetToken"] == "ACCESS"
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


# ---------------------------------------------------------------- enrollment fields (OpenZiti 2.0)
ENROLL_KEYS = ("enrollToCertEnabled", "enrollToTokenEnabled", "enrollNameClaimsSelector",
               "enrollAttributeClaimsSelector", "enrollAuthPolicyId")


def _enroll_fields(d: dict) -> dict:
    return {k: d[k] for k in (*ENROLL_KEYS, "targetToken") if k in d}


def test_enrollment_fields_default_and_false_ones_are_left_out(admin):
    id = admin.create("external-jwt-signers", signer("plain"))
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    # upstream's omitempty: false flags and the empty attribute selector are absent
    assert _enroll_fields(d) == {"enrollNameClaimsSelector": "/sub", "enrollAuthPolicyId": "default",
                                 "targetToken": "ACCESS"}
    listed = admin.get("/external-jwt-signers", params={"filter": 'name = "plain"'}).json()["data"][0]
    assert _enroll_fields(listed) == _enroll_fields(d)


def test_enrollment_fields_round_trip_on_create_update_and_patch(admin):
    policy = admin.create("auth-policies", _policy("enrolled-ones"))
    body = signer("enrolling", enrollToCertEnabled=True, enrollToTokenEnabled=True, targetToken="ID",
                  enrollNameClaimsSelector="/preferred_username", enrollAttributeClaimsSelector="groups",
                  enrollAuthPolicyId=policy)
    id = admin.create("external-jwt-signers", body)
    want = {k: body[k] for k in (*ENROLL_KEYS, "targetToken")}
    assert _enroll_fields(admin.get(f"/external-jwt-signers/{id}").json()["data"]) == want
    # PATCH writes what it names: "" selectors and policy go back to their defaults
    assert admin.patch(f"/external-jwt-signers/{id}", json={"enrollToCertEnabled": False,
                                                            "enrollNameClaimsSelector": ""}).status_code == 200
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    changed = {**want, "enrollNameClaimsSelector": "/sub"}
    del changed["enrollToCertEnabled"]
    assert _enroll_fields(d) == changed
    # PUT replaces: what it leaves out is reset
    assert admin.put(f"/external-jwt-signers/{id}", json=signer("enrolling")).status_code == 200
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert _enroll_fields(d) == {"enrollNameClaimsSelector": "/sub", "enrollAuthPolicyId": "default",
                                 "targetToken": "ACCESS"}
    found = admin.get("/external-jwt-signers", params={"filter": 'targetToken = "ACCESS" and name = "enrolling"'})
    assert [x["id"] for x in found.json()["data"]] == [id]
    assert "enrollToCertEnabled" in found.json()["meta"]["filterableFields"]


def test_enrollment_auth_policy_must_exist_and_allow_the_modes(admin):
    # upstream v2.0.3's answers, reasons included (the "must be specified" is misleading: it was)
    for flags, reason in (({"enrollToTokenEnabled": True}, "the auth policy must be specified if enroll to token"
                                                            " is enabled"),
                          ({"enrollToCertEnabled": True}, "the auth policy must be specified if enroll to cert"
                                                           " is enabled")):
        err = assert_error(admin.post("/external-jwt-signers",
                                      json=signer("nopolicy", enrollAuthPolicyId="no-such-policy", **flags)),
                           400, "COULD_NOT_VALIDATE")
        assert err["cause"] == {"field": "enrollAuthPolicyId", "reason": reason, "value": "no-such-policy"}
    err = assert_error(admin.post("/external-jwt-signers", json=signer("nopolicy", enrollAuthPolicyId="no-such")),
                       404, "NOT_FOUND")
    assert err["cause"] == {"code": "UNHANDLED", "message": "authPolicy with id no-such not found"}
    strict = _policy("no-ext-jwt-no-cert")
    strict["primary"]["extJwt"]["allowed"] = False
    strict["primary"]["cert"]["allowed"] = False
    policy = admin.create("auth-policies", strict)
    err = assert_error(admin.post("/external-jwt-signers", json=signer(
        "strict", enrollAuthPolicyId=policy, enrollToTokenEnabled=True)), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["reason"] == "primary external jwt authentication on auth policy is disabled"
    err = assert_error(admin.post("/external-jwt-signers", json=signer(
        "strict", enrollAuthPolicyId=policy, enrollToCertEnabled=True)), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["reason"] == "primary certificate authentication on auth policy is disabled"
    # a flag turned on later is checked against the stored policy too
    id = admin.create("external-jwt-signers", signer("strict", enrollAuthPolicyId=policy))
    assert_error(admin.patch(f"/external-jwt-signers/{id}", json={"enrollToCertEnabled": True}),
                 400, "COULD_NOT_VALIDATE")
    # and the policy cannot go while a signer names it
    err = assert_error(admin.delete(f"/auth-policies/{policy}"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert err["cause"]["field"] == "enrollAuthPolicyId" and id in err["cause"]["value"]


def test_client_view_shows_the_enrollment_modes(admin, anon):
    id = admin.create("external-jwt-signers", signer("modes", enrollToCertEnabled=True, targetToken="ID"))
    [item] = [x for x in anon.as_prefix(CLIENT).get("/external-jwt-signers").json()["data"] if x["id"] == id]
    assert item["enrollToCertEnabled"] is True and "enrollToTokenEnabled" not in item
    assert item["targetToken"] == "ID" and "openIdConfigurationUrl" not in item
    assert not set(item) & {"enrollNameClaimsSelector", "enrollAuthPolicyId", "issuer", "certPem"}


# the fields ZAC 4.5.1's signer form saves (its JwtSigner model), read from the form or the detail
ZAC_MODEL = ("name", "audience", "issuer", "clientId", "claimsProperty", "enabled", "useExternalId",
             "externalAuthUrl", "kid", "scopes", "jwksEndpoint", "certPem", "tags", "targetToken",
             "enrollToCertEnabled", "enrollToTokenEnabled")


def test_zac_signer_form_keeps_target_token_and_enrollment_modes(admin):
    """The bodies ZAC 4.5.1's form sends: a new signer from its model's defaults and what was typed
    (an unset certPem left out), then an edit that PUTs the model's fields of the detail it read
    (fields the detail leaves out, such as a false flag, are left out of the PUT too)."""
    created = {"name": "zac-jwt", "audience": "zac", "issuer": "https://zac.example", "clientId": "",
               "claimsProperty": "", "enabled": True, "useExternalId": False, "externalAuthUrl": "", "kid": "",
               "scopes": [], "jwksEndpoint": "https://zac.example/jwks", "tags": {}, "targetToken": "ID",
               "enrollToCertEnabled": True, "enrollToTokenEnabled": True}
    id = admin.create("external-jwt-signers", created)
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert (d["targetToken"], d["enrollToCertEnabled"], d["enrollToTokenEnabled"]) == ("ID", True, True)
    edit = {k: d[k] for k in ZAC_MODEL if k in d}
    edit.update(enrollToTokenEnabled=False, audience="zac2")   # the toggle switched off, a field retyped
    assert admin.put(f"/external-jwt-signers/{id}", json=edit).status_code == 200
    d = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert (d["targetToken"], d["enrollToCertEnabled"], d["audience"]) == ("ID", True, "zac2")
    assert "enrollToTokenEnabled" not in d
    # a second edit of the detail as read keeps everything
    again = {k: d[k] for k in ZAC_MODEL if k in d}
    assert admin.put(f"/external-jwt-signers/{id}", json=again).status_code == 200
    after = admin.get(f"/external-jwt-signers/{id}").json()["data"]
    assert {k: after.get(k) for k in ZAC_MODEL} == {k: d.get(k) for k in ZAC_MODEL}
