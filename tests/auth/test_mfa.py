"""TOTP enrollment of the current identity (auth-enrollment-pki.md §4.2–§4.5), row by row on
both APIs, plus the admin reset."""

from __future__ import annotations

import re
import struct
import urllib.parse
import zlib

import pytest

from tests.auth.conftest import code, enroll_totp, secret_of
from tests.conftest import CLIENT, MGMT, assert_error

RECOVERY = re.compile(r"[A-Z2-7]{6}")


def wrong(secret: str) -> str:
    """A six-digit code that is not valid in the window around now."""
    valid = {code(secret, s) for s in range(-2, 3)}
    return next(c for c in (f"{n:06d}" for n in range(1_000_000)) if c not in valid)


@pytest.fixture(params=[CLIENT, MGMT], ids=["client", "management"])
def user(request, net):
    """A fresh, fully authenticated user on one API: (api, identity id, identity name)."""
    ident, username = net.user(name=f"Jane Doe {request.param.split('/')[2]}")
    return net.login(username, prefix=request.param), ident


def detail(api) -> dict:
    r = api.get("/current-identity/mfa")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, tag = struct.unpack(">I4s", data[8:16])
    assert tag == b"IHDR"
    return struct.unpack(">II", data[16:24])


# ---------------------------------------------------------------- POST /current-identity/mfa
def test_create_then_conflict(user):
    api, _ = user
    r = api.post("/current-identity/mfa")
    assert r.status_code == 201
    body = r.json()
    assert body == {"data": {"id": body["data"]["id"], "_links": {"self": {"href": "./current-identity/mfa"}}},
                    "meta": {}}
    assert_error(api.post("/current-identity/mfa"), 409, "MFA_EXISTS")


# ---------------------------------------------------------------- GET /current-identity/mfa
def test_detail_404_when_none(user):
    api, _ = user
    assert_error(api.get("/current-identity/mfa"), 404, "NOT_FOUND")


def test_detail_while_unverified_shows_secret_and_codes(user, net):
    api, ident = user
    mfa_id = api.post("/current-identity/mfa").json()["data"]["id"]
    d = detail(api)
    assert d["id"] == mfa_id and d["isVerified"] is False
    assert set(d["_links"]) == {"self", "current-identity", "verify", "qr"}
    assert d["_links"]["qr"] == {"href": "./current-identity/mfa/qr-code"}
    name = net.admin.get(f"/identities/{ident}").json()["data"]["name"]
    secret = secret_of(d)
    assert re.fullmatch(r"[A-Z2-7]{16}", secret)          # 10 random bytes, base32, no padding
    assert d["provisioningUrl"] == f"otpauth://totp/openziti.io:{name}?issuer=openziti.io&secret={secret}"
    assert len(d["recoveryCodes"]) == 20 and all(RECOVERY.fullmatch(c) for c in d["recoveryCodes"])
    assert len(set(d["recoveryCodes"])) == 20


# ---------------------------------------------------------------- GET /current-identity/mfa/qr-code
def test_qr_code_png_only_while_unverified(user):
    api, _ = user
    assert_error(api.get("/current-identity/mfa/qr-code"), 404, "NOT_FOUND")
    api.post("/current-identity/mfa")
    r = api.get("/current-identity/mfa/qr-code")
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/png"
    assert png_size(r.content) == (256, 256)
    assert zlib.decompress(r.content[r.content.index(b"IDAT") + 4:])  # a real deflate stream
    secret = secret_of(detail(api))
    api.post("/current-identity/mfa/verify", json={"code": code(secret)})
    assert_error(api.get("/current-identity/mfa/qr-code"), 404, "NOT_FOUND")


def test_qr_code_encodes_the_provisioning_url(user):
    import segno

    from ziti_lite.auth import mfa
    api, _ = user
    api.post("/current-identity/mfa")
    url = detail(api)["provisioningUrl"]
    assert api.get("/current-identity/mfa/qr-code").content == mfa.qr_png(url)
    assert segno.make(url, error="m").error == "M"


