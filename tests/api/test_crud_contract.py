"""The CRUD contract, checked for every Resource in ``ziti_lite.wiring.resources()``.

Each resource gets the same checks: list meta, filter by id, paging, create envelope, detail
(with every field its upstream ``*Detail`` definition requires), PUT resets omitted fields,
PATCH writes only what was sent (``{"tags": {}}`` is a no-op), delete, 404 on an unknown id,
400 ``COULD_NOT_VALIDATE`` with a field cause, and 401 ``UNAUTHORIZED`` for non-admins and
anonymous callers on every operation whose auth level is ``admin``.

Checks that need an entity of the resource need a sample create body in ``SAMPLES``: a
resource with a create or update operation and no sample fails (``test_every_writable_resource_has_a_sample``
and each check that needs it), so a new resource cannot silently skip the contract. Read-only
resources use the rows they already have.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Api, assert_error
from ziti_lite.wiring import resources as registry

FAKE_ID = "noSuchId0"
REFERENCE = Path(__file__).parents[1] / "data" / "edge_api_fields.json"   # made by make_edge_api_fields.py


# ------------------------------------------------------------------ sample bodies
@dataclass
class Sample:
    """How to make valid bodies of one resource.

    create(api, n) -> a valid create body, distinct for each n (may create dependencies).
    put(api, n)    -> a valid PUT body (default: create(api, n) without tags).
    patch          -> fields a PATCH changes (default: a new name).
    invalid        -> (body, field) a create body that must fail validation on that field.
    echo_skip      -> wire names not echoed verbatim by the detail (write-only or normalised).
    """
    create: Callable[[Api, int], dict]
    put: Callable[[Api, int], dict] | None = None
    patch: dict | None = None
    invalid: tuple[dict, str] | None = None
    echo_skip: tuple[str, ...] = ()
    volatile: tuple[str, ...] = ()   # detail fields that may change between two reads


_counter = iter(range(1, 1_000_000))


def uniq(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}"


def _ensure(api: Api, collection: str, body: dict) -> str:
    r = api.post(f"/{collection}", json=body)
    if r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND" and "cause" not in r.json()["error"]:
        pytest.skip(f"dependency collection /{collection} is not served yet")
    assert r.status_code == 201, r.text
    return r.json()["data"]["id"]


def _identity(api: Api) -> str:
    return _ensure(api, "identities", {"name": uniq("dep-identity"), "type": "User", "isAdmin": False})


def _service(api: Api) -> str:
    return _ensure(api, "services", {"name": uniq("dep-service"), "encryptionRequired": True})


def _router(api: Api) -> str:
    return _ensure(api, "transit-routers", {"name": uniq("dep-router")}) if _serves(api, "transit-routers") \
        else _ensure(api, "routers", {"name": uniq("dep-router")})


def _serves(api: Api, collection: str) -> bool:
    r = api.get(f"/{collection}?limit=1")
    return r.status_code == 200


def _config_type(api: Api) -> str:
    return _ensure(api, "config-types", {"name": uniq("dep-ct"), "schema": {
        "type": "object", "properties": {"port": {"type": "integer"}}, "required": ["port"]}})


def _ca_pem(cn: str) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _updb_policy(max_attempts: int = 0) -> dict:
    return {
        "primary": {
            "cert": {"allowed": True, "allowExpiredCerts": False},
            "extJwt": {"allowed": False, "allowedSigners": []},
            "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": max_attempts,
                     "minPasswordLength": 5, "requireMixedCase": False, "requireNumberChar": False,
                     "requireSpecialChar": False},
        },
        "secondary": {"requireExtJwtSigner": None, "requireTotp": False},
    }


def _authenticator(api: Api, n: int) -> dict:
    return {"method": "updb", "identityId": _identity(api), "username": uniq("user"), "password": "Secret-pw1"}


def _config(api: Api, n: int) -> dict:
    return {"name": uniq("config"), "configTypeId": _config_type(api), "data": {"port": 80 + n},
            "tags": {"a": "1", "b": 2}}


def _terminator(api: Api, n: int) -> dict:
    return {"service": _service(api), "router": _router(api), "binding": "transport",
            "address": f"tcp:localhost:{8000 + n}", "cost": 1, "precedence": "default", "tags": {"a": "1", "b": 2}}


def _ext_jwt(api: Api, n: int) -> dict:
    return {"name": uniq("signer"), "issuer": uniq("https://issuer.example.com/i"), "audience": "ziti",
            "enabled": True, "jwksEndpoint": f"https://issuer.example.com/jwks-{n}", "tags": {"a": "1", "b": 2}}


def _enrollment(api: Api, n: int) -> dict:
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return {"method": "ott", "identityId": _identity(api), "expiresAt": expires}


def _named(extra: dict) -> Callable[[Api, int], dict]:
    def make(api: Api, n: int) -> dict:
        return {"name": uniq("thing"), "tags": {"a": "1", "b": 2}, **extra}
    return make


SAMPLES: dict[str, Sample] = {
    "identities": Sample(
        create=lambda api, n: {"name": uniq("identity"), "type": "User", "isAdmin": False,
                               "roleAttributes": ["web", "db"], "tags": {"a": "1", "b": 2},
                               "appData": {"k": "v"}, "defaultHostingCost": 5, "externalId": uniq("ext")},
        patch={"roleAttributes": ["ops"], "defaultHostingCost": 9},
        invalid=({"name": "x", "type": "User", "isAdmin": "yes"}, "isAdmin"),
        echo_skip=("type",),
    ),
    "services": Sample(
        create=lambda api, n: {"name": uniq("service"), "encryptionRequired": True, "roleAttributes": ["a"],
                               "tags": {"a": "1", "b": 2}, "maxIdleTimeMillis": 1000},
        patch={"roleAttributes": ["b", "c"], "maxIdleTimeMillis": 5},
        invalid=({"name": "svc", "encryptionRequired": "maybe"}, "encryptionRequired"),
    ),
    "config-types": Sample(
        create=lambda api, n: {"name": uniq("ct"), "schema": {"type": "object"}, "tags": {"a": "1", "b": 2}},
        invalid=({"name": ""}, "name"),
    ),
    "configs": Sample(
        create=_config,
        put=lambda api, n: {"name": uniq("config"), "data": {"port": 443}},
        patch={"data": {"port": 8443}},
        invalid=({"name": "cfg", "configTypeId": "x", "data": "not-an-object"}, "data"),
    ),
    "authenticators": Sample(
        create=_authenticator,
        put=lambda api, n: {"username": uniq("user"), "password": "Another-pw2"},
        patch={"username": "patched-user-name"},
        invalid=({"method": "updb", "identityId": "x", "username": "abc", "password": "Secret-pw1"}, "username"),
        echo_skip=("password",),
    ),
    "edge-routers": Sample(
        create=_named({"roleAttributes": ["edge"], "cost": 7, "isTunnelerEnabled": False, "noTraversal": False,
                       "disabled": False, "appData": {"k": "v"}}),
        patch={"cost": 11, "roleAttributes": ["other"]},
        invalid=({"name": "er", "cost": 70000}, "cost"),
    ),
    "routers": Sample(create=_named({"cost": 3, "noTraversal": False, "disabled": False}), patch={"cost": 4},
                      invalid=({"name": "r", "cost": -1}, "cost")),
    "transit-routers": Sample(create=_named({"cost": 3, "noTraversal": False, "disabled": False}), patch={"cost": 4},
                              invalid=({"name": "r", "cost": -1}, "cost")),
    "edge-router-policies": Sample(
        create=_named({"semantic": "AnyOf", "edgeRouterRoles": ["#all"], "identityRoles": ["#web"]}),
        patch={"semantic": "AllOf"},  # a role list's *RolesDisplay follows it, so patch the semantic
        invalid=({"name": "p", "semantic": "Some"}, "semantic"),
    ),
    "service-edge-router-policies": Sample(
        create=_named({"semantic": "AllOf", "edgeRouterRoles": ["#all"], "serviceRoles": ["#web"]}),
        patch={"semantic": "AnyOf"},
        invalid=({"name": "p", "semantic": "Some"}, "semantic"),
    ),
    "service-policies": Sample(
        create=_named({"type": "Dial", "semantic": "AnyOf", "serviceRoles": ["#web"], "identityRoles": ["#all"],
                       "postureCheckRoles": []}),
        patch={"semantic": "AllOf"},
        invalid=({"name": "p", "type": "Dial", "semantic": "Some"}, "semantic"),
    ),
    "posture-checks": Sample(
        create=_named({"typeId": "DOMAIN", "domains": ["example.com"], "roleAttributes": ["pc"]}),
        put=lambda api, n: {"name": uniq("thing"), "typeId": "DOMAIN", "domains": ["other.example.com"]},
        patch={"roleAttributes": ["other"]},
        invalid=({"name": "pc", "typeId": "DOMAIN", "domains": []}, "domains"),
    ),
    "terminators": Sample(
        create=_terminator,
        put=lambda api, n: {k: v for k, v in _terminator(api, n).items() if k != "tags"},
        patch={"cost": 9},
        invalid=({"service": "s", "router": "r", "binding": "transport", "address": "a", "cost": 70000}, "cost"),
        echo_skip=("service", "router"),
    ),
    "revocations": Sample(
        create=lambda api, n: {"id": str(uuid.uuid4()), "type": "JTI", "tags": {"a": "1", "b": 2}},
        invalid=({"id": str(uuid.uuid4()), "type": "TOKEN"}, "type"),
    ),
    "auth-policies": Sample(
        create=lambda api, n: {"name": uniq("policy"), "tags": {"a": "1", "b": 2}, **_updb_policy()},
        patch={"secondary": {"requireTotp": True, "requireExtJwtSigner": None}},
        invalid=({"name": "p", "primary": "nope", "secondary": {"requireTotp": False}}, "primary"),
    ),
    "external-jwt-signers": Sample(
        create=_ext_jwt,
        patch={"audience": "other-audience"},
        invalid=({"name": "s", "issuer": "i", "audience": "a", "enabled": "yes"}, "enabled"),
    ),
    "cas": Sample(
        create=lambda api, n: {"name": uniq("ca"), "certPem": _ca_pem(uniq("ca")), "identityRoles": ["#ca"],
                               "isAuthEnabled": True, "isAutoCaEnrollmentEnabled": False,
                               "isOttCaEnrollmentEnabled": True, "identityNameFormat": "[caName]-[commonName]",
                               "tags": {"a": "1", "b": 2}},
        put=lambda api, n: {"name": uniq("ca"), "identityRoles": [], "isAuthEnabled": False,
                            "isAutoCaEnrollmentEnabled": False, "isOttCaEnrollmentEnabled": False,
                            "identityNameFormat": "[caName]-[commonName]"},
        patch={"isAuthEnabled": False},
        invalid=({"name": "ca", "certPem": "x", "identityRoles": [], "isAuthEnabled": "yes",
                  "isAutoCaEnrollmentEnabled": False, "isOttCaEnrollmentEnabled": False}, "isAuthEnabled"),
        echo_skip=("certPem",),
    ),
    "enrollments": Sample(
        create=_enrollment,
        invalid=({"method": "ott", "identityId": "x"}, "expiresAt"),
        echo_skip=("expiresAt",),
    ),
}
# detail fields computed from other state that may differ between two reads of one row
VOLATILE = {"updatedAt", "hasApiSession", "cachedLastActivityAt", "lastActivityAt", "isOnline"}
# upstream quirks kept on purpose: a service detail read without config types shows
# "config": null (a nil map) although the definition requires it, while a list shows {}
# a signer's kid and clientId: null when never given, "" kept when sent so (as upstream stores them)
UPSTREAM_NULLS = {("services", "config"), ("external-jwt-signers", "kid"), ("external-jwt-signers", "clientId")}


def upstream_null(name: str, field: str) -> bool:
    """Whether upstream answers null for this field (though its spec calls it non-nullable): the
    fields the resource table declares empty-as-null (upstream keeps no empty list or string) and
    its constants of value null."""
    if (name, field) in UPSTREAM_NULLS:
        return True
    res = resource(name)
    f = res.by_name.get(field)
    return bool(f is not None and f.empty_null) or (field in res.constants and res.constants[field] is None)


def as_read(name: str, key: str, value):
    """What upstream reads back for a value sent: null for an empty value of a field it keeps no
    empty value of; an auth policy's unset secondary signer left out."""
    f = resource(name).by_name.get(key)
    if f is not None and f.empty_null and value in ("", [], {}):
        return None
    if f is not None and f.kind == "set" and isinstance(value, list):
        return sorted(dict.fromkeys(value))   # upstream keeps a set sorted
    if name == "auth-policies" and key == "secondary" and isinstance(value, dict):
        return {k: v for k, v in value.items() if not (k == "requireExtJwtSigner" and v is None)}
    return value
