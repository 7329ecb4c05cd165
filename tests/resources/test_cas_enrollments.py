"""Third-party CAs (CRUD, certificate checks, restricted updates, links and delete cascade) and
enrollments (create, detail, refresh, delete), identity sub-lists and /controllers."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, Api, assert_error
from tests.fastclient import FastClient
from ziti_lite import clock
from ziti_lite.app import create_app
from ziti_lite.config import Settings
from ziti_lite.pki import ca as pki
from ziti_lite.pki import tokens


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
    assert d["identityRoles"] == ["db", "web"]  # a set: sorted, as upstream answers it
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
    # a PATCH of another field, or with an empty claim (older CLIs send one), keeps the claim; the
    # SCHEME matcher needs a SAN_URI location: the merged claim is checked (OpenZiti 2.0)
    assert admin.patch(f"/cas/{id}", json={"name": "claims-2"}).status_code == 200
    assert admin.patch(f"/cas/{id}", json={"externalIdClaim": {}}).status_code == 200
    assert admin.get(f"/cas/{id}").json()["data"]["externalIdClaim"]["index"] == 2
    err = assert_error(admin.patch(f"/cas/{id}", json={"externalIdClaim": {"location": "COMMON_NAME"}}),
                       400, "INVALID_FIELD")
    assert err["cause"]["message"] == ("the value 'location=COMMON_NAME matcher=SCHEME parser=SPLIT' for "
                                       "'externalIdClaim' is invalid: unsupported matcher [SCHEME] for location "
                                       "[COMMON_NAME]")
    bad = dict(claim, location="SAN_EMAIL")
    r = admin.post("/cas", json=ca_body("claims-bad", externalIdClaim=bad))
    assert_error(r, 400, "INVALID_FIELD")
    err = assert_error(
        admin.post("/cas", json=ca_body("claims-enum", externalIdClaim={"location": "NOWHERE"})),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "externalIdClaim.location"


@pytest.mark.parametrize("claim, reason", [
    ({"location": "SAN_URI", "matcher": "PREFIX", "matcherCriteria": "spiffe://", "parser": "NONE"},
     "'location=SAN_URI matcher=PREFIX parser=NONE' for 'externalIdClaim' is invalid: "
     "unsupported matcher [PREFIX] for location [SAN_URI]"),
    ({"location": "SAN_URI", "matcher": "SUFFIX", "matcherCriteria": "x", "parser": "NONE"},
     "unsupported matcher [SUFFIX] for location [SAN_URI]"),
    ({"location": "COMMON_NAME", "matcher": "PREFIX", "matcherCriteria": None, "parser": "NONE"},
     "invalid criteria [] for matcher [PREFIX]"),
    ({"location": "SAN_EMAIL", "matcher": "ALL", "parser": "SPLIT", "parserCriteria": ""},
     "invalid criteria [] for parser [SPLIT]"),
    ({"location": None, "matcher": "ALL", "parser": "NONE"},
     "the value '' for 'externalIdClaim.location' is invalid: unsupported location []"),
    ({"location": "COMMON_NAME", "matcher": "ALL", "parser": "NONE", "index": -1},
     "the value '-1' for 'externalIdClaim.index' is invalid: index must be greater than or equal to zero"),
])
def test_a_claim_that_could_never_match_is_refused_when_written_as_openziti_2(admin, claim, reason):
    """v2.0.3 checks the claim on create and replace (v1.3.3 stored PREFIX on SAN_URI and failed
    every login with it): 400 with upstream's bad-request cause, the claim named."""
    full = {"index": 0, "matcherCriteria": "", "parserCriteria": "", **claim}
    err = assert_error(admin.post("/cas", json=ca_body("claims-2x", externalIdClaim=full)),
                       400, "INVALID_FIELD")
    assert reason in err["cause"]["message"]
    ok = {"location": "COMMON_NAME", "matcher": "ALL", "matcherCriteria": "", "parser": "NONE",
          "parserCriteria": "", "index": 0}
    id = admin.create("cas", ca_body("claims-2y", externalIdClaim=ok))
    body = admin.get(f"/cas/{id}").json()["data"]
    put = {k: body[k] for k in ("name", "isAutoCaEnrollmentEnabled", "isOttCaEnrollmentEnabled", "isAuthEnabled",
                                "identityRoles", "identityNameFormat")}
    assert_error(admin.put(f"/cas/{id}", json={**put, "externalIdClaim": full}), 400, "INVALID_FIELD")
    assert admin.get(f"/cas/{id}").json()["data"]["externalIdClaim"] == ok


