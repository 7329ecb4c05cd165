"""entityChange events and audit rows of the hand-written changes, through the public APIs: an
identity's TOTP enrollment (entity type ``mfas``, upstream's store), its MFA logins, enrollments
created (also by an identity create) and refreshed, an authenticator re-enrolled or its
certificate extended, the caller's own authenticator and its API
session's certificates. Each change is one event with upstream's fields and one audit row with
the diff; no TOTP secret, recovery code, password, enrollment token or private key is in either."""

from __future__ import annotations

import sqlite3

from tests.auth.conftest import code, secret_of
from tests.auth.test_certs import enrolled
from tests.conftest import CLIENT, MGMT, Api
from tests.enroll.conftest import CertClient, csr, keys  # noqa: F401 - keys is a fixture
from tests.events.test_changes import ENTITY_CHANGE_FIELDS
from tests.fastclient import FastClient
from ziti_lite import tls

AUDIT = "/ziti-lite/v1/audit"
# fields of upstream v1.3.3's stores' entities, by JSON name (controller/db: Mfa, Enrollment,
# Authenticator, ApiSessionCertificate) that the states here carry
MFA_FIELDS = {"identityId", "isVerified", "secret", "recoveryCodes"}


def user(client, admin, name: str, password: str) -> tuple[str, str, Api]:
    """A non-admin identity with a password: (identity id, authenticator id, client-API Api)."""
    iid = admin.create("identities", {"name": name, "type": "User", "isAdmin": False})
    aid = admin.create("authenticators", {"method": "updb", "identityId": iid, "username": name,
                                          "password": password})
    return iid, aid, login(client, name, password)


def login(client, name: str, password: str) -> Api:
    r = client.post(CLIENT + "/authenticate?method=password", json={"username": name, "password": password})
    assert r.status_code == 200, r.text
    return Api(client, CLIENT, r.json()["data"]["token"])


def changes_of(events, entity_type: str) -> list[dict]:
    return [e for e in events.of("entityChange", entityType=entity_type) if e["eventType"] != "committed"]


def audit_rows(admin, query: str) -> list[dict]:
    r = admin.as_prefix("").get(AUDIT + query)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def everything_stored(client, events) -> str:
    """The events file and every audit row, as text (read after the controller stopped)."""
    db = sqlite3.connect(client.app.state.controller.settings.db)
    rows = "\n".join(" ".join(str(v) for v in row) for row in db.execute("SELECT * FROM audit_log"))
    db.close()
    return events.path.read_text() + "\n" + rows


