"""Tests of "our" automation against a real OpenZiti management API, served by ziti-lite."""

import json
import ssl
import urllib.request


def provision(client, name):
    """The code under test: a service its users may dial, hosted by one identity."""
    client.create("services", {"name": name, "encryptionRequired": True, "roleAttributes": [name]})
    client.create("service-policies", {"name": f"{name}-dial", "type": "Dial", "semantic": "AnyOf",
                                       "identityRoles": [f"#{name}-users"], "serviceRoles": [f"#{name}"]})
    client.create("service-policies", {"name": f"{name}-bind", "type": "Bind", "semantic": "AnyOf",
                                       "identityRoles": [f"#{name}-hosts"], "serviceRoles": [f"#{name}"]})


def test_provisioning_on_the_shared_controller(ziti_lite):
    client = ziti_lite.client
    provision(client, "billing")
    user = client.create_identity("billing-user-1", roles=["billing-users"])
    r = client.get(f"/identities/{user}/services")
    assert r.status == 200 and [s["name"] for s in r.data] == ["billing"]


def test_an_enrolled_identity_logs_in_with_its_certificate(ziti_lite, tmp_path):
    client = ziti_lite.client
    iid = client.create_identity("device-1")
    identity = json.loads(open(client.enroll(iid, tmp_path / "device-1.json")).read())
    assert identity["ztAPI"] == ziti_lite.url
    pem = {k: v.removeprefix("pem:") for k, v in identity["id"].items()}
    (tmp_path / "cert.pem").write_text(pem["cert"])
    (tmp_path / "key.pem").write_text(pem["key"])
    tls = ssl.create_default_context(cadata=pem["ca"])
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    req = urllib.request.Request(ziti_lite.url + "/edge/client/v1/authenticate?method=cert", data=b"{}",
                                 method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, context=tls) as r:
        assert json.load(r)["data"]["identity"]["id"] == iid


def test_each_clean_network_starts_empty(ziti_lite_clean):
    assert ziti_lite_clean.client.get("/services").data == []
    provision(ziti_lite_clean.client, "reports")


def test_and_is_not_shared(ziti_lite_clean):
    assert ziti_lite_clean.client.get("/services").data == []
    assert ziti_lite_clean.client.get("/service-policies").data == []
