"""The caller's own authenticators (``/current-identity/authenticators``): links of their own."""

from __future__ import annotations

from tests.conftest import CLIENT, Api


def test_own_authenticators_link_to_themselves_under_the_current_identity(client, admin_token):
    me = Api(client, CLIENT, admin_token)
    listed = me.get("/current-identity/authenticators").json()["data"]
    assert listed
    for auth in listed:
        detail = me.get(f"/current-identity/authenticators/{auth['id']}").json()["data"]
        for d in (auth, detail):
            assert d["_links"]["self"] == {"href": f"./current-identity/authenticators/{auth['id']}"}
            assert d["_links"]["identities"] == {"href": f"./identities/{d['identityId']}"}
            assert list(d["_links"])[0] == "self"