LIST_DETAIL_DIFFERENCES = {("services", "config")}


# ------------------------------------------------------------------ upstream detail definitions
def _definitions() -> tuple[dict[str, str], dict[str, dict[str, tuple[bool, bool]]]]:
    """Management list path -> item definition name; definition -> field -> (required, nullable),
    from the upstream facts kept in the repository (a missing file fails the whole module)."""
    data = json.loads(REFERENCE.read_text())
    defs = {name: {f: (required, nullable) for f, (_type, required, nullable) in fields.items()}
            for name, fields in data["definitions"].items()}
    return data["listItems"], defs


LIST_ITEMS, DEFINITIONS = _definitions()
assert DEFINITIONS, f"{REFERENCE}: no definitions"


# ------------------------------------------------------------------ helpers
ALL = registry()
NAMES = [r.name for r in ALL]


def resource(name: str):
    return next(r for r in ALL if r.name == name)


def params(op: str | None = None):
    return [pytest.param(r.name, id=r.name) for r in ALL if op is None or op in r.ops]


def sample(name: str) -> Sample:
    s = SAMPLES.get(name)
    if s is None:
        pytest.fail(f"no sample create body for resource {name!r}: add one to SAMPLES in {__file__}")
    return s


def make(api: Api, name: str, n: int = 0) -> tuple[str, dict]:
    body = sample(name).create(api, n)
    r = api.post(f"/{name}", json=body)
    assert r.status_code == 201, r.text
    return r.json()["data"]["id"], body