def test_totp_enrollment_logins_and_removal(served):
    client, admin, events = served
    password = "Mfa-Passw0rd-1"
    iid, _, me = user(client, admin, "mfa-user", password)
    mfa_id = me.post("/current-identity/mfa").json()["data"]["id"]
    detail = me.get("/current-identity/mfa").json()["data"]
    secret, codes = secret_of(detail), detail["recoveryCodes"]
    assert me.post("/current-identity/mfa/verify", json={"code": code(secret)}).status_code == 200
    # a login now owes the TOTP code: a wrong one fails, a right one passes (both login outcomes)
    partial = login(client, "mfa-user", password)
    assert partial.post("/authenticate/mfa", json={"code": "000000" if code(secret) != "000000" else "111111"}
                        ).status_code == 400
    assert partial.post("/authenticate/mfa", json={"code": codes[0]}).status_code == 200   # a recovery code
    fresh = me.post("/current-identity/mfa/recovery-codes", json={"code": code(secret)})
    assert fresh.status_code == 200, fresh.text
    new_codes = me.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": code(secret)}
                       ).json()["data"]["recoveryCodes"]
    assert me.request("DELETE", "/current-identity/mfa", json={"code": code(secret)}).status_code == 200
    # enrolled again, then removed by an admin on the management API
    second = me.post("/current-identity/mfa").json()["data"]["id"]
    second_secret = secret_of(me.get("/current-identity/mfa").json()["data"])
    assert admin.delete(f"/identities/{iid}/mfa").status_code == 200

    rows = audit_rows(admin, '?filter=entityType="mfas"&sort=createdAt asc&limit=-1')
    # (the recovery code used up at login is in that login's own row)
    assert [r["operation"] for r in rows] == ["enrollMfa", "verifyMfa", "createMfaRecoveryCodes", "deleteMfa",
                                              "enrollMfa", "removeIdentityMfa"]
    for r in rows[:-1]:
        assert r["identityId"] == iid and r["identityName"] == "mfa-user" and r["apiSessionId"]
    assert rows[-1]["identityName"] == "Default Admin" and rows[-1]["entityId"] == second
    assert rows[0]["entityId"] == mfa_id and rows[0]["path"] == CLIENT + "/current-identity/mfa"
    assert rows[0]["changes"]["isVerified"] == {"old": None, "new": False}
    assert rows[0]["changes"]["secret"] == {"old": None, "new": "[redacted]"}
    assert rows[1]["changes"] == {"isVerified": {"old": False, "new": True}}
    assert rows[3]["changes"]["identityId"] == {"old": iid, "new": None}
    logins = audit_rows(admin, '?filter=operation="authenticateMfa"&sort=createdAt asc')
    assert [(r["outcome"], r["reason"]) for r in logins] == [("failure", "MFA_INVALID_TOKEN"), ("success", None)]
    assert all(r["identityId"] == iid and r["entityType"] == "api-sessions" for r in logins)
    assert logins[0]["apiSessionId"] == logins[1]["apiSessionId"] == partial_session_id(admin, partial)
    client.__exit__(None, None, None)

    changes = changes_of(events, "mfas")
    # enroll, verify, a recovery code used up at login, new codes, delete; enroll, admin remove
    assert [e["eventType"] for e in changes] == ["created", "updated", "updated", "updated", "deleted", "created",
                                                 "deleted"]
    for e in changes:
        assert set(e) <= ENTITY_CHANGE_FIELDS and e["entityType"] == "mfas"
        assert set(e.get("finalState") or e["initialState"]) >= MFA_FIELDS | {"id", "createdAt", "updatedAt"}
        for state in (e.get("initialState"), e.get("finalState")):
            if state is not None:
                assert state["secret"] == "[redacted]" and state["recoveryCodes"] == "[redacted]"
    assert changes[0]["metadata"]["authorId"] == iid and changes[0]["metadata"]["authorName"] == "mfa-user"
    assert changes[1]["initialState"]["isVerified"] is False and changes[1]["finalState"]["isVerified"] is True
    assert changes[-1]["metadata"]["authorName"] == "Default Admin"
    auth = [e for e in events.of("authentication") if e["type"] == "mfa"]
    assert [(e["event_type"], e["reason"]) for e in auth] == [("fail", "MFA_INVALID_TOKEN"), ("success", "")]
    assert auth[0]["identity_id"] == iid

    text = everything_stored(client, events)
    for s in [secret, second_secret, password, me.token, partial.token, *codes, *new_codes]:
        assert s not in text, f"a secret is stored: {s[:6]}..."


def partial_session_id(admin, partial: Api) -> str:
    return partial.get("/current-api-session").json()["data"]["id"]


