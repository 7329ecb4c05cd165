"""Every error, whatever produced it, is the exact OpenZiti error envelope.

{"error": {"code", "message", "requestId", "cause"?}, "meta": {"apiEnrollmentVersion": "0.0.1", "apiVersion": "0.0.1"}}
"""

from __future__ import annotations

import pytest

from tests.conftest import CLIENT, MGMT, assert_error

ERROR_KEYS = {"code", "message", "requestId", "cause"}


def exact(r, status: int, code: str, cause: str | None = None) -> dict:
    """The envelope and nothing else; ``cause`` is "field", "generic" or None (absent)."""
    err = assert_error(r, status, code)
    assert set(err) <= ERROR_KEYS, err
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers.get("ziti-instance-id")
    assert r.headers.get("server", "").startswith("ziti-controller/")
    if cause == "field":
        assert set(err["cause"]) == {"field", "reason", "value"}, err
        assert isinstance(err["cause"]["value"], str)
    elif cause == "generic":
        assert set(err["cause"]) == {"code", "message"}, err
        assert err["cause"]["code"] == "UNHANDLED" and err["cause"]["message"]
    elif cause is None:
        assert "cause" not in err, err
    return err


# ------------------------------------------------------------------ unknown routes and methods
@pytest.mark.parametrize(
    "path",
    [
        MGMT + "/no-such-collection",
        MGMT + "/identities/some-id/no-such-link",
        CLIENT + "/no-such-collection",
        "/edge/v1/no-such-collection",
        "/no-such-collection",
        "/edge/management/v2/version",
        "/edge/whatever",
        "/fabric/v1/no-such-collection",
        "/fabric/v2/routers",
        "/.well-known/unknown",
    ],
)
def test_unknown_route_is_404(client, path):
    err = exact(client.get(path), 404, "NOT_FOUND", cause="generic")
    assert err["cause"]["message"] == f"path {path} was not found"


@pytest.mark.parametrize(
    "method,path",
    [
        ("DELETE", MGMT + "/version"),
        ("PUT", MGMT + "/identities"),
        ("POST", MGMT + "/identity-types/Default"),
        ("PATCH", CLIENT + "/authenticate"),
        ("DELETE", "/version"),
    ],
)
def test_wrong_method_is_405(client, method, path):
    err = exact(client.request(method, path), 405, "METHOD_NOT_ALLOWED", cause="generic")
    assert err["cause"]["message"].startswith(f"method {method} is not allowed, but [")


def test_options_preflight_is_200(client):
    r = client.options(
        MGMT + "/identities", headers={"Origin": "https://zac.example", "Access-Control-Request-Method": "POST"}
    )
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"


# ------------------------------------------------------------------ bodies
@pytest.mark.parametrize("path", ["/identities", "/services", "/config-types"])
def test_bad_json_is_400_could_not_parse_body(admin, path):
    exact(
        admin.post(path, content=b'{"name": ', headers={"content-type": "application/json"}),
        400,
        "COULD_NOT_PARSE_BODY",
        cause="generic",
    )


def test_bad_json_on_put_and_authenticate(admin, anon):
    iid = admin.create("identities", {"name": "shape", "type": "User", "isAdmin": False})
    exact(
        admin.put(f"/identities/{iid}", content=b"[1,2", headers={"content-type": "application/json"}),
        400,
        "COULD_NOT_PARSE_BODY",
        cause="generic",
    )
    exact(
        admin.patch(f"/identities/{iid}", content=b"{,}", headers={"content-type": "application/json"}),
        400,
        "COULD_NOT_PARSE_BODY",
        cause="generic",
    )
    exact(
        anon.post("/authenticate?method=password", content=b"{oops", headers={"content-type": "application/json"}),
        400,
        "COULD_NOT_PARSE_BODY",
        cause="generic",
    )


