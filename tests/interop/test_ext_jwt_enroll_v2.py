"""Enrollment from an identity provider with the ``ziti`` CLI v2.0.3, on ziti-lite and on the real
v2.0.3 controller (``ziti edge quickstart``), side by side.

On each: ``ziti edge create ext-jwt-signer ... --enroll-to-cert --enroll-to-token
--enroll-name-claims-selector ...`` with the tests' own signing certificate, ``ziti edge list
ext-jwt-signers`` (it reads ``targetToken`` unguarded: it panicked on ziti-lite while that was
not shown), the signer's detail and its client-API view, then ``POST /enroll/token`` with JWTs
the test signs: to a certificate (which then logs in) and to token logins (the JWT then logs
in), the same ``sub`` again, no Authorization header, a name already taken; last ``ziti edge
update ext-jwt-signer`` of a mode, the auth policy (by name) and the name selector. The outcomes
must be alike but for the documented differences (v2.0.3's HTTP 602 and 500, where ziti-lite
answers 400).

Skipped, saying why, without the v2.0.3 binary (the ``ziti2`` fixture)."""

from __future__ import annotations

import re
import shutil
import ssl
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.auth.test_extjwt import AUDIENCE, ISSUER, Keys, claims, fp_kid, pem, sign
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, MGMT
from tests.enroll.conftest import csr
from tests.interop.conftest import start_quickstart
from tests.interop.test_ziti_cli_v2 import V2, Cli
from ziti_lite import testing

pytestmark = pytest.mark.interop

SIGNER = "cli2-idp"
ENROLL_FIELDS = ("enrollToCertEnabled", "enrollToTokenEnabled", "enrollNameClaimsSelector",
                 "enrollAttributeClaimsSelector", "enrollAuthPolicyId", "targetToken", "useExternalId",
                 "claimsProperty", "kid")


def _token(sub: str) -> str:
    return sign(Keys.main, fp_kid(), claims(sub, preferred_username=f"idp-{sub}", groups=["idp-staff"]))


def _answer(r: httpx.Response) -> tuple[int, str | None, list[str]]:
    try:
        body = r.json()
    except ValueError:
        return r.status_code, None, []
    data = body.get("data") if isinstance(body, dict) else None
    code = (body.get("error") or {}).get("code") if isinstance(body, dict) else None
    return r.status_code, code, sorted(data) if isinstance(data, dict) else []


def scenario(url: str, user: str, password: str, cli: Cli, tmp: Path) -> dict:
    """Everything one controller answers, in a form comparable with the other's."""
    tmp.mkdir(parents=True, exist_ok=True)
    cli.run("edge", "login", url, "-u", user, "-p", password, "-y")
    cert_file = tmp / "idp.pem"
    cert_file.write_text(pem(Keys.cert))
    out: dict = {}
    rc, text = cli.run("edge", "create", "ext-jwt-signer", SIGNER, ISSUER, "-f", str(cert_file), "--kid", fp_kid(),
                       "-a", AUDIENCE, "--target-token", "ID", "--enroll-to-cert", "--enroll-to-token",
                       "--enroll-name-claims-selector", "/preferred_username",
                       "--enroll-attr-claims-selector", "groups", ok=False)
    out["create"] = (rc, re.fullmatch(r"\s*\S+\s*", text) is not None, text[-400:])   # it prints the new id
    rc, text = cli.run("edge", "list", "ext-jwt-signers", f'name="{SIGNER}"', ok=False)
    out["list"] = (rc, all(s in text for s in ("TargetToken", "ID", "/preferred_username", "Enroll To Cert")),
                   "panic" in text, text[-600:])
    http = httpx.Client(base_url=url, verify=False, timeout=30)   # loopback, each controller's own PKI
    try:
        token = http.post(MGMT + "/authenticate?method=password",
                          json={"username": user, "password": password}).json()["data"]["token"]
        admin = {"zt-session": token}
        [detail] = http.get(MGMT + "/external-jwt-signers", params={"filter": f'name="{SIGNER}"'},
                            headers=admin).json()["data"]
        out["detail"] = {k: detail.get(k, "<absent>") for k in ENROLL_FIELDS}
        client_items = [x for x in http.get(CLIENT + "/external-jwt-signers").json()["data"] if x["name"] == SIGNER]
        out["client view"] = sorted(client_items[0]) if client_items else None
        out["enroll"] = _enrollments(http, admin, url, tmp)
        http.post(MGMT + "/auth-policies", headers=admin, json={
            "name": "cli2-enrolled", "secondary": {"requireTotp": False},
            "primary": {"cert": {"allowed": True, "allowExpiredCerts": False},
                        "extJwt": {"allowed": True, "allowedSigners": []},
                        "updb": {"allowed": False, "lockoutDurationMinutes": 0, "maxAttempts": 0,
                                 "minPasswordLength": 5, "requireMixedCase": False, "requireNumberChar": False,
                                 "requireSpecialChar": False}}})
        rc, text = cli.run("edge", "update", "ext-jwt-signer", SIGNER, "--enroll-to-token=false",
                           "--enroll-auth-policy", "cli2-enrolled", "--enroll-name-claims-selector", "email", ok=False)
        [detail] = http.get(MGMT + "/external-jwt-signers", params={"filter": f'name="{SIGNER}"'},
                            headers=admin).json()["data"]
        policy = http.get(MGMT + f"/auth-policies/{detail.get('enrollAuthPolicyId')}", headers=admin).json()
        out["update"] = (rc, {k: detail.get(k, "<absent>") for k in ENROLL_FIELDS if k != "enrollAuthPolicyId"},
                         (policy.get("data") or {}).get("name"))
    finally:
        http.close()
    return out


