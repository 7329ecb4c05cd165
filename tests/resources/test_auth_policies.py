"""Auth policies: the default policy, normalisation, nested PATCH, signer references, deletes."""

from __future__ import annotations

import copy

from tests.conftest import assert_error
from tests.resources.test_cas_enrollments import user  # noqa: F401  (fixture)

PRIMARY = {
    "cert": {"allowed": True, "allowExpiredCerts": False},
    "extJwt": {"allowed": False, "allowedSigners": []},
    "updb": {"allowed": True, "lockoutDurationMinutes": 10, "maxAttempts": 3, "minPasswordLength": 8,
             "requireMixedCase": True, "requireNumberChar": False, "requireSpecialChar": True},
}


def policy(name: str, **over) -> dict:
    body = {"name": name, "primary": copy.deepcopy(PRIMARY), "secondary": {"requireTotp": False}}
    body.update(over)
    return body


def signer(admin, name: str) -> str:
    return admin.create("external-jwt-signers", {"name": name, "issuer": f"https://{name}", "audience": "a",
                                                 "enabled": True, "jwksEndpoint": f"https://{name}/jwks"})


def test_default_policy(admin):
    d = admin.get("/auth-policies/default").json()["data"]
    assert d["name"] == "Default"
    assert d["primary"] == {
        "cert": {"allowed": True, "allowExpiredCerts": True},
        "extJwt": {"allowed": True, "allowedSigners": []},
        "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 0, "minPasswordLength": 5,
                 "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False}}
    assert d["secondary"]["requireTotp"] is False and d["secondary"].get("requireExtJwtSigner") is None
    body = admin.get("/auth-policies").json()
    assert "default" in [x["id"] for x in body["data"]]
    assert "primary.updb.maxAttempts" in body["meta"]["filterableFields"]


def test_create_normalises(admin):
    body = policy("normalised")
    body["primary"]["updb"].update(lockoutDurationMinutes=-4, maxAttempts=-1, minPasswordLength=2)
    id = admin.create("auth-policies", body)
    d = admin.get(f"/auth-policies/{id}").json()["data"]
    assert d["primary"]["updb"]["lockoutDurationMinutes"] == 0
    assert d["primary"]["updb"]["maxAttempts"] == 0
    assert d["primary"]["updb"]["minPasswordLength"] == 5
    assert d["primary"]["cert"] == {"allowed": True, "allowExpiredCerts": False}
    assert d["_links"] == {"self": {"href": f"./auth-policies/{id}"}}


def test_nested_patch_changes_only_sent_leaves(admin):
    s = signer(admin, "patch-signer")
    id = admin.create("auth-policies", policy("patchy"))
    r = admin.patch(f"/auth-policies/{id}", json={"primary": {"updb": {"minPasswordLength": 12,
                                                                        "requireNumberChar": True}}})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = admin.get(f"/auth-policies/{id}").json()["data"]
    expected = copy.deepcopy(PRIMARY)
    expected["updb"].update(minPasswordLength=12, requireNumberChar=True)
    assert d["primary"] == expected and d["name"] == "patchy"
    # null leaves are ignored; lists are replaced; secondary keeps what was not sent
    admin.patch(f"/auth-policies/{id}", json={"primary": {"extJwt": {"allowedSigners": [s], "allowed": None},
                                                          "cert": None},
                                              "secondary": {"requireExtJwtSigner": s}})
    d = admin.get(f"/auth-policies/{id}").json()["data"]
    assert d["primary"]["extJwt"] == {"allowed": False, "allowedSigners": [s]}
    assert d["primary"]["cert"] == PRIMARY["cert"]
    assert d["secondary"] == {"requireTotp": False, "requireExtJwtSigner": s}
    admin.patch(f"/auth-policies/{id}", json={"secondary": {"requireTotp": True}})
    assert admin.get(f"/auth-policies/{id}").json()["data"]["secondary"] == {"requireTotp": True,
                                                                             "requireExtJwtSigner": s}
    # a negative patched value is normalised too
    admin.patch(f"/auth-policies/{id}", json={"primary": {"updb": {"maxAttempts": -7}}})
    assert admin.get(f"/auth-policies/{id}").json()["data"]["primary"]["updb"]["maxAttempts"] == 0
    # upstream's auth policy store does not publish its signer set: the filter is refused
    r = admin.get("/auth-policies", params={"filter": f'anyOf(primary.extJwt.allowedSigners) = "{s}"'})
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_FILTER"
    found = admin.get("/auth-policies", params={"filter": "primary.updb.minPasswordLength = 12"}).json()
    assert [x["id"] for x in found["data"]] == [id]


def test_put_replaces_everything(admin):
    s = signer(admin, "put-signer")
    id = admin.create("auth-policies", policy("put-me", secondary={"requireTotp": True, "requireExtJwtSigner": s},
                                              tags={"k": "v"}))
    body = policy("put-done")
    assert admin.put(f"/auth-policies/{id}", json=body).status_code == 200
    d = admin.get(f"/auth-policies/{id}").json()["data"]
    assert d["name"] == "put-done" and d["tags"] == {}
    assert d["secondary"]["requireTotp"] is False and d["secondary"].get("requireExtJwtSigner") is None
    partial = policy("partial")
    del partial["primary"]["updb"]["maxAttempts"]
    err = assert_error(admin.put(f"/auth-policies/{id}", json=partial), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "primary.updb.maxAttempts"


def test_default_policy_can_be_updated(admin):
    assert admin.patch("/auth-policies/default", json={"primary": {"updb": {"maxAttempts": 4}}}).status_code == 200
    assert admin.get("/auth-policies/default").json()["data"]["primary"]["updb"]["maxAttempts"] == 4


def test_validation(admin):
    # values of the wrong JSON type fail upstream's unmarshalling: COULD_NOT_PARSE_BODY naming the field
    err = assert_error(admin.post("/auth-policies", json=policy("bad", primary="nope")), 400, "COULD_NOT_PARSE_BODY")
    assert "primary" in err["cause"]["message"]
    bad = policy("bad")
    bad["primary"]["updb"]["maxAttempts"] = "three"
    err = assert_error(admin.post("/auth-policies", json=bad), 400, "COULD_NOT_PARSE_BODY")
    assert "primary.updb.maxAttempts" in err["cause"]["message"]
    err = assert_error(admin.post("/auth-policies", json=policy("bad", secondary={})), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "secondary.requireTotp"
    admin.create("auth-policies", policy("taken"))
    err = assert_error(admin.post("/auth-policies", json=policy("taken")), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"
    id = admin.create("auth-policies", policy("renamable"))
    err = assert_error(admin.patch(f"/auth-policies/{id}", json={"name": "taken"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"
    assert_error(admin.patch(f"/auth-policies/{id}", json={"name": ""}), 400, "COULD_NOT_VALIDATE")


def test_signer_references_must_exist(admin):
    body = policy("dangling")
    s = admin.create("external-jwt-signers", {"name": "real", "enabled": True, "issuer": "https://real.example",
                                              "audience": "a", "jwksEndpoint": "https://real.example/jwks"})
    body["primary"]["extJwt"]["allowedSigners"] = [s, "noSuchSigner"]
    err = assert_error(admin.post("/auth-policies", json=body), 404, "NOT_FOUND")
    # upstream's field paths and reason; the index is the dangling id's place in the list
    assert err["cause"] == {"field": "primary.extJwt.allowedExtJwtSigners[1]", "reason": "not found",
                            "value": "noSuchSigner"}
    body["secondary"] = {"requireTotp": False, "requireExtJwtSigner": "other"}
    err = assert_error(admin.post("/auth-policies", json=body), 404, "NOT_FOUND")
    assert err["cause"] == {"field": "secondary.requiredExtJwtSigner", "reason": "not found", "value": "other"}
    id = admin.create("auth-policies", policy("later"))
    assert_error(admin.patch(f"/auth-policies/{id}", json={"secondary": {"requireExtJwtSigner": "nope"}}),
                 404, "NOT_FOUND")


def test_delete_refused_while_identities_use_it(admin):
    err = assert_error(admin.delete("/auth-policies/default"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert err["cause"]["field"] == "authPolicyId"
    id = admin.create("auth-policies", policy("in-use"))
    iid = admin.create("identities", {"name": "bound", "type": "User", "isAdmin": False, "authPolicyId": id})
    err = assert_error(admin.delete(f"/auth-policies/{id}"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert err["cause"] == {"field": "authPolicyId", "value": f"[{iid}]",
                            "reason": f"entity type authPolicy referenced by identity: [{iid}]"}
    assert admin.patch(f"/identities/{iid}", json={"authPolicyId": "default"}).status_code == 200
    assert admin.delete(f"/auth-policies/{id}").status_code == 200
    assert_error(admin.get(f"/auth-policies/{id}"), 404, "NOT_FOUND")


def test_every_operation_is_admin_only(admin, user, anon):  # noqa: F811
    assert admin.get("/auth-policies").status_code == 200
    for call in (lambda a: a.get("/auth-policies"),  # upstream: listing too needs an admin
                 lambda a: a.get("/auth-policies/default"),
                 lambda a: a.post("/auth-policies", json=policy("user-made")),
                 lambda a: a.patch("/auth-policies/default", json={"name": "x"}),
                 lambda a: a.put("/auth-policies/default", json=policy("x")),
                 lambda a: a.delete("/auth-policies/default")):
        assert_error(call(user), 401, "UNAUTHORIZED")
        assert_error(call(anon), 401, "UNAUTHORIZED")
