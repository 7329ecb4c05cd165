"""The caller's own authenticators (``/current-identity/authenticators``): links of their own."""

from __future__ import annotations

from tests.conftest import CLIENT, Api


def test_own_authenticators_link_only_to_themselves_under_the_current_identity(client, admin_token):
    me = Api(client, CLIENT, admin_token)
    listed = me.get("/current-identity/authenticators").json()["data"]
    assert listed
    for auth in listed:
        detail = me.get(f"/current-identity/authenticators/{auth['id']}").json()["data"]
        for d in (auth, detail):
            assert d["_links"]["self"] == {"href": f"./current-identity/authenticators/{auth['id']}"}
            assert list(d["_links"]) == ["self"]  # upstream's links of one's own: self alone


def test_an_enroll_token_that_is_no_uuid_fails_the_parameter_binding_as_upstream(client):
    for path in ("/enroll?method=ott&token=not-a-token", "/enroll/ott?token=not-a-token",
                 "/enroll/updb?token=not-a-token"):
        r = client.post(CLIENT + path, content=b"x", headers={"content-type": "application/x-pem-file"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "COULD_NOT_VALIDATE", r.text
        assert r.json()["error"]["cause"] == {
            "field": "token", "reason": 'token in query must be of type uuid: "not-a-token"',
            "value": "not-a-token"}
    # a well-formed token that names no enrollment is the lookup's refusal
    r = client.post(CLIENT + "/enroll?method=ott&token=8d7b5b0e-2b0b-4d3c-9e36-2a0f0f0f0f0f", content=b"x",
                    headers={"content-type": "application/x-pem-file"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_ENROLLMENT_TOKEN"
