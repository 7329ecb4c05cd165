"""The caller's view: its edge routers, service updates, protocols and API session
certificates (its own only)."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.conftest import assert_error
from ziti_lite import clock
from ziti_lite.pki.csr import build_csr


def _key() -> str:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


def test_current_identity_edge_routers_are_the_verified_ones_it_may_use(net, ctl):
    alice = net.login(net.alice)
    assert alice.get("/current-identity/edge-routers").json()["data"] == []  # er1 never enrolled
    other = net.admin.create("edge-routers", {"name": "er2", "roleAttributes": ["private"]})
    with ctl.store.write():
        ctl.store.execute("UPDATE routers SET is_verified = 1")
    r = alice.get("/current-identity/edge-routers")
    assert r.status_code == 200, r.text
    (er,) = r.json()["data"]
    assert er["id"] == net.router and er["name"] == "er1" and er["hostname"] == ""
    assert er["cost"] is None and er["noTraversal"] is None and er["disabled"] is None
    assert er["syncStatus"] == "SYNC_UNKNOWN" and er["isOnline"] is False and "appData" not in er
    admin_view = net.admin.as_prefix("/edge/client/v1").get("/current-identity/edge-routers").json()["data"]
    assert {e["id"] for e in admin_view} == {net.router, other}


def test_service_updates_move_when_the_service_list_changes(net):
    alice = net.login(net.alice)
    first = alice.get("/current-api-session/service-updates")
    assert first.status_code == 200, first.text
    t0 = first.json()["data"]["lastChangeAt"]
    assert t0 == alice.get("/current-api-session").json()["data"]["createdAt"]
    clock.advance(2)
    assert alice.get("/current-api-session/service-updates").json()["data"]["lastChangeAt"] == t0
    net.admin.create("service-policies", {"name": "dial-hidden", "type": "Dial", "semantic": "AnyOf",
                                          "identityRoles": ["#staff"], "serviceRoles": ["@" + net.hidden]})
    t1 = alice.get("/current-api-session/service-updates").json()["data"]["lastChangeAt"]
    assert t1 > t0
    assert "hidden" in {s["name"] for s in alice.get("/services").json()["data"]}
    # config edits, overrides and the identity's own attributes move it too
    for change in (
        lambda: net.admin.patch(f"/configs/{net.web_config}", json={"data": {"protocols": ["udp"], "addresses": ["x"],
                                                                             "portRanges": [{"low": 1, "high": 1}]}}),
        lambda: net.admin.post(f"/identities/{net.alice[0]}/service-configs",
                               json=[{"serviceId": net.db, "configId": net.web_config}]),
        lambda: net.admin.patch(f"/identities/{net.alice[0]}", json={"roleAttributes": ["staff", "more"]}),
    ):
        clock.advance(2)
        before = alice.get("/current-api-session/service-updates").json()["data"]["lastChangeAt"]
        clock.advance(2)
        assert change().status_code == 200
        after = alice.get("/current-api-session/service-updates").json()["data"]["lastChangeAt"]
        assert after > before


def test_protocols(anon, client):
    r = client.get("/edge/client/v1/protocols")
    assert r.status_code == 200
    assert set(r.json()["data"]) == {"https"} and r.json()["data"]["https"]["address"].endswith(":1280")


def test_api_session_certificates(net):
    alice = net.login(net.alice)
    sid = alice.get("/current-api-session").json()["data"]["id"]
    key = _key()
    r = alice.post("/current-api-session/certificates", json={"csr": build_csr("alice-session", key_pem=key)[0]})
    assert r.status_code == 201, r.text
    data = r.json()["data"]
    leaf = x509.load_pem_x509_certificate(data["certificate"].encode())
    assert data["cas"].count("BEGIN CERTIFICATE") == 2
    uris = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.UniformResourceIdentifier)
    assert uris == [uris[0]] and uris[0].startswith("spiffe://")
    assert uris[0].endswith(f"/identity/{net.alice[0]}/apiSession/{sid}/apiSessionCertificate/{data['id']}")
    life = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert 11 * 3600 < life.total_seconds() <= 12 * 3600 + 60
    detail = alice.get(f"/current-api-session/certificates/{data['id']}").json()["data"]
    assert detail["certificate"] == data["certificate"] and detail["subject"] == "CN=alice-session,O=OpenZiti"
    assert len(detail["fingerprint"]) == 40 and detail["validTo"] > detail["validFrom"]
    listed = alice.get("/current-api-session/certificates").json()
    assert [c["id"] for c in listed["data"]] == [data["id"]]

    # another API session (same identity or another) sees none of them
    for other in (net.login(net.alice), net.login(net.bob)):
        assert other.get("/current-api-session/certificates").json()["data"] == []
        assert_error(other.get(f"/current-api-session/certificates/{data['id']}"), 404, "NOT_FOUND")
        assert_error(other.delete(f"/current-api-session/certificates/{data['id']}"), 404, "NOT_FOUND")

    assert_error(alice.post("/current-api-session/certificates", json={"csr": "garbage"}), 400, "COULD_NOT_PROCESS_CSR")
    assert_error(alice.post("/current-api-session/certificates", json={}), 400, "COULD_NOT_PROCESS_CSR")
    assert alice.delete(f"/current-api-session/certificates/{data['id']}").status_code == 200
    assert_error(alice.get(f"/current-api-session/certificates/{data['id']}"), 404, "NOT_FOUND")


def test_certificates_end_with_their_api_session(net, ctl):
    alice = net.login(net.alice)
    r = alice.post("/current-api-session/certificates", json={"csr": build_csr("x", key_pem=_key())[0]})
    assert r.status_code == 201
    alice.delete("/current-api-session")
    assert ctl.store.value("SELECT count(*) FROM api_session_certificates") == 0


def test_everything_needs_a_session(anon, client):
    for method, path in (("GET", "/services"), ("POST", "/sessions"), ("GET", "/sessions"),
                         ("GET", "/current-identity/edge-routers"), ("GET", "/current-api-session/service-updates"),
                         ("GET", "/current-api-session/certificates"), ("POST", "/posture-response")):
        assert_error(client.request(method, "/edge/client/v1" + path, headers={"zt-session": ""}), 401, "UNAUTHORIZED")
