"""Public informational endpoints and the admin summary."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.serialization import pkcs7

from tests.conftest import CLIENT, MGMT, Api, assert_error

VERSION_PATHS = ["/version", "/", MGMT + "/version", MGMT + "/", MGMT, CLIENT + "/version", CLIENT + "/",
                 "/edge/v1/version"]
SUMMARY_KEYS = {"apiSessionCertificates", "apiSessions", "authPolicies", "authenticators", "cas", "configTypes",
                "configs", "controllers", "edgeRouterPolicies", "enrollments", "eventualEvents", "externalJwtSigners",
                "identities", "identityTypes", "mfas", "postureCheckTypes", "postureChecks", "revocations", "routers",
                "routers.edge", "serviceEdgeRouterPolicies", "servicePolicies", "services", "services.edge",
                "sessions", "terminators"}


@pytest.mark.parametrize("path", VERSION_PATHS)
def test_version_document(client, path):
    r = client.get(path)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"] == {}
    v = body["data"]
    assert set(v) == {"version", "revision", "buildDate", "runtimeVersion", "capabilities", "apiVersions"}
    assert v["version"].startswith("v")
    assert isinstance(v["revision"], str) and v["revision"]
    assert isinstance(v["buildDate"], str) and v["buildDate"]
    assert isinstance(v["runtimeVersion"], str)
    assert v["capabilities"] == ["OIDC_AUTH"]   # the /oidc provider (tests/oidc), on unless --no-oidc
    apis = v["apiVersions"]
    # v1.3.3's four, and what 2.0 clients look for: the OIDC provider and the fabric API
    assert set(apis) == {"edge", "edge-client", "edge-management", "edge-oidc", "fabric", "health-checks"}
    assert apis["edge-oidc"]["v1"] == {"path": "/oidc", "apiBaseUrls": ["https://127.0.0.1:1280/oidc"]}
    # as v2.0.3 lists it: the base URL without the path
    assert apis["fabric"]["v1"] == {"path": "/fabric/v1", "apiBaseUrls": ["https://127.0.0.1:1280"]}
    assert apis["edge"] == apis["edge-client"]
    assert apis["edge"]["v1"]["path"] == "/edge/client/v1"
    assert apis["edge-management"]["v1"]["path"] == "/edge/management/v1"
    assert apis["health-checks"]["v1"]["path"] == "/health-checks/v1"
    for name, versions in apis.items():
        assert set(versions) == {"v1"} and set(versions["v1"]) == {"path", "apiBaseUrls"}
        for url in versions["v1"]["apiBaseUrls"] if name != "fabric" else ():
            assert url.startswith("https://") and url.endswith(versions["v1"]["path"])
    assert apis["edge-management"]["v1"]["apiBaseUrls"] == ["https://127.0.0.1:1280/edge/management/v1"]


def test_version_needs_no_session_and_ignores_a_bad_one(client):
    assert client.get("/version", headers={"zt-session": "garbage"}).status_code == 200


def test_enumerated_capabilities(client):
    for prefix in (MGMT, CLIENT):
        r = client.get(prefix + "/enumerated-capabilities")
        assert r.status_code == 200
        assert r.json() == {"data": ["OIDC_AUTH", "HA_CONTROLLER"], "meta": {}}


@pytest.mark.parametrize("prefix", [MGMT, CLIENT])
def test_specs(client, prefix):
    r = client.get(prefix + "/specs")
    assert r.status_code == 200
    body = r.json()
    assert body["meta"] == {}
    assert [s["id"] for s in body["data"]] == ["edge-client"]
    for id in ("edge-client", "edge-management"):
        r = client.get(f"{prefix}/specs/{id}")
        assert r.status_code == 200
        item = r.json()["data"]
        assert item["id"] == item["name"] == id and item["tags"] == {}
        assert item["_links"] == {"self": {"href": f"./specs/{id}"}, "spec": {"href": f"./specs/{id}/spec"}}
        assert item["createdAt"] == item["updatedAt"] == "0001-01-01T00:00:00.000Z"
    assert_error(client.get(prefix + "/specs/nope"), 404, "NOT_FOUND")
    assert_error(client.get(prefix + "/specs/nope/spec"), 404, "NOT_FOUND")


def test_spec_bodies_are_raw_documents_of_our_own_routes(client):
    mgmt = client.get(MGMT + "/specs/edge-management/spec")
    assert mgmt.status_code == 200 and mgmt.headers["content-type"].startswith("application/json")
    doc = mgmt.json()
    assert "data" not in doc and ("swagger" in doc or "openapi" in doc)
    assert "/identities" in doc["paths"] and "/identities/{id}" in doc["paths"]
    assert "post" in doc["paths"]["/identities"]
    client_doc = client.get(CLIENT + "/specs/edge-client/spec").json()
    assert "/authenticate" in client_doc["paths"]
    assert "/identities" not in client_doc["paths"]


def test_summary(admin):
    r = admin.get("/summary")
    assert r.status_code == 200
    body = r.json()
    assert body["meta"] is None
    data = body["data"]
    assert set(data) == SUMMARY_KEYS
    assert all(isinstance(v, int) for v in data.values())
    assert data["identityTypes"] == 2 and data["configTypes"] == 5 and data["authPolicies"] == 1
    assert data["identities"] == 1 and data["authenticators"] == 1 and data["apiSessions"] == 1
    assert data["postureCheckTypes"] in (0, 5)
    admin.create("services", {"name": "counted", "encryptionRequired": True})
    data = admin.get("/summary").json()["data"]
    assert data["services"] == data["services.edge"] == 1


def test_summary_is_admin_only(admin, anon):
    assert_error(anon.get("/summary"), 401, "UNAUTHORIZED")
    iid = admin.create("identities", {"name": "someone", "type": "User", "isAdmin": False})
    admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "someone", "password": "Secret-pw1"}
    )
    user = Api(admin.client, MGMT).login("someone", "Secret-pw1")
    assert_error(user.get("/summary"), 401, "UNAUTHORIZED")


def test_summary_is_not_on_the_client_api(admin):
    assert_error(admin.as_prefix(CLIENT).get("/summary"), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    "path", ["/.well-known/est/cacerts", MGMT + "/.well-known/est/cacerts", CLIENT + "/.well-known/est/cacerts"]
)
def test_cacerts_bundle(client, ctl, path):
    r = client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/pkcs7-mime")
    certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(r.content))
    subjects = {c.subject for c in certs}
    from cryptography import x509

    want = {x509.load_pem_x509_certificate(ctl.state[k].encode()).subject for k in ("root_cert", "signer_cert")}
    assert want <= subjects


def test_network_jwts(client):
    r = client.get(CLIENT + "/network-jwts")
    assert r.status_code == 200
    data = r.json()["data"]
    assert data[0]["name"] == "default" and data[0]["token"].count(".") == 2
