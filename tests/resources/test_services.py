"""Services, configs and config types: schema validation, references, immutable fields."""

from __future__ import annotations

import pytest

from tests.builders import Net
from tests.conftest import MGMT, assert_error

BUILTIN = {
    "f2dd2df0-9c04-4b84-a91e-71437ac229f1": "ziti-tunneler-client.v1",
    "cea49285-6c07-42cf-9f52-09a9b115c783": "ziti-tunneler-server.v1",
    "g7cIWbcGg": "intercept.v1",
    "NH5p4FpGR": "host.v1",
    "host.v2": "host.v2",
}
INTERCEPT = "g7cIWbcGg"
HOST = "NH5p4FpGR"
GOOD_INTERCEPT = {"protocols": ["tcp"], "addresses": ["web.ziti"], "portRanges": [{"low": 80, "high": 443}]}
GOOD_HOST = {"protocol": "tcp", "address": "localhost", "port": 8080}


def config(admin, name, type_id, data):
    return admin.post("/configs", json={"name": name, "configTypeId": type_id, "data": data})


# ------------------------------------------------------------------ config types
def test_a_config_types_target_is_checked_then_neither_stored_nor_answered(admin):
    """As v2.0.3: ``target`` (service or router) is validated on create only; the detail, the
    list and the filters know nothing of it, and PUT/PATCH bodies have none (ignored)."""
    err = assert_error(admin.post("/config-types", json={"name": "tg-bad", "target": "nope"}), 400,
                       "COULD_NOT_VALIDATE")
    assert err["cause"] == {"field": "target", "reason": "target in body should be one of [service router]",
                            "value": "nope"}
    assert_error(admin.post("/config-types", json={"name": "tg-num", "target": 5}), 400, "COULD_NOT_PARSE_BODY")
    for target in ("router", "service", None):
        id = admin.create("config-types", {"name": f"tg-{target}", "target": target})
        assert "target" not in admin.get(f"/config-types/{id}").json()["data"]
    assert admin.put(f"/config-types/{id}", json={"name": "tg-None", "target": "bad"}).status_code == 200
    assert admin.patch(f"/config-types/{id}", json={"target": "bad"}).status_code == 200
    assert "target" not in admin.get(f"/config-types/{id}").json()["data"]
    assert_error(admin.get('/config-types?filter=target="router"'), 400, "INVALID_FILTER")


def test_builtin_config_types(admin):
    r = admin.get("/config-types?limit=-1")
    rows = {c["id"]: c for c in r.json()["data"]}
    for id, name in BUILTIN.items():
        assert rows[id]["name"] == name
        assert rows[id]["schema"]["type"] == "object"
    assert r.json()["meta"]["pagination"]["totalCount"] == 5


