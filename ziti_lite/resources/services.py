"""Services, configs and config types."""

from __future__ import annotations

import functools
import json
import re
import typing
from typing import TYPE_CHECKING, Any

import jsonschema
import msgspec

from ..api import crud
from ..api.resource import Field, Ref, Resource
from ..errors import CouldNotValidate, NotFound, ReferencedEntity
from . import service_view
from .common import NAME, ROLE_ATTRIBUTES, Attributes, Body, Tags, check_attributes, check_name, exists

if TYPE_CHECKING:
    from ..api.context import Ctx

TERMINATOR_STRATEGIES = ("smartrouting", "weighted", "random", "sticky")


# ---------------------------------------------------------------- config types
class ConfigTypeUpdate(Body):
    name: str
    schema: Any = None   # an object; any other JSON value is refused by prepare_config_type
    tags: Tags | None = None


class ConfigTypeCreate(ConfigTypeUpdate):
    # what a config of the type configures (OpenZiti 2.0): checked, then neither stored nor
    # answered, as upstream v2.0.3 does; its update and patch bodies have no target
    target: str | None = None


CONFIG_TYPE_TARGETS = ("service", "router")


def prepare_config_type(ctx: Ctx, values: dict, existing: dict | None) -> None:
    target = values.pop("target", None)
    if target is not None and target not in CONFIG_TYPE_TARGETS:
        raise CouldNotValidate("target", f"target in body should be one of [{' '.join(CONFIG_TYPE_TARGETS)}]",
                               target)
    check_name(values)
    if values.get("name") == "all":
        raise CouldNotValidate("name", "name 'all' is reserved", "all")
    if "schema" in values or existing is None:
        schema = values.get("schema") or {}
        if not isinstance(schema, dict):
            # refused by upstream's body validation, in its words (a string value quoted after)
            suffix = f": {json.dumps(schema)}" if isinstance(schema, str) else ""
            raise CouldNotValidate("schema", "schema in body must be of type object" + suffix, schema)
        if schema:
            try:
                jsonschema.Draft7Validator.check_schema(schema)
            except jsonschema.SchemaError as e:
                raise CouldNotValidate("schema", f"invalid schema: {e.message}", schema) from None
            if schema.get("type") != "object":
                raise CouldNotValidate("schema", "the root type of a config type schema must be object", schema)
        values["schema"] = schema


def before_delete_config_type(ctx: Ctx, row: dict) -> None:
    ids = ctx.store.column("SELECT id FROM configs WHERE config_type_id = ?", (row["id"],))
    if ids:
        raise ReferencedEntity("configTypeId", "configType", "config", ids)


def render_config_type(ctx: Ctx, row: dict, out: dict) -> None:
    # upstream keeps a schema as a map and so answers its keys sorted at every level (forms built
    # from it, the console's, list properties in that order)
    if out.get("schema") is not None:
        out["schema"] = crud.Raw(msgspec.json.encode(msgspec.json.decode(row["schema"]), order="sorted"))


CONFIG_TYPES = Resource(
    name="config-types", entity="configType", table="config_types", permission="config-type",
    fields=(NAME, Field("schema", "json", empty_null=True)),
    create=ConfigTypeCreate, update=ConfigTypeUpdate,
    filters=("name", "schema"),
    prepare=prepare_config_type, before_delete=before_delete_config_type, render=render_config_type,
    auth={"delete": "admin"},
)


# ---------------------------------------------------------------- configs
class ConfigCreate(Body):
    name: str
    config_type_id: str
    data: Any   # an object: checked by prepare_config with upstream's error
    tags: Tags | None = None


class ConfigUpdate(Body):
    name: str
    data: Any
    tags: Tags | None = None