# ---------------------------------------------------------------- POST /current-identity/mfa/verify
def test_verify(user, net):
    api, ident = user
    assert_error(api.post("/current-identity/mfa/verify", json={"code": "123456"}), 404, "NOT_FOUND")
    api.post("/current-identity/mfa")
    d = detail(api)
    secret = secret_of(d)
    assert_error(api.post("/current-identity/mfa/verify", json={"code": wrong(secret)}), 400, "MFA_INVALID_TOKEN")
    # verify takes TOTP codes only, not recovery codes
    assert_error(api.post("/current-identity/mfa/verify", json={"code": d["recoveryCodes"][0]}), 400,
                 "MFA_INVALID_TOKEN")
    assert net.admin.get(f"/identities/{ident}").json()["data"]["isMfaEnabled"] is False
    r = api.post("/current-identity/mfa/verify", json={"code": code(secret)})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    s = api.get("/current-api-session").json()["data"]
    assert (s["isMfaRequired"], s["isMfaComplete"], s["authQueries"]) == (True, True, [])
    assert net.admin.get(f"/identities/{ident}").json()["data"]["isMfaEnabled"] is True
    assert_error(api.post("/current-identity/mfa/verify", json={"code": code(secret)}), 404, "NOT_FOUND")


def test_secret_never_returned_after_verification(user):
    api, _ = user
    api.post("/current-identity/mfa")
    d = detail(api)
    secret = secret_of(d)
    api.post("/current-identity/mfa/verify", json={"code": code(secret)})
    after = api.get("/current-identity/mfa")
    d2 = after.json()["data"]
    assert d2["isVerified"] is True and "provisioningUrl" not in d2 and d2["recoveryCodes"] is None
    assert set(d2["_links"]) == {"self", "current-identity", "recovery-codes"}
    assert secret not in after.text
    for path in ("/current-identity", "/current-api-session"):
        assert secret not in api.get(path).text


# ---------------------------------------------------------------- GET /current-identity/mfa/recovery-codes
def test_read_recovery_codes(user):
    api, _ = user
    assert_error(api.get("/current-identity/mfa/recovery-codes"), 404, "NOT_FOUND")
    api.post("/current-identity/mfa")
    d = detail(api)
    secret = secret_of(d)
    assert_error(api.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": code(secret)}),
                 404, "NOT_FOUND")   # unverified
    api.post("/current-identity/mfa/verify", json={"code": code(secret)})
    assert_error(api.get("/current-identity/mfa/recovery-codes"), 400, "MFA_INVALID_TOKEN")
    assert_error(api.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": wrong(secret)}),
                 400, "MFA_INVALID_TOKEN")
    assert_error(api.get("/current-identity/mfa/recovery-codes",
                         headers={"mfa-validation-code": d["recoveryCodes"][0]}), 400, "MFA_INVALID_TOKEN")
    r = api.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": code(secret)})
    assert r.status_code == 200
    body = r.json()["data"]
    assert body["recoveryCodes"] == d["recoveryCodes"]
    assert {"id", "createdAt", "updatedAt", "_links", "tags"} <= set(body)
    # the code may come as a JSON body too (a GET with a body, as upstream reads it)
    r = api.request("GET", "/current-identity/mfa/recovery-codes", content=b'{"code":"%s"}' % code(secret).encode(),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["data"]["recoveryCodes"] == d["recoveryCodes"]


# ---------------------------------------------------------------- POST /current-identity/mfa/recovery-codes
@pytest.mark.parametrize("how", ["totp-body", "totp-header", "recovery-body"])
def test_regenerate_recovery_codes(user, how):
    api, _ = user
    assert_error(api.post("/current-identity/mfa/recovery-codes", json={"code": "123456"}), 404, "NOT_FOUND")
    secret, old = enroll_totp(api)
    assert_error(api.post("/current-identity/mfa/recovery-codes", json={"code": wrong(secret)}), 400,
                 "MFA_INVALID_TOKEN")
    if how == "totp-body":
        r = api.post("/current-identity/mfa/recovery-codes", json={"code": code(secret)})
    elif how == "totp-header":
        r = api.post("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": code(secret)})
    else:
        r = api.post("/current-identity/mfa/recovery-codes", json={"code": old[5]})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}   # codes are not returned here
    new = api.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": code(secret)}).json()
    new = new["data"]["recoveryCodes"]
    assert len(new) == 20 and all(RECOVERY.fullmatch(c) for c in new)
    assert not set(new) & set(old)
    # every old code is gone
    for c in old[:3]:
        assert_error(api.post("/authenticate/mfa", json={"code": c}), 400, "MFA_INVALID_TOKEN")