def test_enrollments_and_a_reenrolled_authenticator(served):
    client, admin, events = served
    iid = admin.create("identities", {"name": "enr-dev", "type": "Device", "isAdmin": False})
    r = admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": "2099-01-01T00:00:00Z"})
    assert r.status_code == 201, r.text
    eid = r.json()["data"]["id"]
    first = admin.get(f"/enrollments/{eid}").json()["data"]
    assert admin.post(f"/enrollments/{eid}/refresh", json={"expiresAt": "2098-01-01T00:00:00Z"}).status_code == 200
    second = admin.get(f"/enrollments/{eid}").json()["data"]
    password = "Reenroll-Passw0rd-1"
    uid = admin.create("identities", {"name": "enr-user", "type": "User", "isAdmin": False})
    aid = admin.create("authenticators", {"method": "updb", "identityId": uid, "username": "enr-user",
                                          "password": password})
    r = admin.post(f"/authenticators/{aid}/re-enroll", json={"expiresAt": "2099-01-01T00:00:00Z"})
    assert r.status_code == 201, r.text
    reenrollment = r.json()["data"]["id"]
    third = admin.get(f"/enrollments/{reenrollment}").json()["data"]

    rows = audit_rows(admin, '?filter=operation="createEnrollment" or operation="refreshEnrollment"'
                             ' or operation="reEnrollAuthenticator"&sort=createdAt asc')
    assert [(r["operation"], r["entityType"], r["entityId"]) for r in rows] == [
        ("createEnrollment", "enrollments", eid), ("refreshEnrollment", "enrollments", eid),
        ("reEnrollAuthenticator", "authenticators", aid)]
    assert rows[0]["changes"]["method"] == {"old": None, "new": "ott"}
    assert rows[1]["changes"]["expiresAt"]["new"].startswith("2098-01-01")
    assert rows[1]["changes"].get("token") is None   # redacted on both sides: no visible change
    assert rows[2]["changes"]["username"] == {"old": "enr-user", "new": None}
    client.__exit__(None, None, None)

    enrollments = changes_of(events, "enrollments")
    kinds = [(e["eventType"], (e.get("finalState") or e.get("initialState"))["id"]) for e in enrollments]
    assert ("created", eid) in kinds and ("updated", eid) in kinds and ("created", reenrollment) in kinds
    for e in enrollments:
        assert set(e) <= ENTITY_CHANGE_FIELDS
        for state in (e.get("initialState"), e.get("finalState")):
            if state is not None:
                assert state["token"] == "[redacted]" and state["jwt"] == "[redacted]"
    (deleted,) = [e for e in changes_of(events, "authenticators") if e["eventType"] == "deleted"]
    assert deleted["initialState"]["id"] == aid and deleted["initialState"]["identityId"] == uid

    text = everything_stored(client, events)
    for s in [first["token"], first["jwt"], second["token"], second["jwt"], third["token"], third["jwt"], password]:
        assert s not in text, f"a secret is stored: {s[:6]}..."


def test_own_authenticator_and_api_session_certificates(served, keys):  # noqa: F811 - the fixture
    client, admin, events = served
    old, new = "Own-Passw0rd-1", "Own-Passw0rd-2"
    iid, aid, me = user(client, admin, "own-user", old)
    r = me.patch(f"/current-identity/authenticators/{aid}", json={"currentPassword": old, "password": new})
    assert r.status_code == 200, r.text
    r = me.post("/current-api-session/certificates", json={"csr": csr(keys[0], "own-user-session")})
    assert r.status_code == 201, r.text
    cert_id = r.json()["data"]["id"]
    assert me.delete(f"/current-api-session/certificates/{cert_id}").status_code == 200

    (patched,) = audit_rows(admin, '?filter=operation="patchCurrentIdentityAuthenticator"')
    assert patched["entityType"] == "authenticators" and patched["entityId"] == aid
    assert patched["identityId"] == iid and patched["identityName"] == "own-user"
    assert patched["path"] == CLIENT + f"/current-identity/authenticators/{aid}"
    certs = audit_rows(admin, '?filter=entityType="api-session-certificates"&sort=createdAt asc')
    assert [(r["operation"], r["entityId"]) for r in certs] == [
        ("createCurrentApiSessionCertificate", cert_id), ("deleteCurrentApiSessionCertificate", cert_id)]
    assert certs[0]["changes"]["subject"]["new"] and certs[0]["identityName"] == "own-user"
    # a client-API write of something that is not the caller's credentials is not audited
    assert not audit_rows(admin, '?filter=path contains "/edge/client/v1/sessions"')
    assert MGMT not in patched["path"]
    client.__exit__(None, None, None)

    (updated,) = [e for e in changes_of(events, "authenticators") if e["eventType"] == "updated"]
    assert updated["metadata"]["authorId"] == iid and updated["initialState"]["id"] == aid
    certificate_events = changes_of(events, "apiSessionCertificates")
    assert [e["eventType"] for e in certificate_events] == ["created", "deleted"]
    for e in certificate_events:
        assert set(e) <= ENTITY_CHANGE_FIELDS
        state = e.get("finalState") or e["initialState"]
        assert state["id"] == cert_id and state["subject"] and state["fingerprint"]

    text = everything_stored(client, events)
    key_body = keys[0].split("-----")[2].strip().splitlines()[1]
    for s in [old, new, me.token, key_body]:
        assert s not in text, f"a secret is stored: {s[:6]}..."