def test_identity_roles(admin):
    iid = admin.create("identities", {"name": "role-target", "type": "User", "isAdmin": False})
    id = admin.create("cas", ca_body("roles", identityRoles=["plain", "#attr", f"@{iid}"]))
    # a set: sorted, as upstream answers it
    assert admin.get(f"/cas/{id}").json()["data"]["identityRoles"] == sorted(["plain", "#attr", f"@{iid}"])
    err = assert_error(
        admin.post("/cas", json=ca_body("roles-missing", identityRoles=["@nobody"])), 400, "COULD_NOT_VALIDATE"
    )
    assert err["cause"]["field"] == "identityRoles"
    assert_error(admin.post("/cas", json=ca_body("roles-all", identityRoles=["#all", "#x"])), 400, "COULD_NOT_VALIDATE")
    assert_error(admin.patch(f"/cas/{id}", json={"identityRoles": ["@nobody"]}), 400, "COULD_NOT_VALIDATE")
    body = ca_body("roles-null")
    body["identityRoles"] = None
    id2 = admin.create("cas", body)
    # null: upstream's storage keeps no empty list
    assert admin.get(f"/cas/{id2}").json()["data"]["identityRoles"] is None
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


# ------------------------------------------------------------------ enrollments
# (create, detail, refresh, delete), identity sub-lists and /controllers
def later(minutes: int = 60) -> str:
    return clock.fmt(clock.now() + dt.timedelta(minutes=minutes))


def identity(admin, name: str, **extra) -> str:
    return admin.create("identities", {"name": name, "type": "User", "isAdmin": False, **extra})


def test_create_ott_and_detail(admin, ctl):
    iid = identity(admin, "enr-ott")
    expires = later(90)
    r = admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": expires})
    assert r.status_code == 201, r.text
    id = r.json()["data"]["id"]
    assert r.json() == {"data": {"id": id, "_links": {"self": {"href": f"./enrollments/{id}"}}}, "meta": {}}
    d = admin.get(f"/enrollments/{id}").json()["data"]
    assert d["method"] == "ott" and d["identityId"] == iid and d["expiresAt"] == expires
    assert d["identity"]["entity"] == "identities" and d["identity"]["id"] == iid
    assert d["identity"]["name"] == "enr-ott"
    # the reference carries the identity's own links, as upstream's do
    assert d["identity"]["_links"] == admin.get(f"/identities/{iid}").json()["data"]["_links"]
    for absent in ("edgeRouterId", "edgeRouter", "transitRouterId", "transitRouter", "caId", "ca", "username"):
        assert absent not in d, absent
    claims = tokens.verify_enrollment_jwt(d["jwt"], ctl.state["server_cert"])
    assert claims["jti"] == d["token"] and claims["sub"] == iid and claims["em"] == "ott"
    assert claims["exp"] == int(clock.parse(expires).timestamp())
    summary = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]
    assert summary["ott"]["id"] == id and summary["ott"]["jwt"] == d["jwt"]


