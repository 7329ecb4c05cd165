"""Third-party CAs: CRUD, certificate checks, restricted updates, links and delete cascade."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import Api, assert_error


# ------------------------------------------------------------------ certificates for the tests
def make_cert(cn: str, *, ca: bool = True, issuer=None, days: int = 30):
    """(certificate, key): self-signed unless issuer=(cert, key) is given."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = dt.datetime.now(dt.UTC)
    issuer_name, signer = (issuer[0].subject, issuer[1]) if issuer else (name, key)
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
         .not_valid_after(now + dt.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    return b.sign(signer, hashes.SHA256()), key


def pem(cert) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def ca_pem(cn: str = "test-ca") -> str:
    return pem(make_cert(cn)[0])


def ca_body(name: str, cert_pem: str | None = None, **extra) -> dict:
    body = {"name": name, "certPem": cert_pem or ca_pem(name), "identityRoles": [],
            "isAuthEnabled": True, "isAutoCaEnrollmentEnabled": False, "isOttCaEnrollmentEnabled": True}
    body.update(extra)
    return body


@pytest.fixture
def user(admin) -> Api:
    """A logged-in non-admin identity (updb authenticator made by the admin)."""
    iid = admin.create("identities", {"name": "plain-user", "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": "plain-user",
                                    "password": "Plain-pw1"})
    return Api(admin.client, admin.prefix).login("plain-user", "Plain-pw1")


# ------------------------------------------------------------------ tests
def test_create_and_detail(admin):
    cert, _ = make_cert("acme-root")
    id = admin.create("cas", ca_body("acme", pem(cert), identityRoles=["web", "web", "db"]))
    d = admin.get(f"/cas/{id}").json()["data"]
    assert d["name"] == "acme"
    assert d["certPem"] == pem(cert)
    assert d["fingerprint"] == cert.fingerprint(hashes.SHA1()).hex()
    assert d["isVerified"] is False
    assert d["verificationToken"] and isinstance(d["verificationToken"], str)
    assert d["identityRoles"] == ["web", "db"]
    assert d["identityNameFormat"] == "[caName]-[commonName]"
    assert d["isAuthEnabled"] is True and d["isOttCaEnrollmentEnabled"] is True
    assert d["isAutoCaEnrollmentEnabled"] is False
    assert "externalIdClaim" not in d
    assert d["_links"] == {"self": {"href": f"./cas/{id}"}, "verify": {"href": f"./cas/{id}/verify"}}
    listed = admin.get("/cas", params={"filter": 'isVerified = false and name = "acme"'}).json()
    assert [x["id"] for x in listed["data"]] == [id]


def test_jwt_link_only_with_auto_enrollment(admin):
    id = admin.create("cas", ca_body("auto", isAutoCaEnrollmentEnabled=True))
    links = admin.get(f"/cas/{id}").json()["data"]["_links"]
    assert links["jwt"] == {"href": f"./cas/{id}/jwt"}
    assert admin.patch(f"/cas/{id}", json={"isAutoCaEnrollmentEnabled": False}).status_code == 200
    assert "jwt" not in admin.get(f"/cas/{id}").json()["data"]["_links"]


def test_verified_ca_has_no_verify_link(admin, ctl):
    id = admin.create("cas", ca_body("verified"))
    with ctl.store.write():
        ctl.store.execute("UPDATE cas SET is_verified = 1 WHERE id = ?", (id,))
    d = admin.get(f"/cas/{id}").json()["data"]
    assert d["isVerified"] is True and "verify" not in d["_links"]
    # PUT/PATCH never touch the verification state
    assert admin.patch(f"/cas/{id}", json={"isVerified": False, "name": "still-verified"}).status_code == 200
    assert admin.get(f"/cas/{id}").json()["data"]["isVerified"] is True


def test_cert_pem_must_be_a_ca(admin):
    leaf, _ = make_cert("just-a-leaf", ca=False)
    assert_error(admin.post("/cas", json=ca_body("leaf", pem(leaf))), 400, "CERTIFICATE_IS_NOT_CA")
    err = assert_error(admin.post("/cas", json=ca_body("garbage", "not a pem")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "certPem"
    err = assert_error(admin.post("/cas", json=ca_body("empty", " ")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "certPem"
    broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    err = assert_error(admin.post("/cas", json=ca_body("broken", broken)), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "certPem"


def test_bundle_uses_first_cert_and_fingerprint_is_unique(admin):
    root, root_key = make_cert("root")
    inter, _ = make_cert("intermediate", issuer=(root, root_key))
    id = admin.create("cas", ca_body("bundle", pem(inter) + pem(root)))
    assert admin.get(f"/cas/{id}").json()["data"]["fingerprint"] == inter.fingerprint(hashes.SHA1()).hex()
    err = assert_error(admin.post("/cas", json=ca_body("again", pem(inter))), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "certPem" and id in err["cause"]["reason"]
    err = assert_error(admin.post("/cas", json=ca_body("bundle")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"


def test_update_cannot_change_certificate(admin):
    first = ca_pem("first")
    id = admin.create("cas", ca_body("fixed", first))
    before = admin.get(f"/cas/{id}").json()["data"]
    body = {"name": "renamed", "certPem": ca_pem("second"), "identityRoles": ["x"], "isAuthEnabled": False,
            "isAutoCaEnrollmentEnabled": False, "isOttCaEnrollmentEnabled": False, "identityNameFormat": ""}
    assert admin.put(f"/cas/{id}", json=body).status_code == 200
    after = admin.get(f"/cas/{id}").json()["data"]
    assert after["certPem"] == first and after["fingerprint"] == before["fingerprint"]
    assert after["verificationToken"] == before["verificationToken"]
    assert after["name"] == "renamed" and after["identityRoles"] == ["x"] and after["isAuthEnabled"] is False
    assert after["identityNameFormat"] == "[caName]-[commonName]"  # blank -> the default
    # PUT requires identityNameFormat (caUpdate), unlike create
    body.pop("identityNameFormat")
    err = assert_error(admin.put(f"/cas/{id}", json=body), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "identityNameFormat"


def test_external_id_claim(admin):
    claim = {"location": "SAN_URI", "matcher": "SCHEME", "matcherCriteria": "spiffe", "parser": "NONE",
             "parserCriteria": None, "index": None}
    id = admin.create("cas", ca_body("claims", externalIdClaim=claim))
    got = admin.get(f"/cas/{id}").json()["data"]["externalIdClaim"]
    assert got == {"location": "SAN_URI", "matcher": "SCHEME", "matcherCriteria": "spiffe", "parser": "NONE",
                   "parserCriteria": "", "index": 0}
    # PATCH changes only the leaves sent
    assert admin.patch(f"/cas/{id}", json={"externalIdClaim": {"index": 2, "parser": "SPLIT",
                                                               "parserCriteria": "/"}}).status_code == 200
    got = admin.get(f"/cas/{id}").json()["data"]["externalIdClaim"]
    assert got == {"location": "SAN_URI", "matcher": "SCHEME", "matcherCriteria": "spiffe", "parser": "SPLIT",
                   "parserCriteria": "/", "index": 2}
    # a PATCH of another field keeps the claim; the SCHEME matcher needs a SAN_URI location
    assert admin.patch(f"/cas/{id}", json={"name": "claims-2"}).status_code == 200
    assert admin.get(f"/cas/{id}").json()["data"]["externalIdClaim"]["index"] == 2
    err = assert_error(admin.patch(f"/cas/{id}", json={"externalIdClaim": {"location": "COMMON_NAME"}}),
                       400, "REFERENCED_ENTITY_NOT_FOUND")
    assert err["cause"]["field"] == "matcher"
    bad = dict(claim, location="SAN_EMAIL")
    r = admin.post("/cas", json=ca_body("claims-bad", externalIdClaim=bad))
    assert_error(r, 400, "REFERENCED_ENTITY_NOT_FOUND")
    err = assert_error(
        admin.post("/cas", json=ca_body("claims-enum", externalIdClaim={"location": "NOWHERE"})),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "externalIdClaim.location"


def test_identity_roles(admin):
    iid = admin.create("identities", {"name": "role-target", "type": "User", "isAdmin": False})
    id = admin.create("cas", ca_body("roles", identityRoles=["plain", "#attr", f"@{iid}"]))
    assert admin.get(f"/cas/{id}").json()["data"]["identityRoles"] == ["plain", "#attr", f"@{iid}"]
    err = assert_error(
        admin.post("/cas", json=ca_body("roles-missing", identityRoles=["@nobody"])), 400, "COULD_NOT_VALIDATE"
    )
    assert err["cause"]["field"] == "identityRoles"
    assert_error(admin.post("/cas", json=ca_body("roles-all", identityRoles=["#all", "#x"])), 400, "COULD_NOT_VALIDATE")
    assert_error(admin.patch(f"/cas/{id}", json={"identityRoles": ["@nobody"]}), 400, "COULD_NOT_VALIDATE")
    body = ca_body("roles-null")
    body["identityRoles"] = None
    id2 = admin.create("cas", body)
    assert admin.get(f"/cas/{id2}").json()["data"]["identityRoles"] == []
    body.pop("identityRoles")
    err = assert_error(admin.post("/cas", json=dict(body, name="roles-absent")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "identityRoles"


def test_delete_cascades_enrollments_and_cert_authenticators(admin, ctl):
    id = admin.create("cas", ca_body("doomed"))
    iid = admin.create("identities", {"name": "via-ca", "type": "User", "isAdmin": False, "enrollment": {"ottca": id}})
    enr = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]
    assert enr["ottca"]["caId"] == id and enr["ottca"]["ca"]["name"] == "doomed"
    other = admin.create("identities", {"name": "cert-user", "type": "User", "isAdmin": False})
    with ctl.store.write():
        ctl.store.execute(
            "INSERT INTO authenticators (id, created_at, updated_at, identity_id, method, fingerprint, cert_pem, ca_id)"
            " VALUES ('caAuth1', '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z', ?, 'cert', 'ff00', 'pem', ?)",
            (other, id),
        )
    assert admin.get("/authenticators/caAuth1").status_code == 200
    assert admin.delete(f"/cas/{id}").status_code == 200
    assert_error(admin.get(f"/cas/{id}"), 404, "NOT_FOUND")
    assert admin.get(f"/identities/{iid}").json()["data"]["enrollment"] == {}
    assert_error(admin.get("/authenticators/caAuth1"), 404, "NOT_FOUND")
    assert admin.get(f"/identities/{other}").status_code == 200  # identities stay


def test_non_admin_refused(admin, user, anon):
    id = admin.create("cas", ca_body("private"))
    for api in (user, anon):
        assert_error(api.get("/cas"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/cas/{id}"), 401, "UNAUTHORIZED")
        assert_error(api.post("/cas", json=ca_body("nope")), 401, "UNAUTHORIZED")
        assert_error(api.patch(f"/cas/{id}", json={"name": "x"}), 401, "UNAUTHORIZED")
        assert_error(api.delete(f"/cas/{id}"), 401, "UNAUTHORIZED")