@functools.lru_cache(maxsize=256)
def _go_regex(pattern: str) -> re.Pattern:
    """A schema ``pattern`` read as upstream's validator (Go's RE2) and ECMA 262 read it: outside
    a character class an unescaped ``$`` is the end of the text (Python's also matches before a
    final newline: ``"\\n"`` would fail ``not: {pattern: "^$"}``), and ``\\d``, ``\\w``, ``\\s`` are ASCII."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":   # "[]...]": a leading ] is a literal
                out.append("[]")
                i += 2
                continue
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out), re.ASCII)
    except re.error:  # check_schema compiled the pattern as written: keep Python's reading
        return re.compile(pattern)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _go_regex(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


ConfigValidator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": _pattern})


@functools.lru_cache(maxsize=64)
def _validator(schema_text: str):
    return ConfigValidator(json.loads(schema_text))


def validate_config_data(store, type_id: str, data: Any) -> None:
    schema_text = store.value("SELECT schema FROM config_types WHERE id = ?", (type_id,))
    if schema_text is None:
        raise CouldNotValidate("type", "invalid config type", type_id)
    if not json.loads(schema_text):
        return
    err = next(iter(sorted(_validator(schema_text).iter_errors(data), key=lambda e: list(e.path))), None)
    if err is not None:
        # named as upstream's schema validator names it: the path inside data, "(root)" for data itself
        field = ".".join(map(str, err.absolute_path)) or "(root)"
        raise CouldNotValidate(
            field, err.message, err.instance if not isinstance(err.instance, (dict, list)) else json.dumps(err.instance)
        )


def prepare_config(ctx: Ctx, values: dict, existing: dict | None) -> None:
    if "data" in values and not isinstance(values["data"], dict):
        # as upstream: null fails its body validation, any other value its mapping to the model
        if values["data"] is None:
            raise CouldNotValidate("data", "data in body is required", None)
        raise CouldNotValidate("data", "invalid type, expected object", values["data"])
    check_name(values)
    type_id = existing["config_type_id"] if existing else values.get("config_type_id")
    if existing is None and not exists(ctx.store, "config_types", type_id):
        raise CouldNotValidate("type", "invalid config type", type_id)
    values.pop("config_type_id", None) if existing else None
    if "data" in values:
        validate_config_data(ctx.store, str(type_id), values["data"])
    if existing is None:
        values["config_type_id"] = type_id


def before_delete_config(ctx: Ctx, row: dict) -> None:
    ids = ctx.store.column("SELECT DISTINCT identity_id FROM identity_service_configs WHERE config_id = ?",
                           (row["id"],))
    if ids:
        raise ReferencedEntity("configId", "config", "identity", ids)
    for sid, configs in ctx.store.conn.execute(
        "SELECT s.id, s.configs FROM services s JOIN service_configs sc ON sc.service_id = s.id WHERE sc.config_id = ?",
        (row["id"],),
    ).fetchall():
        remaining = [c for c in json.loads(typing.cast(str, configs)) if c != row["id"]]
        ctx.store.execute("UPDATE services SET configs = ? WHERE id = ?", (json.dumps(remaining), sid))


CONFIGS = Resource(
    name="configs",
    permission="config",
    entity="config",
    fields=(NAME, Field("configTypeId", column="config_type_id"), Field("data", "json")),
    refs=(Ref("configType", "config_type_id", "config-types"),),
    create=ConfigCreate,
    update=ConfigUpdate,
    filters=("name", "type"),
    extra_symbols={"type": crud.fq.Symbol("string", "t.config_type_id")},
    prepare=prepare_config,
    before_delete=before_delete_config,
)


# ---------------------------------------------------------------- services
class ServiceCreate(Body):
    name: str
    encryption_required: bool
    role_attributes: Attributes | None = None
    configs: list[str] | None = None
    terminator_strategy: str | None = None
    max_idle_time_millis: int = 0
    tags: Tags | None = None


class ServiceUpdate(Body):
    name: str
    encryption_required: bool = False
    role_attributes: Attributes | None = None
    configs: list[str] | None = None
    terminator_strategy: str | None = None
    max_idle_time_millis: int = 0
    tags: Tags | None = None


def prepare_service(ctx: Ctx, values: dict, existing: dict | None) -> None:
    store = ctx.store
    check_name(values)
    check_attributes(values)
    if existing is not None and ctx.route.method == "PATCH":
        values.pop("encryption_required", None)  # read-only after create for PATCH, as upstream
    if "terminator_strategy" in values or existing is None:
        ts = values.get("terminator_strategy") or "smartrouting"
        if ts not in TERMINATOR_STRATEGIES:
            raise NotFound(message=f"terminatorStrategy with name {ts} not found")
        values["terminator_strategy"] = ts
    if "configs" in values or existing is None:
        configs = list(dict.fromkeys(values.get("configs") or []))
        by_type: dict[str, str] = {}
        for cid in configs:
            row = store.one("SELECT id, name, config_type_id FROM configs WHERE id = ? OR name = ?", (cid, cid))
            if row is None:
                raise NotFound("config", cid)
            other = by_type.get(row["config_type_id"])
            if other:
                tname = store.value("SELECT name FROM config_types WHERE id = ?", (row["config_type_id"],))
                raise CouldNotValidate(
                    "configs",
                    f"duplicate configs named {other} and {row['name']} found for config type {tname}."
                    " Only one config of a given typed is allowed per service ",
                    configs,
                )
            by_type[row["config_type_id"]] = row["name"]
        values["configs"] = [store.value("SELECT id FROM configs WHERE id = ? OR name = ?", (c, c)) for c in configs]
    for key in ("role_attributes", "tags"):
        if key in values and values[key] is None:
            values[key] = [] if key == "role_attributes" else {}


def after_service(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    if values is not None and "configs" in values:
        ctx.store.execute("DELETE FROM service_configs WHERE service_id = ?", (id,))
        ctx.store.executemany(
            "INSERT INTO service_configs (service_id, config_id) VALUES (?, ?)", [(id, c) for c in values["configs"]]
        )


def render_service(ctx: Ctx, row: dict, out: dict) -> None:
    service_view.decorate(ctx, row, out)


SERVICES = Resource(
    name="services",
    entity="service",
    permission="service",
    fields=(
        NAME,
        ROLE_ATTRIBUTES,
        Field("configs", "set"),
        Field("encryptionRequired", "bool"),
        Field("terminatorStrategy"),
        Field("maxIdleTimeMillis", "int"),
    ),
    create=ServiceCreate,
    update=ServiceUpdate,
    links=("service-edge-router-policies", "service-policies", "terminators", "configs"),
    # upstream's edge service store: its service store's symbols, then its own
    filters=("name", "terminatorStrategy", "roleAttributes", "configs"),
    computed=(Field("permissions", "json"), Field("config", "json"), Field("postureQueries", "json")),
    prepare=prepare_service,
    after_write=after_service,
    render=render_service,
    before_read=service_view.guard_detail,
)
crud.prefetch(SERVICES)(service_view.prefetch)

RESOURCES = (CONFIG_TYPES, CONFIGS, SERVICES)