def test_ottca_and_updb(admin):
    ca = admin.create("cas", ca_body("enr-ca"))
    iid = identity(admin, "enr-multi")
    e1 = admin.create("enrollments", {"method": "ottca", "identityId": iid, "expiresAt": later(), "caId": ca})
    e2 = admin.create("enrollments", {"method": "updb", "identityId": iid, "expiresAt": later(),
                                      "username": "multi-user", "caId": ca})
    d1 = admin.get(f"/enrollments/{e1}").json()["data"]
    assert d1["caId"] == ca and d1["ca"]["name"] == "enr-ca"
    d2 = admin.get(f"/enrollments/{e2}").json()["data"]
    assert "username" not in d2 and "caId" not in d2  # upstream's detail shows no username
    listed = admin.get("/enrollments", params={"filter": f'identity = "{iid}" and caId = "{ca}"'}).json()
    assert [x["id"] for x in listed["data"]] == [e1]
    assert set(admin.get(f"/identities/{iid}").json()["data"]["enrollment"]) == {"ottca", "updb"}


def test_create_validation(admin):
    iid = identity(admin, "enr-bad")

    def post(**kw):
        return admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": later(), **kw})

    err = assert_error(post(identityId="nobody"), 400, "INVALID_FIELD")
    assert "for 'identityId' is invalid" in err["cause"]["message"]
    err = assert_error(
        post(expiresAt=clock.fmt(clock.now() - dt.timedelta(minutes=1))), 400, "INVALID_FIELD"
    )
    assert "for 'expiresAt' is invalid" in err["cause"]["message"]
    err = assert_error(post(method="ottca"), 400, "INVALID_FIELD")
    assert "for 'caId' is invalid" in err["cause"]["message"]
    err = assert_error(post(method="ottca", caId="noSuchCa"), 400, "INVALID_FIELD")
    assert "for 'caId' is invalid" in err["cause"]["message"]
    err = assert_error(post(method="updb"), 400, "INVALID_FIELD")
    assert "for 'username' is invalid" in err["cause"]["message"]
    err = assert_error(post(method="erott"), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "method"
    err = assert_error(admin.post("/enrollments", json={"method": "ott", "identityId": iid}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "expiresAt"
    err = assert_error(post(expiresAt="tomorrow"), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "expiresAt"
    assert admin.get(f"/identities/{iid}").json()["data"]["enrollment"] == {}


def test_duplicate_method_is_409(admin):
    iid = identity(admin, "enr-dup", enrollment={"ott": True})
    err = assert_error(
        admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": later()}),
        409,
        "ENROLLMENT_EXISTS",
    )
    assert err["cause"] == {"field": "method", "value": "ott", "reason": "enrollment of same method exists"}
    # another method is fine
    admin.create("enrollments", {"method": "updb", "identityId": iid, "expiresAt": later(), "username": "dup-u"})


def test_refresh(admin, ctl):
    iid = identity(admin, "enr-refresh", enrollment={"ott": True})
    id = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]
    before = admin.get(f"/enrollments/{id}").json()["data"]
    expires = later(600)
    r = admin.post(f"/enrollments/{id}/refresh", json={"expiresAt": expires})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}, r.text
    after = admin.get(f"/enrollments/{id}").json()["data"]
    assert after["token"] != before["token"] and after["jwt"] != before["jwt"]
    assert after["expiresAt"] == expires
    claims = tokens.verify_enrollment_jwt(after["jwt"], ctl.state["server_cert"])
    assert claims["jti"] == after["token"], "the refreshed JWT carries the new token"
    assert claims["exp"] == int(clock.parse(expires).timestamp()) and claims["sub"] == iid
    err = assert_error(
        admin.post(f"/enrollments/{id}/refresh", json={"expiresAt": "2001-01-01T00:00:00.000Z"}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "expiresAt"
    assert_error(admin.post(f"/enrollments/{id}/refresh", json={}), 400, "COULD_NOT_VALIDATE")
    assert_error(admin.post("/enrollments/noSuchId/refresh", json={"expiresAt": expires}), 404, "NOT_FOUND")


def test_delete(admin):
    iid = identity(admin, "enr-del", enrollment={"ott": True})
    id = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]
    assert admin.delete(f"/enrollments/{id}").status_code == 200
    assert_error(admin.get(f"/enrollments/{id}"), 404, "NOT_FOUND")
    assert admin.get(f"/identities/{iid}").json()["data"]["enrollment"] == {}
    # the method can be enrolled again once the old one is gone
    admin.create("enrollments", {"method": "ott", "identityId": iid, "expiresAt": later()})


def test_identity_sub_lists(admin):
    iid = identity(admin, "enr-subs", enrollment={"ott": True})
    other = identity(admin, "enr-other", enrollment={"ott": True})
    admin.create("enrollments", {"method": "updb", "identityId": iid, "expiresAt": later(), "username": "subs-u"})
    admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "subs-login", "password": "Subs-pw-1"}
    )
    admin.create(
        "authenticators", {"method": "updb", "identityId": other, "username": "other-login", "password": "Subs-pw-1"}
    )
    body = admin.get(f"/identities/{iid}/enrollments").json()
    assert {x["method"] for x in body["data"]} == {"ott", "updb"}
    assert body["meta"]["pagination"]["totalCount"] == 2 and "filterableFields" in body["meta"]
    # upstream's enrollment store has no method symbol: the filter is refused
    assert admin.get(f"/identities/{iid}/enrollments", params={"filter": 'method = "updb"'}).status_code == 400
    body = admin.get(f"/identities/{iid}/authenticators").json()
    assert [x["username"] for x in body["data"]] == ["subs-login"]
    assert body["data"][0]["identity"]["id"] == iid
    body = admin.get(f"/identities/{iid}/authenticators?limit=1&offset=1").json()
    assert body["data"] == [] and body["meta"]["pagination"] == {"limit": 1, "offset": 1, "totalCount": 1}
    assert_error(admin.get("/identities/nobody/enrollments"), 404, "NOT_FOUND")
    assert_error(admin.get("/identities/nobody/authenticators"), 404, "NOT_FOUND")
    assert_error(admin.get(f"/identities/{iid}/authenticators", params={"filter": "nope ="}), 400, "INVALID_FILTER")


def test_enrollments_non_admin_refused(admin, user, anon):
    iid = identity(admin, "enr-guard", enrollment={"ott": True})
    id = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]
    body = {"method": "updb", "identityId": iid, "expiresAt": later(), "username": "guard-u"}
    for api in (user, anon):
        assert_error(api.get("/enrollments"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/enrollments/{id}"), 401, "UNAUTHORIZED")
        assert_error(api.post("/enrollments", json=body), 401, "UNAUTHORIZED")
        assert_error(api.post(f"/enrollments/{id}/refresh", json={"expiresAt": later()}), 401, "UNAUTHORIZED")
        assert_error(api.delete(f"/enrollments/{id}"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/identities/{iid}/enrollments"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/identities/{iid}/authenticators"), 401, "UNAUTHORIZED")


def test_controllers_lists_ziti_lite_itself_on_both_apis(admin, user, anon, ctl):  # noqa: F811
    """As v2.0.3 lists its one controller: name, certificate and fingerprint, online, when it
    joined, and the API addresses of each view (the client API: its own and the OIDC provider's)."""
    base = ctl.settings.base_url
    cert = ctl.state["server_cert"]
    for api, view in ((admin, "management"), (user.as_prefix(CLIENT), "client")):
        r = api.get("/controllers")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 1}
        assert body["meta"]["filterableFields"][-1] == "isPreferredLeader"
        (c,) = body["data"]
        assert c["id"] == ctl.instance_id and c["name"] == "ziti-lite" and c["isOnline"] is True
        assert c["certPem"] == cert and c["fingerprint"] == pki.fingerprint(cert)
        assert c["lastJoinedAt"] and "isPreferredLeader" not in c
        # no control channel here: the management view says so with "" (upstream always has one)
        assert c.get("ctrlAddress") == ("" if view == "management" else None)
        expected = {"edge-client": "/edge/client/v1", "edge-oidc": "/oidc"}
        if view == "management":
            expected |= {"edge-management": "/edge/management/v1", "fabric": "/fabric/v1"}
        assert c["apiAddresses"] == {k: [{"url": base + p, "version": "v1"}] for k, p in expected.items()}
    assert admin.get("/controllers", params={"filter": "isOnline = true"}).json()["data"][0]["name"] == "ziti-lite"
    assert admin.get("/controllers", params={"filter": "isPreferredLeader = true"}).json()["data"] == []
    assert len(admin.get("/controllers", params={"filter": "isPreferredLeader = false"}).json()["data"]) == 1
    assert_error(admin.get("/controllers", params={"filter": "bogus = 1"}), 400, "INVALID_FILTER")
    assert_error(anon.get("/controllers"), 401, "UNAUTHORIZED")
    assert_error(anon.as_prefix(CLIENT).get("/controllers"), 401, "UNAUTHORIZED")
    assert admin.get("/summary").json()["data"]["controllers"] == 1


def test_controllers_show_the_control_channel_address_and_follow_the_settings(db_path):
    app = create_app(Settings(db=str(db_path), ctrl_port=6262, oidc=False, advertise="ctrl.example.test"))
    try:
        with FastClient(app) as client:
            admin = Api(client).login(ADMIN_USER, ADMIN_PASSWORD)
            (c,) = admin.get("/controllers").json()["data"]
            assert c["ctrlAddress"] == "tls:ctrl.example.test:6262"
            assert set(c["apiAddresses"]) == {"edge-client", "edge-management", "fabric"}   # no OIDC provider
            assert c["apiAddresses"]["edge-client"][0]["url"] == "https://ctrl.example.test:1280/edge/client/v1"
            (c,) = admin.as_prefix(CLIENT).get("/controllers").json()["data"]
            assert "ctrlAddress" not in c and set(c["apiAddresses"]) == {"edge-client"}
    finally:
        app.state.controller.store.close()


def test_an_enrollment_create_refused_names_the_field_as_upstream(admin):
    ident = admin.create("identities", {"name": "enr-causes", "type": "User", "isAdmin": False})
    r = admin.post("/enrollments", json={"method": "ott", "identityId": ident, "expiresAt": "2001-01-01T00:00:00.5Z"})
    err = assert_error(r, 400, "INVALID_FIELD")   # OpenZiti 2.0's code (v1.3.3: REFERENCED_ENTITY_NOT_FOUND)
    assert err["message"] == "The field contains an invalid value"
    # upstream's field error arrives as a generic cause with its text, the value as Go's %v of a time
    assert r.json()["error"]["cause"] == {
        "code": "UNHANDLED",
        "message": "the value '2001-01-01 00:00:00.5 +0000 UTC' for 'expiresAt' is invalid: "
                   "expiresAt must be in the future"}
    r = admin.post("/enrollments", json={"method": "ott", "identityId": "nope", "expiresAt": "2001-01-01T00:00:00Z"})
    assert_error(r, 400, "INVALID_FIELD")   # the identity is checked first
    assert r.json()["error"]["cause"]["message"] == "the value 'nope' for 'identityId' is invalid: identity not found"


def test_an_ottca_enrollments_ca_carries_the_cas_own_links(admin):
    """As upstream's CA link factory: the reference has the links of the CA's detail, verify
    while it is unverified and jwt while it enrolls automatically."""
    for flags in ({"isAutoCaEnrollmentEnabled": True}, {"isAutoCaEnrollmentEnabled": False}):
        ca = admin.create("cas", {**ca_body(f"ref-ca-{flags['isAutoCaEnrollmentEnabled']}"), **flags})
        iid = admin.create("identities", {"name": f"via-{ca}", "type": "User", "isAdmin": False,
                                          "enrollment": {"ottca": ca}})
        ref = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ottca"]["ca"]
        links = admin.get(f"/cas/{ca}").json()["data"]["_links"]
        assert ref["_links"] == links and "verify" in links
        assert ("jwt" in links) == flags["isAutoCaEnrollmentEnabled"]
        enr = admin.get(f'/enrollments?filter=identity="{iid}"').json()["data"][0]
        assert enr["ca"]["_links"] == links