def test_an_identitys_enrollment_and_a_certificate_extension(events_app, admin_token, keys):  # noqa: F811
    """An identity created with an ``enrollment`` object: its enrollment is an entityChange of its
    own (the audit row stays the identity create's); extend and extend-verify of the caller's
    certificate authenticator: an ``updated`` authenticators event and an audit row each."""
    application, events = events_app
    wrapper = tls.WithClientCert(application)
    client = FastClient(wrapper)
    client.__enter__()
    certs = CertClient(client, wrapper)
    admin = Api(client, MGMT, admin_token)
    iid, chain = enrolled(certs, admin, keys, "ev-extend")
    me = Api(client, CLIENT, certs.cert_login(chain).json()["data"]["token"])
    auth = me.get("/current-identity/authenticators").json()["data"][0]["id"]
    certs.present(chain)
    r = me.post(f"/current-identity/authenticators/{auth}/extend", json={"clientCertCsr": csr(keys[1], iid)})
    assert r.status_code == 200, r.text
    new_chain = r.json()["data"]["clientCert"]
    r = me.post(f"/current-identity/authenticators/{auth}/extend-verify", json={"clientCert": new_chain})
    assert r.status_code == 200, r.text

    created = audit_rows(admin, f'?filter=entityId="{iid}"')
    assert [(r["operation"], r["entityType"]) for r in created] == [("createIdentity", "identities")]
    rows = audit_rows(admin, f'?filter=entityId="{auth}"&sort=createdAt asc')
    assert [r["operation"] for r in rows] == ["extendCertAuthenticator", "extendVerifyCertAuthenticator"]
    assert all(r["identityId"] == iid and r["entityType"] == "authenticators" for r in rows)
    assert rows[1]["changes"]["fingerprint"]["old"] != rows[1]["changes"]["fingerprint"]["new"]
    client.__exit__(None, None, None)

    (enrollment,) = [e for e in changes_of(events, "enrollments") if e["finalState"]["identityId"] == iid]
    assert enrollment["eventType"] == "created" and enrollment["finalState"]["method"] == "ott"
    assert enrollment["finalState"]["token"] == "[redacted]" and set(enrollment) <= ENTITY_CHANGE_FIELDS
    updated = [e for e in changes_of(events, "authenticators") if e["eventType"] == "updated"
               and e["initialState"]["id"] == auth]
    assert len(updated) == 2 and all(e["metadata"]["authorId"] == iid for e in updated)
    assert updated[1]["initialState"]["fingerprint"] != updated[1]["finalState"]["fingerprint"]


def test_an_identity_delete_reports_what_goes_with_it(served):
    """Deleting an identity deletes its authenticators, enrollments and MFA record first, each an
    entityChange ``deleted`` of its own (secrets redacted), then the identity; one audit row."""
    client, admin, events = served
    iid, aid, me = user(client, admin, "cascade-user", "Cascade-Passw0rd-1")
    r = admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": "2099-01-01T00:00:00Z"})
    assert r.status_code == 201, r.text
    eid = r.json()["data"]["id"]
    mfa_id = me.post("/current-identity/mfa").json()["data"]["id"]
    secret = secret_of(me.get("/current-identity/mfa").json()["data"])
    assert admin.delete(f"/identities/{iid}").status_code == 200
    assert [r["operation"] for r in audit_rows(admin, f'?filter=entityId="{iid}"')] == ["createIdentity",
                                                                                        "deleteIdentity"]
    assert not audit_rows(admin, f'?filter=entityId in ["{aid}", "{eid}", "{mfa_id}"] and operation="deleteIdentity"')
    client.__exit__(None, None, None)

    deleted = [(e["entityType"], e["initialState"]["id"]) for e in events.of("entityChange", eventType="deleted")]
    assert deleted[-4:] == [("authenticators", aid), ("enrollments", eid), ("mfas", mfa_id), ("identities", iid)]
    (gone_mfa,) = [e for e in events.of("entityChange", eventType="deleted") if e["entityType"] == "mfas"]
    assert gone_mfa["initialState"]["secret"] == "[redacted]" and set(gone_mfa) <= ENTITY_CHANGE_FIELDS
    assert secret not in everything_stored(client, events)
