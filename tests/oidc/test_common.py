"""``oidc/common.py``'s redirect URI patterns (Go's path.Match) and the URIs the OIDC provider
allows: upstream's loopback defaults, and those ``serve`` adds (``--oidc-redirect-uri``,
``--oidc-post-logout-uri``): a console served from another origin is refused before its URI is
added and logs in after (the same file, served again)."""

from __future__ import annotations

import secrets
import urllib.parse

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.fastclient import FastClient
from tests.oidc.test_provider import bearer, challenge, exchange, login
from ziti_lite.app import create_app
from ziti_lite.config import Settings
from ziti_lite.oidc.common import uri_pattern

CONSOLE = "https://console.example.test/auth/callback"
LOGOUT = "https://console.example.test/logged-out"


def _served(db_path, **settings):
    app = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD, **settings))
    return app, FastClient(app)


def _authorize(client, redirect: str, verifier: str):
    q = {"client_id": "openziti", "response_type": "code", "scope": "openid offline_access",
         "redirect_uri": redirect, "state": "st4te", "code_challenge": challenge(verifier),
         "code_challenge_method": "S256"}
    return client.get("/oidc/authorize?" + urllib.parse.urlencode(q), follow_redirects=False)


def _logout(client, target: str):
    r = client.get("/oidc/end_session?" + urllib.parse.urlencode({"post_logout_redirect_uri": target, "state": "s"}),
                   follow_redirects=False)
    assert r.status_code == 302, r.text
    return r.headers["location"]


def test_a_console_of_another_origin_is_refused_until_its_uri_is_added(db_path):
    app, client = _served(db_path)
    with client:
        r = _authorize(client, CONSOLE, secrets.token_urlsafe(40))
        assert r.status_code == 400 and r.text.startswith("The requested redirect_uri is missing")
        assert _logout(client, LOGOUT) == "/oidc/logged-out"
    app.state.controller.store.close()

    app, client = _served(db_path, oidc_redirect_uri=[CONSOLE], oidc_post_logout_uri=[LOGOUT])
    with client:
        verifier = secrets.token_urlsafe(40)
        r = _authorize(client, CONSOLE, verifier)
        assert r.status_code == 302, r.text
        req_id = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["authRequestID"][0]
        r = login(client, req_id)
        r = client.get(r.headers["location"], follow_redirects=False)
        target = urllib.parse.urlparse(r.headers["location"])
        assert f"{target.scheme}://{target.netloc}{target.path}" == CONSOLE
        code = urllib.parse.parse_qs(target.query)["code"][0]
        r = exchange(client, code, verifier, redirect=CONSOLE)
        assert r.status_code == 200, r.text
        me = client.get("/edge/management/v1/current-identity", headers=bearer(r.json()["access_token"]))
        assert me.status_code == 200 and me.json()["data"]["name"] == "Default Admin"
        assert _logout(client, LOGOUT) == LOGOUT + "?state=s"
        # the loopback defaults stay
        assert _authorize(client, "http://127.0.0.1:20202/auth/callback", verifier).status_code == 302
        assert _authorize(client, "https://other.example.test/auth/callback", verifier).status_code == 400
    app.state.controller.store.close()


def test_a_pattern_admits_what_path_match_admits(db_path):
    app, client = _served(db_path, oidc_redirect_uri=["https://*.example.test/auth/callback"])
    with client:
        verifier = secrets.token_urlsafe(40)
        assert _authorize(client, "https://zac.example.test/auth/callback", verifier).status_code == 302
        # * stops at a slash: no deeper path, no other host hidden behind one
        for uri in ("https://a/b.example.test/auth/callback", "https://zac.example.test/x/auth/callback",
                    "https://zac.example.test/auth/callback/more"):
            assert _authorize(client, uri, verifier).status_code == 400, uri
    app.state.controller.store.close()


@pytest.mark.parametrize(("pattern", "yes", "no"), [
    ("https://127.0.0.1:*/auth/callback", ["https://127.0.0.1:8443/auth/callback", "https://127.0.0.1:/auth/callback"],
     ["https://127.0.0.1:1/x/auth/callback", "https://127.0.0.1:1/auth/callbackx"]),
    ("https://h?.test/cb", ["https://h1.test/cb"], ["https://h/.test/cb", "https://h12.test/cb"]),
    ("https://h[0-9].test/cb", ["https://h7.test/cb"], ["https://hx.test/cb"]),
    ("https://h[^0-9].test/cb", ["https://hx.test/cb"], ["https://h7.test/cb", "https://h/.test/cb"]),
    (r"https://h\*.test/cb", ["https://h*.test/cb"], ["https://hx.test/cb"]),
    ("https://a.test/cb.v1", ["https://a.test/cb.v1"], ["https://a.test/cbxv1"]),
])
def test_uri_patterns_read_as_go_path_match(pattern, yes, no):
    p = uri_pattern(pattern)
    assert all(p.match(u) for u in yes) and not any(p.match(u) for u in no)


@pytest.mark.parametrize("bad", ["https://a.test/[cb", "https://a.test/cb\\", "https://a.test/[]", "https://a.test/[z-a]"])
def test_a_malformed_pattern_is_refused(bad):
    with pytest.raises(ValueError):
        uri_pattern(bad)