def _login_session(api: Api, n: int) -> str:
    """A new API session of the admin (api-sessions have no create operation)."""
    r = api.client.post(api.prefix + "/authenticate?method=password",
                        json={"username": "admin", "password": "admin-Passw0rd"})
    assert r.status_code == 200, r.text
    return r.json()["data"]["id"]


def _ott_enrollment(api: Api, n: int) -> str:
    """An identity created with an ott enrollment; returns the enrollment's id."""
    iid = _ensure(api, "identities", {"name": uniq("enrollee"), "type": "Device", "isAdmin": False,
                                      "enrollment": {"ott": True}})
    return api.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]


# resources without a create operation whose rows other operations make
SEEDERS: dict[str, Callable[[Api, int], str]] = {"api-sessions": _login_session, "enrollments": _ott_enrollment}


def some_ids(api: Api, name: str, count: int) -> list[str]:
    """Ids of at least ``count`` rows: created from the sample when the resource has create (or
    from its seeder), otherwise whatever rows it already holds."""
    res = resource(name)
    if "create" in res.ops:
        return [make(api, name, i)[0] for i in range(count)]
    if name in SEEDERS:
        return [SEEDERS[name](api, i) for i in range(count)]
    if "list" not in res.ops:
        pytest.skip(f"{name} has neither create nor list")
    rows = api.get(f"/{name}?limit=-1").json()["data"]
    if len(rows) < count:
        pytest.skip(f"{name} has no create op and fewer than {count} rows")
    return [r["id"] for r in rows[:count]]