def test_config_type_schema_must_be_a_valid_object_schema(admin):
    err = assert_error(admin.post("/config-types", json={"name": "bad", "schema": {"type": "array"}}),
                       400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "schema"
    err = assert_error(
        admin.post("/config-types", json={"name": "bad", "schema": {"type": "object", "minProperties": "x"}}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "schema"
    # a string where the schema object belongs: upstream (its schema is any JSON value) drops it;
    # ziti-lite refuses it (README, Documented differences)
    assert_error(admin.post("/config-types", json={"name": "bad", "schema": "nope"}), 400, "COULD_NOT_VALIDATE")
    id = admin.create("config-types", {"name": "no-schema"})
    assert admin.get(f"/config-types/{id}").json()["data"]["schema"] is None  # unset: null, as upstream


def test_config_type_name_rules(admin):
    admin.create("config-types", {"name": "mine"})
    err = assert_error(admin.post("/config-types", json={"name": "mine"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["reason"] == "name must be unique"
    assert_error(admin.post("/config-types", json={"name": "intercept.v1"}), 400, "COULD_NOT_VALIDATE")


def test_delete_config_type_in_use_is_409(admin):
    ct = admin.create("config-types", {"name": "used", "schema": {"type": "object"}})
    cid = admin.create("configs", {"name": "user-of-ct", "configTypeId": ct, "data": {}})
    err = assert_error(admin.delete(f"/config-types/{ct}"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert err["cause"]["field"] == "configTypeId" and cid in err["cause"]["value"]
    assert admin.delete(f"/configs/{cid}").status_code == 200
    assert admin.delete(f"/config-types/{ct}").status_code == 200


# ------------------------------------------------------------------ configs against built-in schemas
@pytest.mark.parametrize(
    "type_id,data",
    [
        (INTERCEPT, GOOD_INTERCEPT),
        (INTERCEPT, {**GOOD_INTERCEPT, "protocols": ["tcp", "udp"], "dialOptions": {"identity": "x"}}),
        (HOST, GOOD_HOST),
        (HOST, {"forwardProtocol": True, "allowedProtocols": ["udp"], "address": "a", "port": 1}),
        ("host.v2", {"terminators": [GOOD_HOST]}),
        ("f2dd2df0-9c04-4b84-a91e-71437ac229f1", {"hostname": "web.ziti", "port": 80}),
        ("cea49285-6c07-42cf-9f52-09a9b115c783", {"hostname": "localhost", "port": 8080, "protocol": "tcp"}),
    ],
)
def test_valid_config_data(admin, type_id, data):
    r = config(admin, "c", type_id, data)
    assert r.status_code == 201, r.text
    d = admin.get(f"/configs/{r.json()['data']['id']}").json()["data"]
    assert d["data"] == data and d["configTypeId"] == type_id
    assert d["configType"] == {
        "entity": "config-types",
        "id": type_id,
        "name": BUILTIN[type_id],
        "_links": {"self": {"href": f"./config-types/{type_id}"}},
    }


@pytest.mark.parametrize(
    "type_id,data",
    [
        (INTERCEPT, {"protocols": ["tcp"], "addresses": ["web.ziti"]}),  # portRanges missing
        (INTERCEPT, {**GOOD_INTERCEPT, "protocols": ["icmp"]}),
        (INTERCEPT, {**GOOD_INTERCEPT, "portRanges": [{"low": 80, "high": 70000}]}),
        (INTERCEPT, {**GOOD_INTERCEPT, "addresses": []}),
        (HOST, {"protocol": "tcp", "address": "localhost"}),  # port missing
        (HOST, {**GOOD_HOST, "port": "8080"}),
        (HOST, {**GOOD_HOST, "surprise": 1}),
        ("host.v2", {"terminators": []}),
        ("f2dd2df0-9c04-4b84-a91e-71437ac229f1", {"hostname": "web.ziti", "port": -1}),
    ],
)
def test_invalid_config_data_is_400(admin, type_id, data):
    err = assert_error(config(admin, "c", type_id, data), 400, "COULD_NOT_VALIDATE")
    # named as upstream names it: the path inside data ("port", "protocols.0"), "(root)" for data itself
    field = err["cause"]["field"]
    assert field == "(root)" or (field and not field.startswith("data")), err
    assert isinstance(err["cause"]["value"], str) and err["cause"]["reason"]


def test_config_with_unknown_type(admin):
    assert_error(config(admin, "c", "nope", {}), 400, "COULD_NOT_VALIDATE")


def test_config_data_required_and_object(admin):
    assert_error(admin.post("/configs", json={"name": "c", "configTypeId": HOST}), 400, "COULD_NOT_VALIDATE")
    assert_error(
        admin.post("/configs", json={"name": "c", "configTypeId": HOST, "data": [1]}), 400, "COULD_NOT_VALIDATE"
    )  # upstream's data is any JSON value: an array fails its mapping to the model (a field error)


def test_config_updates_are_validated_and_type_is_fixed(admin):
    cid = admin.create("configs", {"name": "h", "configTypeId": HOST, "data": GOOD_HOST})
    err = assert_error(
        admin.patch(f"/configs/{cid}", json={"data": {"protocol": "sctp", "address": "a", "port": 1}}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "protocol"  # the path inside data, as upstream
    assert_error(admin.put(f"/configs/{cid}", json={"name": "h", "data": {}}), 400, "COULD_NOT_VALIDATE")
    r = admin.put(f"/configs/{cid}", json={"name": "h2", "configTypeId": INTERCEPT, "data": {**GOOD_HOST, "port": 9}})
    assert r.status_code == 200, r.text
    d = admin.get(f"/configs/{cid}").json()["data"]
    assert d["configTypeId"] == HOST and d["data"]["port"] == 9 and d["name"] == "h2"
    # PATCH replaces data as a whole
    assert (
        admin.patch(f"/configs/{cid}", json={"data": {"protocol": "udp", "address": "b", "port": 2}}).status_code == 200
    )
    assert admin.get(f"/configs/{cid}").json()["data"]["data"] == {"protocol": "udp", "address": "b", "port": 2}


def test_config_type_filter(admin):
    admin.create("configs", {"name": "i1", "configTypeId": INTERCEPT, "data": GOOD_INTERCEPT})
    admin.create("configs", {"name": "h1", "configTypeId": HOST, "data": GOOD_HOST})
    rows = admin.get("/configs", params={"filter": f'type = "{HOST}"'}).json()["data"]
    assert [c["name"] for c in rows] == ["h1"]


# ------------------------------------------------------------------ services
def test_service_defaults_and_detail(admin):
    sid = admin.create("services", {"name": "svc", "encryptionRequired": False})
    d = admin.get(f"/services/{sid}").json()["data"]
    assert d["terminatorStrategy"] == "smartrouting" and d["maxIdleTimeMillis"] == 0
    # null: upstream's storage keeps no empty list
    assert d["configs"] is None and d["roleAttributes"] is None and d["config"] in ({}, None)
    assert d["encryptionRequired"] is False
    assert isinstance(d["permissions"], list) and isinstance(d["postureQueries"], list)
    for rel in ("service-edge-router-policies", "service-policies", "terminators", "configs"):
        assert d["_links"][rel] == {"href": f"./services/{sid}/{rel}"}


def test_service_requires_encryption_flag(admin):
    err = assert_error(admin.post("/services", json={"name": "svc"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "encryptionRequired"


def test_service_configs_by_id_or_name(admin):
    i = admin.create("configs", {"name": "icpt", "configTypeId": INTERCEPT, "data": GOOD_INTERCEPT})
    h = admin.create("configs", {"name": "hst", "configTypeId": HOST, "data": GOOD_HOST})
    sid = admin.create("services", {"name": "svc", "encryptionRequired": True, "configs": [i, "hst"]})
    assert admin.get(f"/services/{sid}").json()["data"]["configs"] == sorted([i, h])  # a set: in id order, as upstream
    err = assert_error(
        admin.post("/services", json={"name": "s2", "encryptionRequired": True, "configs": ["nope"]}), 404, "NOT_FOUND"
    )
    assert "nope" in err["cause"]["message"]


def test_two_configs_of_one_type_on_a_service_is_400(admin):
    a = admin.create("configs", {"name": "h-a", "configTypeId": HOST, "data": GOOD_HOST})
    b = admin.create("configs", {"name": "h-b", "configTypeId": HOST, "data": GOOD_HOST})
    err = assert_error(
        admin.post("/services", json={"name": "s", "encryptionRequired": True, "configs": [a, b]}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "configs"
    sid = admin.create("services", {"name": "s", "encryptionRequired": True, "configs": [a]})
    assert_error(admin.patch(f"/services/{sid}", json={"configs": [a, b]}), 400, "COULD_NOT_VALIDATE")
    assert admin.get(f"/services/{sid}").json()["data"]["configs"] == [a]


def test_deleting_a_config_removes_it_from_services(admin):
    a = admin.create("configs", {"name": "h-a", "configTypeId": HOST, "data": GOOD_HOST})
    sid = admin.create("services", {"name": "s", "encryptionRequired": True, "configs": [a]})
    assert admin.delete(f"/configs/{a}").status_code == 200
    # null: upstream's storage keeps no empty list
    assert admin.get(f"/services/{sid}").json()["data"]["configs"] is None
    r = admin.post("/database/check-data-integrity")
    assert r.status_code == 202


def test_terminator_strategy(admin):
    sid = admin.create("services", {"name": "s", "encryptionRequired": True, "terminatorStrategy": "weighted"})
    assert admin.get(f"/services/{sid}").json()["data"]["terminatorStrategy"] == "weighted"
    assert_error(
        admin.post("/services", json={"name": "s2", "encryptionRequired": True, "terminatorStrategy": "best"}),
        404,
        "NOT_FOUND",
    )


def test_service_put_resets_and_patch_keeps(admin):
    c = admin.create("configs", {"name": "h", "configTypeId": HOST, "data": GOOD_HOST})
    sid = admin.create(
        "services",
        {
            "name": "s",
            "encryptionRequired": True,
            "configs": [c],
            "roleAttributes": ["x"],
            "maxIdleTimeMillis": 5,
            "terminatorStrategy": "random",
            "tags": {"a": 1},
        },
    )
    assert admin.patch(f"/services/{sid}", json={"name": "s1"}).status_code == 200
    d = admin.get(f"/services/{sid}").json()["data"]
    assert (
        d["name"],
        d["configs"],
        d["roleAttributes"],
        d["maxIdleTimeMillis"],
        d["terminatorStrategy"],
        d["tags"],
    ) == ("s1", [c], ["x"], 5, "random", {"a": 1})
    assert admin.put(f"/services/{sid}", json={"name": "s2"}).status_code == 200
    d = admin.get(f"/services/{sid}").json()["data"]
    # unset lists read null, as upstream's
    assert (d["configs"], d["roleAttributes"], d["maxIdleTimeMillis"], d["terminatorStrategy"], d["tags"]) == (
        None,
        None,
        0,
        "smartrouting",
        {},
    )


def test_service_names_unique(admin):
    admin.create("services", {"name": "same", "encryptionRequired": True})
    err = assert_error(
        admin.post("/services", json={"name": "same", "encryptionRequired": True}), 400, "COULD_NOT_VALIDATE"
    )
    assert err["cause"] == {"field": "name", "reason": "name must be unique", "value": "same"}


def test_config_type_schema_keys_sorted_as_upstream(admin):
    # upstream keeps the schema as a map: its answers list keys sorted at every level
    id = admin.create("config-types", {"name": "sorted-schema", "schema": {
        "type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}})
    r = admin.get(f"/config-types/{id}")
    schema_text = r.text[r.text.index('"schema"'):]
    assert schema_text.index('"properties"') < schema_text.index('"type"')
    assert schema_text.index('"alpha"') < schema_text.index('"zeta"')
    intercept = admin.get('/config-types?filter=name="intercept.v1"').json()["data"][0]["schema"]
    assert list(intercept["properties"]) == sorted(intercept["properties"])


def test_config_data_and_schema_that_are_not_objects_are_refused_as_upstream(admin):
    host = admin.get('/config-types?filter=name="host.v1"').json()["data"][0]["id"]
    for data, value in (("text", "text"), (["tcp"], "[tcp]"), (7, "7"), (True, "true")):
        r = admin.post("/configs", json={"name": "not-an-object", "configTypeId": host, "data": data})
        assert_error(r, 400, "COULD_NOT_VALIDATE")
        assert r.json()["error"]["cause"] == {"field": "data", "reason": "invalid type, expected object",
                                              "value": value}
    for body in ({"name": "null-data", "configTypeId": host, "data": None}, {"name": "no-data", "configTypeId": host}):
        r = admin.post("/configs", json=body)
        assert_error(r, 400, "COULD_NOT_VALIDATE")
        assert r.json()["error"]["cause"] == {"field": "data", "reason": "data in body is required", "value": "<nil>"}
    cfg = admin.create("configs", {"name": "ok", "configTypeId": host,
                                   "data": {"protocol": "tcp", "address": "127.0.0.1", "port": 80}})
    r = admin.put(f"/configs/{cfg}", json={"name": "ok", "data": "text"})
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    assert r.json()["error"]["cause"]["field"] == "data"
    r = admin.patch(f"/configs/{cfg}", json={"data": ["x"]})
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    r = admin.post("/config-types", json={"name": "schema-text", "schema": "object"})
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    # worded as upstream's body validation (a string value quoted after it, other values not)
    assert r.json()["error"]["cause"] == {
        "field": "schema", "reason": 'schema in body must be of type object: "object"', "value": "object"}
    r = admin.post("/config-types", json={"name": "schema-number", "schema": 5})
    assert r.json()["error"]["cause"] == {"field": "schema", "reason": "schema in body must be of type object",
                                          "value": "5"}
    assert admin.post("/config-types", json={"name": "schema-null", "schema": None}).status_code == 201


def test_the_services_list_of_a_demoted_default_admin_and_of_a_permission_holder(admin):
    net = Net(admin)
    reached, hidden = net.service("reached"), net.service("hidden")
    me = admin.get("/current-identity").json()["data"]["id"]
    net.sp("Dial", identities=["@" + me], services=["@" + reached])
    reader_id, reader = net.user()
    assert admin.patch(f"/identities/{reader_id}", json={"permissions": ["service.read"]}).status_code == 200
    reader_api = net.login(reader, prefix=MGMT)
    assert admin.patch(f"/identities/{me}", json={"isAdmin": False}).status_code == 200
    # v1.3.3: the default admin keeps its management access but lists services through policies
    assert {s["id"] for s in admin.get("/services").json()["data"]} == {reached}
    assert {s["id"] for s in admin.get("/services?roleFilter=%23hidden").json()["data"]} == {hidden}
    assert admin.get(f"/services/{reached}").status_code == 200
    err = assert_error(admin.get(f"/services/{hidden}"), 404, "NOT_FOUND")   # as the live v1.3.3 answers
    assert err["cause"] == {"code": "UNHANDLED", "message": f"service with id {hidden} not found"}
    assert reader_api.get(f"/services/{hidden}").status_code == 200
    # v2.0.3: an identity reading by permission lists every service
    assert {reached, hidden} <= {s["id"] for s in reader_api.get("/services").json()["data"]}
    assert admin.patch(f"/identities/{me}", json={"isAdmin": True}).status_code == 200
    assert {reached, hidden} <= {s["id"] for s in admin.get("/services").json()["data"]}