def _enrollments(http: httpx.Client, admin: dict, url: str, tmp: Path) -> dict:
    out: dict = {}
    bearer = {"authorization": f"Bearer {_token('tok-user')}"}
    out["to token"] = _answer(http.post(CLIENT + "/enroll/token", json={}, headers=bearer))
    out["token login"] = http.post(CLIENT + "/authenticate?method=ext-jwt", json={}, headers=bearer).status_code
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    r = http.post(CLIENT + "/enroll/token", json={"clientCsr": csr(key_pem, "enrollToCert")},
                  headers={"authorization": f"Bearer {_token('cert-user')}"})
    out["to cert"] = _answer(r)
    if r.status_code == 200:
        (tmp / "cert.pem").write_text(r.json()["data"]["cert"])
        (tmp / "key.pem").write_text(key_pem)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE   # loopback, each controller's own PKI
        tls.load_cert_chain(str(tmp / "cert.pem"), str(tmp / "key.pem"))
        with httpx.Client(base_url=url, verify=tls, timeout=30) as with_cert:
            out["cert login"] = with_cert.post(CLIENT + "/authenticate?method=cert", json={}).status_code
    ident = http.get(MGMT + "/identities", params={"filter": 'externalId="cert-user"'}, headers=admin).json()["data"]
    out["identity"] = [(x["name"], x["roleAttributes"], x["authPolicyId"]) for x in ident]
    out["same sub"] = _answer(http.post(CLIENT + "/enroll/token", json={}, headers=bearer))
    out["no header"] = _answer(http.post(CLIENT + "/enroll/token", json={}))
    http.post(MGMT + "/identities", json={"name": "idp-taken", "type": "User", "isAdmin": False}, headers=admin)
    out["name taken"] = _answer(http.post(CLIENT + "/enroll/token", json={},
                                          headers={"authorization": f"Bearer {_token('taken')}"}))
    return out


# where v2.0.3 has a bug no client can depend on (tests/interop/differences.tsv)
DOCUMENTED = {"no header": ((602, "COULD_NOT_VALIDATE"), (400, "COULD_NOT_VALIDATE")),
              "name taken": ((500, "UNHANDLED"), (400, "COULD_NOT_VALIDATE"))}


def test_signer_cli_and_enrollment_answer_as_upstream(ziti2, template_db, tmp_path):
    db = tmp_path / "lite.db"
    shutil.copy(template_db, db)
    ctl = testing.start(db, ADMIN_PASSWORD, edge=False)
    try:
        ours = scenario(ctl.url, ADMIN_USER, ADMIN_PASSWORD, Cli(ziti2, tmp_path / "home-lite"), tmp_path / "lite")
    finally:
        ctl.stop()
    assert ours["create"][:2] == (0, True), ours["create"]
    assert ours["list"][:3] == (0, True, False), ours["list"]
    assert ours["enroll"]["to token"][0] == 200 and ours["enroll"]["cert login"] == 200, ours["enroll"]
    assert ours["update"][0] == 0 and ours["update"][2] == "cli2-enrolled", ours["update"]
    assert "enrollToTokenEnabled" not in ours["update"][1] or ours["update"][1]["enrollToTokenEnabled"] == "<absent>"
    real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
    try:
        theirs = scenario(real.url, real.admin_user, real.admin_password, Cli(ziti2, tmp_path / "home-real"),
                          tmp_path / "real")
    finally:
        real.stop()
    for key in ("create", "list"):
        assert ours[key][:-1] == theirs[key][:-1], (key, ours[key], theirs[key])
    assert ours["detail"] == theirs["detail"]
    assert ours["client view"] == theirs["client view"]
    assert ours["update"] == theirs["update"]
    for step, answer in theirs["enroll"].items():
        if step in DOCUMENTED:
            upstream, lite = DOCUMENTED[step]
            assert answer[:2] == upstream or answer == ours["enroll"][step], (step, answer)
            assert ours["enroll"][step][:2] == lite, (step, ours["enroll"][step])
        else:
            assert ours["enroll"][step] == answer, (step, ours["enroll"][step], answer)
