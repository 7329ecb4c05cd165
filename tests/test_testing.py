"""The pytest plugin other projects use (``ziti_lite.testing``), used here as they would, plus
the sample external project in ``examples/pytest_project`` run as its own pytest session."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ziti_lite import testing

pytestmark = pytest.mark.slow   # real servers in subprocesses

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytest_project"


def test_the_shared_controller_is_a_real_server(ziti_lite):
    assert ziti_lite.url.startswith("https://127.0.0.1:") and ziti_lite.edge_port > 0
    assert ziti_lite.admin_user == "admin" and ziti_lite.admin_password
    assert "BEGIN CERTIFICATE" in Path(ziti_lite.ca_file).read_text()
    tls = ssl.create_default_context(cafile=ziti_lite.ca_file)   # the bundle verifies the server
    with urllib.request.urlopen(ziti_lite.url + "/edge/management/v1/version", context=tls) as r:
        assert json.load(r)["data"]["apiVersions"]["edge-management"]["v1"]["path"] == "/edge/management/v1"
    r = ziti_lite.client.get("/current-identity")
    assert r.status == 200 and r.data["isDefaultAdmin"] is True


def test_client_logs_in_again_when_its_session_is_gone(ziti_lite):
    client = testing.Management(ziti_lite.url, ziti_lite.ca_file, ziti_lite.admin_user, ziti_lite.admin_password)
    first = client.login()
    assert client.delete("/current-api-session").status == 200
    assert client.get("/identities").status == 200 and client.token != first


def test_a_delegate_holds_only_its_permissions(ziti_lite):
    reader = ziti_lite.delegate("plugin-reader")   # admin_readonly
    assert reader.get("/identities").status == 200
    assert reader.get("/current-identity").data["permissions"] == ["admin_readonly"]
    refused = reader.post("/services", {"name": "nope", "encryptionRequired": True})
    assert refused.status == 401 and refused.body["error"]["code"] == "UNAUTHORIZED"
    services = ziti_lite.delegate("plugin-services", ["service"])
    created = services.create("services", {"name": "delegated-svc", "encryptionRequired": True})
    assert services.delete(f"/services/{created}").status == 200
    assert services.get("/identities").status == 401


def test_enroll_writes_an_sdk_identity_file(ziti_lite, tmp_path):
    client = ziti_lite.client
    iid = client.create_identity("plugin-device", roles=["devices"])
    path = client.enroll(iid, tmp_path / "device.json")
    doc = json.loads(Path(path).read_text())
    assert set(doc["id"]) == {"key", "cert", "ca"} and all(v.startswith("pem:") for v in doc["id"].values())
    assert doc["ztAPI"] == ziti_lite.url
    r = client.get(f"/identities/{iid}")
    assert r.data["enrollment"] == {} and r.data["roleAttributes"] == ["devices"]
    with pytest.raises(testing.ZitiLiteError, match="no one-time-token enrollment"):
        client.enroll(iid)    # a token is used once
    with pytest.raises(testing.ZitiLiteError, match="create identities failed: 400"):
        client.create_identity("plugin-device")   # names are unique: the API's error is shown


@pytest.mark.parametrize("round", [1, 2])
def test_clean_networks_do_not_share_state(ziti_lite_clean, round):
    client = ziti_lite_clean.client
    assert client.get("/identities?filter=name contains \"clean\"").data == []
    client.create_identity(f"clean-{round}")
    assert os.path.exists(ziti_lite_clean.db)


def test_sample_external_project_passes_with_the_plugin():
    """``examples/pytest_project``: its own rootdir and config, no conftest, the fixtures come from
    the installed entry point."""
    assert not (EXAMPLE / "conftest.py").exists() and not (EXAMPLE / "tests" / "conftest.py").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], cwd=EXAMPLE, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 passed" in r.stdout
