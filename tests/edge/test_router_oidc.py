"""The embedded router and OIDC access tokens: an SDK that logged in through ``/oidc`` (with its
certificate) says hello with the access token, binds and dials through the router with service
sessions of its token-based API session; a logged-out token, or one shown with another
identity's certificate, gets its channel closed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import urllib.parse

import jwt
import pytest

from tests.conftest import CLIENT
from tests.edge import client as ec
from tests.edge.conftest import enroll
from tests.edge.test_router import alive, circuit, closed_soon, identity, run

pytestmark = pytest.mark.slow   # a live server with its edge router over TLS

REDIRECT = "http://127.0.0.1:20202/auth/callback"


@pytest.fixture(scope="module")
def net(edge):
    admin = edge.admin()
    ids = {"svc": admin.create("services", {"name": "o-svc", "encryptionRequired": False, "roleAttributes": ["o"]})}
    for kind, role in (("Bind", "#o-host"), ("Dial", "#o-client")):
        admin.create("service-policies", {"name": f"o-{kind}", "type": kind, "semantic": "AnyOf",
                                          "identityRoles": [role], "serviceRoles": ["#o"]})
    for name in ("o-host", "o-client"):
        iid, path = enroll(edge, admin, name, [name])
        ids[name] = iid
        ids[name + ".id"] = identity(path)
    return admin, ids


class OidcWho:
    """An identity logged in through the OIDC provider with its certificate (as newer SDKs do)."""

    def __init__(self, edge, ident: ec.Identity):
        self.edge, self.ident = edge, ident
        self.http = edge.client(ident.cert_pem, ident.key_pem)
        verifier = secrets.token_urlsafe(40)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        r = self.http.get("/oidc/authorize", params={
            "client_id": "openziti", "response_type": "code", "scope": "openid offline_access",
            "redirect_uri": REDIRECT, "code_challenge": challenge, "code_challenge_method": "S256"})
        assert r.status_code == 302 and r.headers["location"].startswith("/oidc/login/cert?"), r.text
        r = self.http.post(r.headers["location"], json={})
        assert r.status_code == 302, r.text
        r = self.http.get(r.headers["location"])
        code = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["code"][0]
        r = self.http.post("/oidc/oauth/token", data={"grant_type": "authorization_code", "code": code,
                                                "code_verifier": verifier, "redirect_uri": REDIRECT})
        assert r.status_code == 200, r.text
        self.token = r.json()["access_token"]
        self.headers = {"authorization": f"Bearer {self.token}"}

    def session(self, service_id: str, kind: str) -> dict:
        r = self.http.post(CLIENT + "/sessions", json={"serviceId": service_id, "type": kind}, headers=self.headers)
        assert r.status_code == 201, r.text
        return r.json()["data"]

    async def channel(self, ident: ec.Identity | None = None) -> ec.EdgeClient:
        c = await ec.EdgeClient.open("127.0.0.1", self.edge.ctl.edge_router.port, ident or self.ident)
        r = await c.hello(self.token)
        assert r.content == ec.RESULT and r.headers[ec.RESULT_SUCCESS] == b"\x01"
        return c


def test_bind_and_dial_with_oidc_tokens(edge, net):
    admin, ids = net

    async def scenario():
        host, client = OidcWho(edge, ids["o-host.id"]), OidcWho(edge, ids["o-client.id"])
        services = client.http.get(CLIENT + "/services", headers=client.headers).json()["data"]
        assert [s["name"] for s in services] == ["o-svc"]
        h, d = await host.channel(), await client.channel()
        assert await alive(h) and await alive(d)
        r = await h.bind(1, host.session(ids["svc"], "Bind")["token"])
        assert r.content == ec.STATE_CONNECTED
        reply = await circuit(h, d, 1, 5, client.session(ids["svc"], "Dial")["token"], 77)
        assert reply.content == ec.STATE_CONNECTED
        d.data(5, b"over oidc")
        m = await h.next(77)
        assert m.content == ec.DATA and m.body == b"over oidc"
        # logging out ends the token: its channel closes, a new hello is refused
        assert client.http.delete(CLIENT + "/current-api-session", headers=client.headers).status_code == 200
        assert await closed_soon(d)
        c = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, client.ident)
        await c.hello(client.token)
        assert await closed_soon(c)
        await h.close()
    run(scenario())


def test_a_token_with_another_identitys_certificate_is_refused(edge, net):
    admin, ids = net

    async def scenario():
        host = OidcWho(edge, ids["o-host.id"])
        c = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, ids["o-client.id"])
        await c.hello(host.token)
        assert await closed_soon(c)
        await asyncio.sleep(0)
    run(scenario())


def test_a_revocation_closes_the_channels_of_the_tokens_it_names(edge, net):
    """As a v2 router closes them: an API_SESSION revocation (the token's ``z_asid``) closes
    that session's channel, an IDENTITY one every channel of the identity's earlier tokens; the
    other identity's channel stays, and a revoked token's new hello is refused."""
    admin, ids = net

    async def scenario():
        host, client = OidcWho(edge, ids["o-host.id"]), OidcWho(edge, ids["o-client.id"])
        h, d = await host.channel(), await client.channel()
        assert await alive(h) and await alive(d)
        asid = jwt.decode(client.token, options={"verify_signature": False})["z_asid"]
        assert admin.post("/revocations", json={"id": asid, "type": "API_SESSION"}).status_code == 201
        assert await closed_soon(d)
        assert await alive(h)
        c = await ec.EdgeClient.open("127.0.0.1", edge.ctl.edge_router.port, client.ident)
        await c.hello(client.token)
        assert await closed_soon(c)
        assert admin.post("/revocations", json={"id": ids["o-host"], "type": "IDENTITY"}).status_code == 201
        assert await closed_soon(h)
    run(scenario())


def test_a_disabled_identitys_certificate_is_refused_with_openziti_2s_json(edge, net):
    """The C SDK 1.18 reads a refused login step as JSON: v2.0.3's bare API error, not text."""
    admin, ids = net
    iid, path = enroll(edge, admin, "o-disabled", ["o-client"])
    ident = identity(path)
    assert admin.post(f"/identities/{iid}/disable", json={"durationMinutes": 0}).status_code == 200
    http = edge.client(ident.cert_pem, ident.key_pem)
    verifier = secrets.token_urlsafe(40)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    r = http.get("/oidc/authorize", params={
        "client_id": "openziti", "response_type": "code", "scope": "openid offline_access",
        "redirect_uri": REDIRECT, "code_challenge": challenge, "code_challenge_method": "S256"})
    assert r.status_code == 302, r.text
    r = http.post(r.headers["location"], json={})
    assert r.status_code == 401 and r.headers["content-type"].startswith("application/json")
    assert r.json() == {"code": "INVALID_AUTH", "message": "The authentication request failed"}