def test_wrong_body_type_is_could_not_validate(admin):
    # a value of the wrong JSON type fails upstream's unmarshalling first: COULD_NOT_PARSE_BODY
    exact(admin.post("/identities", json=["not", "an", "object"]), 400, "COULD_NOT_PARSE_BODY", cause="generic")
    exact(admin.post("/identities", json={"name": "x", "type": "User", "isAdmin": "no"}), 400,
          "COULD_NOT_PARSE_BODY", cause="generic")
    exact(
        admin.post("/identities", json={"name": "x", "type": "Alien", "isAdmin": False}),
        400,
        "COULD_NOT_VALIDATE",
        cause="field",
    )
    exact(
        admin.post("/identities", json={"name": "x", "type": "User", "isAdmin": False, "tags": {"a": {"nested": 1}}}),
        400,
        "COULD_NOT_VALIDATE",
        cause="field",
    )


def test_oversized_body_is_413(admin):
    big = b'{"name": "' + b"x" * (5 * 1024 * 1024) + b'", "type": "User", "isAdmin": false}'
    exact(
        admin.post("/identities", content=big, headers={"content-type": "application/json"}), 413, "REQUEST_TOO_LARGE"
    )
    assert admin.get('/identities?filter=name contains "xxxx"').json()["data"] == []


def test_oversized_body_without_auth_is_still_401(anon):
    big = b"x" * (5 * 1024 * 1024)
    exact(anon.post("/identities", content=big), 401, "UNAUTHORIZED", cause="generic")


# ------------------------------------------------------------------ filters and paging
@pytest.mark.parametrize(
    "query",
    [
        "name = ",
        'nosuchfield = "x"',
        'name startswith "x"',
        'roleAttributes = "x"',
        'isAdmin = "true"',
        'name = "a" limit 5 skip 1',
        "DATETIME(2020-01-01T00:00:00Z) = createdAt",
        ")",
        '"unterminated',
    ],
)
def test_bad_filter_is_400_invalid_filter(admin, query):
    err = exact(admin.get("/identities", params={"filter": query}), 400, "INVALID_FILTER", cause="generic")
    assert err["message"] == "The filter query supplied is invalid"


@pytest.mark.parametrize(
    "path", ["/services", "/configs", "/config-types", "/identity-types", "/authenticators", "/api-sessions"]
)
def test_bad_filter_everywhere(admin, path):
    exact(admin.get(path, params={"filter": "bogus = 1"}), 400, "INVALID_FILTER", cause="generic")


def test_syntax_error_names_the_position(admin):
    err = exact(admin.get("/identities", params={"filter": "name ="}), 400, "INVALID_FILTER", cause="generic")
    assert "column" in err["cause"]["message"]


def test_bad_sort_is_400(admin):
    exact(admin.get("/identities", params={"sort": "bogus asc"}), 400, "INVALID_SORT_IDENTIFIER", cause="generic")


# ------------------------------------------------------------------ sessions
PROTECTED = [
    ("GET", MGMT + "/identities"),
    ("POST", MGMT + "/identities"),
    ("GET", MGMT + "/current-identity"),
    ("GET", MGMT + "/current-api-session"),
    ("GET", MGMT + "/summary"),
    ("POST", MGMT + "/database/check-data-integrity"),
    ("GET", CLIENT + "/current-identity"),
    ("DELETE", CLIENT + "/current-api-session"),
    ("GET", "/current-api-session"),
    ("GET", "/edge/v1/current-identity"),
]


@pytest.mark.parametrize("method,path", PROTECTED)
@pytest.mark.parametrize(
    "token",
    [None, "", "   ", "not-a-uuid", "00000000-0000-4000-8000-000000000000"],
    ids=["none", "empty", "blank", "non-uuid", "unknown-uuid"],
)
def test_no_valid_session_is_401(client, method, path, token):
    headers = {} if token is None else {"zt-session": token}
    # upstream: no token is "unauthenticated for invalid credentials"; an unknown one has no cause
    missing = not (token or "").strip()
    err = exact(
        client.request(method, path, headers=headers, json={} if method == "POST" else None),
        401,
        "UNAUTHORIZED",
        cause="generic" if missing else None,
    )
    if missing:
        assert err["cause"]["message"] == "unauthenticated for invalid credentials"