def detail(api: Api, name: str, id: str) -> dict:
    r = api.get(f"/{name}/{id}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"data", "meta"} and body["meta"] == {}, body
    return body["data"]


def stable(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in VOLATILE}


def check_base(item: dict, name: str) -> None:
    for key in ("id", "createdAt", "updatedAt", "tags", "_links"):
        assert key in item, f"{name}: {key} missing in {item}"
    assert isinstance(item["tags"], dict)
    assert item["_links"]["self"]["href"] == f"./{name}/{item['id']}"
    for key in ("createdAt", "updatedAt"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", item[key]), item[key]


def check_definition(item: dict, name: str) -> None:
    """Every field the upstream detail definition marks required is present, non-null unless nullable."""
    def_name = LIST_ITEMS.get(name)
    if not def_name or def_name not in DEFINITIONS:
        return
    missing, nulls = [], []
    for fname, (required, nullable) in DEFINITIONS[def_name].items():
        if not required:
            continue
        if fname not in item:
            missing.append(fname)
        elif item[fname] is None and not nullable and not upstream_null(name, fname):
            nulls.append(fname)
    assert not missing and not nulls, f"{name} ({def_name}): missing {missing}, null {nulls}"


@pytest.fixture
def user(admin) -> Api:
    """A logged-in non-admin identity."""
    iid = admin.create("identities", {"name": "plain-user", "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": "plain-user",
                                    "password": "Plain-pw1"})
    return admin.__class__(admin.client, admin.prefix).login("plain-user", "Plain-pw1")


# ------------------------------------------------------------------ the checks
@pytest.mark.parametrize("name", params("list"))
def test_list_meta(admin, name):
    r = admin.get(f"/{name}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"data", "meta"}
    assert isinstance(body["data"], list)
    pag = body["meta"]["pagination"]
    assert set(pag) == {"limit", "offset", "totalCount"}
    assert pag["limit"] == 10 and pag["offset"] == 0 and pag["totalCount"] >= len(body["data"])
    fields = body["meta"]["filterableFields"]
    assert {"id", "createdAt", "updatedAt", "tags", "isSystem"} <= set(fields), fields
    for item in body["data"]:
        check_base(item, name)
        check_definition(item, name)


@pytest.mark.parametrize("name", params("list"))
def test_filter_by_id(admin, name):
    id = some_ids(admin, name, 1)[0]
    r = admin.get(f"/{name}", params={"filter": f'id = "{id}"'})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["id"] for x in body["data"]] == [id]
    assert body["meta"]["pagination"]["totalCount"] == 1
    r = admin.get(f"/{name}", params={"filter": 'id = "nothing-has-this-id"'})
    assert r.json()["data"] == [] and r.json()["meta"]["pagination"]["totalCount"] == 0
    # every filterable field is a usable symbol; scalars also sort
    fields = r.json()["meta"]["filterableFields"]
    assert len(fields) == len(set(fields)), fields
    res = resource(name)
    for f in fields:
        kind = res.symbols[f].kind if f in res.symbols else "string"
        if kind in ("set", "tags"):
            query = f"not isEmpty({f})" if kind == "set" else "tags.x = null"
        else:
            query = f"{f} != null sort by {f} desc"
        r2 = admin.get(f"/{name}", params={"filter": query})
        assert r2.status_code == 200, f"{name}: filter {query!r}: {r2.text}"


@pytest.mark.parametrize("name", params("list"))
def test_paging(admin, name):
    some_ids(admin, name, 2)
    total = admin.get(f"/{name}").json()["meta"]["pagination"]["totalCount"]
    assert total >= 2
    r = admin.get(f"/{name}?limit=1&offset=1")
    body = r.json()
    assert len(body["data"]) == 1
    assert body["meta"]["pagination"] == {"limit": 1, "offset": 1, "totalCount": total}
    seen = []
    offset = 0
    while offset < total:
        page = admin.get(f"/{name}?limit=2&offset={offset}").json()
        seen += [x["id"] for x in page["data"]]
        offset += 2
    assert len(seen) == len(set(seen)) == total, "paging must visit every row exactly once"
    everything = admin.get(f"/{name}?limit=-1").json()
    assert len(everything["data"]) == total
    assert everything["meta"]["pagination"]["limit"] == 9223372036854775807


@pytest.mark.parametrize("name", params("create"))
def test_create_envelope_and_detail(admin, name):
    s = sample(name)
    body = s.create(admin, 0)
    r = admin.post(f"/{name}", json=body)
    assert r.status_code == 201, r.text
    created = r.json()
    id = created["data"]["id"]
    assert created == {"data": {"id": id, "_links": {"self": {"href": f"./{name}/{id}"}}}, "meta": {}}
    item = detail(admin, name, id)
    check_base(item, name)
    check_definition(item, name)
    res = resource(name)
    for key, value in body.items():
        f = res.by_name.get(key)
        if key in s.echo_skip or (f is None and key != "tags") or (f is not None and not f.output):
            continue
        assert item[key] == as_read(name, key, value), f"{name}.{key}: sent {value!r}, read {item[key]!r}"
    # the list shows the same rendering as the detail
    listed = admin.get(f"/{name}", params={"filter": f'id = "{id}"'}).json()["data"]
    if "list" in res.ops:
        skip = {f for r, f in LIST_DETAIL_DIFFERENCES if r == name}
        assert {k: v for k, v in stable(listed[0]).items() if k not in skip} == \
               {k: v for k, v in stable(item).items() if k not in skip}


@pytest.mark.parametrize("name", params("update"))
def test_put_replaces(admin, name):
    s = sample(name)
    id, created = make(admin, name, 0)
    before = detail(admin, name, id)
    put = s.put(admin, 1) if s.put else {k: v for k, v in s.create(admin, 1).items() if k != "tags"}
    put.pop("tags", None)
    r = admin.put(f"/{name}/{id}", json=put)
    assert r.status_code == 200, r.text
    assert r.json() == {"data": {}, "meta": {}}
    after = detail(admin, name, id)
    assert after["tags"] == {}, "PUT without tags resets them"
    assert after["id"] == id and after["createdAt"] == before["createdAt"]
    assert after["updatedAt"] >= before["updatedAt"]
    res = resource(name)
    for key, value in put.items():
        f = res.by_name.get(key)
        if key in s.echo_skip or f is None or not f.output:
            continue
        assert after[key] == as_read(name, key, value), f"{name}.{key}: PUT {value!r}, read {after[key]!r}"


@pytest.mark.parametrize("name", params("patch"))
def test_patch_writes_only_sent_fields(admin, name):
    s = sample(name)
    id, created = make(admin, name, 0)
    # upstream's posture-check PATCH body requires the type (its discriminator) in every PATCH
    base = {"typeId": detail(admin, name, id)["typeId"]} if name == "posture-checks" else {}
    r = admin.patch(f"/{name}/{id}", json={**base, "tags": {"a": "1", "b": 2}})
    assert r.status_code == 200, r.text
    before = detail(admin, name, id)
    assert before["tags"] == {"a": "1", "b": 2}

    # {"tags": {}} changes nothing
    r = admin.patch(f"/{name}/{id}", json={**base, "tags": {}})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}, r.text
    assert stable(detail(admin, name, id)) == stable(before)

    change = dict(s.patch) if s.patch is not None else {"name": uniq("patched")}
    r = admin.patch(f"/{name}/{id}", json={**base, **change})
    assert r.status_code == 200, r.text
    after = detail(admin, name, id)
    for key, value in change.items():
        if key in after and key not in s.echo_skip:
            if isinstance(value, dict) and isinstance(after[key], dict):
                for k, v in value.items():
                    assert after[key].get(k) == v, f"{name}.{key}.{k}"
            else:
                assert after[key] == value, f"{name}.{key}: PATCH {value!r}, read {after[key]!r}"
    untouched_before = {k: v for k, v in stable(before).items() if k not in change}
    untouched_after = {k: v for k, v in stable(after).items() if k not in change}
    assert untouched_after == untouched_before, "PATCH changed fields it was not sent"

    # a map in a PATCH replaces the whole map
    r = admin.patch(f"/{name}/{id}", json={**base, "tags": {"c": "3"}})
    assert r.status_code == 200, r.text
    assert detail(admin, name, id)["tags"] == {"c": "3"}


@pytest.mark.parametrize("name", params("delete"))
def test_delete(admin, name):
    id = some_ids(admin, name, 1)[0] if "create" in resource(name).ops or name in SEEDERS else None
    if id is None:
        pytest.skip(f"{name}: no way to make a row to delete")
    r = admin.delete(f"/{name}/{id}")
    assert r.status_code == 200, r.text
    assert r.content == b'{"data":{},"meta":{}}'
    assert_error(admin.get(f"/{name}/{id}"), 404, "NOT_FOUND")
    assert_error(admin.delete(f"/{name}/{id}"), 404, "NOT_FOUND")
    if "list" in resource(name).ops:
        assert admin.get(f"/{name}", params={"filter": f'id = "{id}"'}).json()["data"] == []


@pytest.mark.parametrize("name", params())
def test_unknown_id_is_404(admin, name):
    res = resource(name)
    s = SAMPLES.get(name)
    put = None
    if "update" in res.ops and s is not None:
        put = s.put(admin, 0) if s.put else s.create(admin, 0)
    calls = {"detail": ("GET", None), "update": ("PUT", put), "patch": ("PATCH", {}), "delete": ("DELETE", None)}
    ran = False
    for op, (method, body) in calls.items():
        if op not in res.ops or (op == "update" and body is None):
            continue
        ran = True
        r = admin.request(method, f"/{name}/{FAKE_ID}", json=body)
        err = assert_error(r, 404, "NOT_FOUND")
        assert FAKE_ID in err["cause"]["message"], err
    if not ran:
        pytest.skip(f"{name} has no per-id operations")


@pytest.mark.parametrize("name", params("create"))
def test_validation_error(admin, name):
    s = sample(name)
    if s.invalid is None:
        pytest.skip(f"{name}: no invalid sample")
    body, field_name = s.invalid
    r = admin.post(f"/{name}", json=body)
    if isinstance(body.get(field_name), str) and r.json()["error"]["code"] == "COULD_NOT_PARSE_BODY":
        # a string where another JSON type belongs fails upstream's unmarshalling, before any
        # validation: COULD_NOT_PARSE_BODY, its message naming the field
        err = assert_error(r, 400, "COULD_NOT_PARSE_BODY")
        assert err["cause"]["code"] == "UNHANDLED" and field_name in err["cause"]["message"], err
    else:
        err = assert_error(r, 400, "COULD_NOT_VALIDATE")
        cause = err["cause"]
        assert set(cause) == {"field", "reason", "value"}, cause
        assert cause["field"] == field_name, cause
        assert isinstance(cause["value"], str) and cause["reason"]
    # a body missing its required fields names one of them
    if any(f.required for f in _struct_fields(resource(name).create)):
        err = assert_error(admin.post(f"/{name}", json={}), 400, "COULD_NOT_VALIDATE")
        assert err["cause"]["value"] == "<nil>" and "required" in err["cause"]["reason"]
    # and a PUT is validated as strictly as a create
    if "update" in resource(name).ops:
        id = make(admin, name, 0)[0]
        err = assert_error(admin.put(f"/{name}/{id}", json={}), 400, "COULD_NOT_VALIDATE")
        assert err["cause"]["field"]


def _struct_fields(struct):
    import msgspec
    return msgspec.structs.fields(struct) if struct is not None else ()


@pytest.mark.parametrize("name", params())
def test_non_admin_refused(admin, anon, user, name):
    res = resource(name)
    shapes = {"list": ("GET", f"/{name}"), "create": ("POST", f"/{name}"), "detail": ("GET", f"/{name}/{FAKE_ID}"),
              "update": ("PUT", f"/{name}/{FAKE_ID}"), "patch": ("PATCH", f"/{name}/{FAKE_ID}"),
              "delete": ("DELETE", f"/{name}/{FAKE_ID}")}
    for op in res.ops:
        method, path = shapes[op]
        level = res.level(op)
        body = {} if method in ("POST", "PUT", "PATCH") else None
        r = anon.request(method, path, json=body)
        if level != "public":
            assert_error(r, 401, "UNAUTHORIZED")
        r = user.request(method, path, json=body)
        if level == "admin":
            err = assert_error(r, 401, "UNAUTHORIZED")
            assert "cause" not in err, "a non-admin's refusal carries no cause"
        else:
            assert r.status_code != 401, f"{op} {name} is {level} but refused a non-admin"
        r = user.request(method, path, json=body, headers={"zt-session": ""})
        if level != "public":
            assert_error(r, 401, "UNAUTHORIZED")


def test_every_writable_resource_has_a_sample():
    """A resource that can be created or replaced needs a sample body: without one the checks
    above that need an entity would have nothing to write (they fail too, naming SAMPLES)."""
    assert ALL, "the registry lists no resources"
    missing = [r.name for r in ALL if ("create" in r.ops or "update" in r.ops) and r.name not in SAMPLES]
    assert not missing, f"resources without a sample create body in SAMPLES: {missing}"
    stale = sorted(set(SAMPLES) - {r.name for r in ALL})
    assert not stale, f"SAMPLES names no resource: {stale}"
    with pytest.raises(pytest.fail.Exception, match="add one to SAMPLES"):   # a failure, not a skip
        sample("a-resource-without-a-sample")


ODD_VALUES = [None, "", "x" * 300, 1.5, -1, 1 << 63, True, [], [None], {}, {"a": {"b": 1}}, "not-a-date"]


@pytest.mark.slow
@pytest.mark.parametrize("name", params("create"))
def test_odd_field_values_never_500(admin, name):
    """Every body field, given values of the wrong type or range, gets a 2xx or a 4xx envelope."""
    import msgspec
    s = sample(name)
    res = resource(name)
    body = s.create(admin, 0)
    id = None
    for struct, method in ((res.create, "POST"), (res.patch, "PATCH")):
        if struct is None or (method == "PATCH" and "patch" not in res.ops):
            continue
        if method == "PATCH":
            id = make(admin, name, 1)[0]
        for f in msgspec.structs.fields(struct):
            for value in ODD_VALUES:
                sent = {**body, f.encode_name: value} if method == "POST" else {f.encode_name: value}
                path = f"/{name}" if method == "POST" else f"/{name}/{id}"
                r = admin.request(method, path, json=sent)
                assert r.status_code < 500, f"{method} {name} {f.encode_name}={value!r}: {r.text}"
                if r.status_code >= 400:
                    assert set(r.json()) == {"error", "meta"}, r.text