def test_recovery_code_is_used_once_and_removed(user):
    api, _ = user
    secret, codes = enroll_totp(api)
    assert api.post("/authenticate/mfa", json={"code": codes[3]}).status_code == 200
    assert_error(api.post("/authenticate/mfa", json={"code": codes[3]}), 400, "MFA_INVALID_TOKEN")
    left = api.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": code(secret)})
    left = left.json()["data"]["recoveryCodes"]
    assert len(left) == 19 and codes[3] not in left
    assert_error(api.post("/authenticate/mfa", json={"code": codes[4].lower()}), 400, "MFA_INVALID_TOKEN")


# ---------------------------------------------------------------- DELETE /current-identity/mfa
def test_delete_unverified_needs_no_code(user):
    api, _ = user
    assert_error(api.delete("/current-identity/mfa"), 404, "NOT_FOUND")
    api.post("/current-identity/mfa")
    assert api.delete("/current-identity/mfa").status_code == 200
    assert_error(api.get("/current-identity/mfa"), 404, "NOT_FOUND")
    assert api.post("/current-identity/mfa").status_code == 201   # may start again


@pytest.mark.parametrize("how", ["totp", "recovery"])
def test_delete_verified_needs_a_code(user, net, how):
    api, ident = user
    secret, codes = enroll_totp(api)
    assert_error(api.delete("/current-identity/mfa"), 400, "MFA_INVALID_TOKEN")
    assert_error(api.delete("/current-identity/mfa", headers={"mfa-validation-code": wrong(secret)}), 400,
                 "MFA_INVALID_TOKEN")
    given = code(secret) if how == "totp" else codes[0]
    assert api.delete("/current-identity/mfa", headers={"mfa-validation-code": given}).status_code == 200
    assert_error(api.get("/current-identity/mfa"), 404, "NOT_FOUND")
    assert net.admin.get(f"/identities/{ident}").json()["data"]["isMfaEnabled"] is False
    # logins no longer owe a code
    username = net.admin.get(f"/identities/{ident}").json()["data"]["authenticators"]["updb"]["username"]
    assert net.authenticate(username).json()["data"]["authQueries"] == []


def test_delete_needs_a_full_session(net):
    _, username = net.user()
    secret, _ = enroll_totp(net.login(username))
    partial = net.login(username)
    assert_error(partial.delete("/current-identity/mfa", headers={"mfa-validation-code": code(secret)}), 401,
                 "UNAUTHORIZED")


# ---------------------------------------------------------------- DELETE /identities/{id}/mfa (admin)
def test_admin_removes_any_mfa(net, admin):
    ident, username = net.user()
    api = net.login(username)
    assert_error(admin.delete(f"/identities/{ident}/mfa"), 404, "NOT_FOUND")
    assert_error(admin.delete("/identities/no-such-identity/mfa"), 404, "NOT_FOUND")
    api.post("/current-identity/mfa")
    assert admin.delete(f"/identities/{ident}/mfa").status_code == 200   # unverified
    secret, _ = enroll_totp(api)
    partial = net.login(username)
    assert admin.delete(f"/identities/{ident}/mfa").status_code == 200   # verified
    assert admin.get(f"/identities/{ident}").json()["data"]["isMfaEnabled"] is False
    assert api.get("/current-identity").status_code == 200                # sessions untouched
    assert partial.get("/current-api-session").status_code == 200
    assert net.authenticate(username).json()["data"]["authQueries"] == []
    assert_error(api.as_prefix(MGMT).delete(f"/identities/{ident}/mfa"), 401, "UNAUTHORIZED")  # not an admin


def test_provisioning_url_escapes_the_query_only():
    from ziti_lite.auth import mfa
    url = mfa.provisioning_url("openziti.io", "Default Admin", "JBSWY3DPEHPK3PXP")
    assert url == "otpauth://totp/openziti.io:Default Admin?issuer=openziti.io&secret=JBSWY3DPEHPK3PXP"
    url = mfa.provisioning_url("my ziti&co", "x", "ABC")
    assert urllib.parse.parse_qs(urllib.parse.urlparse(url).query) == {"issuer": ["my ziti&co"], "secret": ["ABC"]}


def test_totp_parameters_match_a_standard_authenticator():
    """SHA1, 6 digits, 30 s steps: RFC 6238's SHA1 test vector (truncated to 6 digits)."""
    import base64
    import datetime as dt

    from ziti_lite.auth import mfa
    secret = base64.b32encode(b"12345678901234567890").decode()
    t = mfa.totp(secret)
    assert t.at(dt.datetime.fromtimestamp(59, dt.UTC)) == "287082"
    assert t.at(dt.datetime.fromtimestamp(1111111109, dt.UTC)) == "081804"
    assert len(mfa.new_secret()) == 16