def test_request_ids_are_fresh(anon):
    a = anon.get("/identities").json()["error"]["requestId"]
    b = anon.get("/identities").json()["error"]["requestId"]
    assert a != b


def test_not_found_cause_names_the_entity(admin):
    err = exact(admin.get("/identities/nope"), 404, "NOT_FOUND", cause="generic")
    assert err["cause"]["message"] == "identity with id nope not found"
    err = exact(admin.get("/config-types/nope"), 404, "NOT_FOUND", cause="generic")
    assert err["cause"]["message"] == "configType with id nope not found"


def test_errors_on_client_api_are_enveloped_too(client):
    exact(client.get(CLIENT + "/current-identity"), 401, "UNAUTHORIZED", cause="generic")
    exact(
        client.post("/authenticate?method=password", json={"username": "nobody", "password": "wrong-pw"}),
        401,
        "INVALID_AUTH",
    )
    exact(client.post("/authenticate?method=nosuch", json={}), 400, "COULD_NOT_VALIDATE", cause="field")


def test_deeply_nested_json_is_400(admin):
    for body in (b"[" * 100_000, b'{"name": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"):
        exact(
            admin.post("/identities", content=body, headers={"content-type": "application/json"}),
            400,
            "COULD_NOT_PARSE_BODY",
            cause="generic",
        )


def test_integer_out_of_int64_range_is_400(admin):
    err = exact(
        admin.post("/services", json={"name": "big", "encryptionRequired": True, "maxIdleTimeMillis": 1 << 63}),
        400,
        "COULD_NOT_VALIDATE",
        cause="field",
    )
    assert err["cause"]["field"] == "maxIdleTimeMillis"


@pytest.mark.parametrize("param", ["limit=abc", "offset=x", "limit=1.5", "offset=99999999999999999999"])
def test_non_integer_paging_params_are_400(admin, param):
    err = exact(admin.get(f"/identities?{param}"), 400, "COULD_NOT_VALIDATE", cause="field")
    name, value = param.split("=")
    assert err["cause"] == {
        "field": name,
        "reason": f'{name} in query must be of type int64: "{value}"',
        "value": value,
    }


@pytest.mark.parametrize(
    "query,limit,offset",
    [
        ("limit=1000", 500, 0),
        ("limit=0", 10, 0),
        ("limit=-5", 10, 0),
        ("offset=-3", 10, 0),
        ("offset=200000", 10, 100000),
        ("limit=-1", 9223372036854775807, 0),
        ("filter=true limit 3 skip 1&limit=50&offset=7", 50, 7),
        ("filter=true skip 1 limit 3&limit=50&offset=7", 3, 1),
        ("filter=true limit none", 9223372036854775807, 0),
    ],
)
def test_paging_defaults_and_clamps(admin, query, limit, offset):
    r = admin.get(f"/identity-types?{query}")
    if r.status_code == 400:  # "limit 3 skip 1" is out of order: a syntax error
        exact(r, 400, "INVALID_FILTER", cause="generic")
        return
    pag = r.json()["meta"]["pagination"]
    assert (pag["limit"], pag["offset"]) == (limit, offset)


def test_head_version(client):
    r = client.head("/version")
    assert r.status_code == 200 and r.content == b""


def test_body_schema_is_checked_before_the_id(admin):
    """As upstream binds and validates the body before its handler looks the id up."""
    exact(admin.put("/identities/nope", json={"name": "x"}), 400, "COULD_NOT_VALIDATE", cause="field")
    exact(
        admin.put("/identities/nope", json={"name": "x", "type": "User", "isAdmin": False}),
        404,
        "NOT_FOUND",
        cause="generic",
    )
    exact(admin.patch("/identities/nope", json={"isAdmin": "no"}), 400, "COULD_NOT_PARSE_BODY", cause="generic")
    exact(admin.patch("/identities/nope", json={"isAdmin": False}), 404, "NOT_FOUND", cause="generic")
