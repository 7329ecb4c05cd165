"""The served OpenAPI document, generated from ziti-lite's own route table and structs.

Request bodies come from the msgspec structs the handlers decode with; resource details come
from the Resource field declarations; so the spec and the server cannot drift apart.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import msgspec
import yaml

from .. import __version__, permissions
from ..auth.methods import METHODS  # the primary methods registered in this process

if TYPE_CHECKING:
    from .common import HandlersController

_KIND_SCHEMA: dict[str, dict[str, Any]] = {
    "string": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
    "bool": {"type": "boolean"}, "datetime": {"type": "string", "format": "date-time"},
    "json": {}, "set": {"type": "array", "items": {"type": "string"}}, "map": {"type": "object"},
}
_ERROR = {"$ref": "#/components/schemas/apiErrorEnvelope"}


def _detail_schema(res) -> dict:
    props: dict[str, Any] = {
        "id": {"type": "string"}, "createdAt": {"type": "string", "format": "date-time"},
        "updatedAt": {"type": "string", "format": "date-time"}, "tags": {"type": "object"},
        "_links": {"type": "object"},
    }
    for f in (*(f for f in res.fields if f.output), *res.computed):
        s = dict(_KIND_SCHEMA[f.kind])
        if (f.nullable or f.empty_null) and s:
            s = {"anyOf": [s, {"type": "null"}]}
        props[f.name] = s
    for r in res.refs:
        props[r.name] = {"anyOf": [{"type": "object"}, {"type": "null"}]}
    for name, value in res.constants.items():
        props[name] = {"type": {bool: "boolean", int: "integer", str: "string", type(None): "null"}[type(value)]}
    return {"type": "object", "properties": props, "required": ["id", "createdAt", "updatedAt", "_links"]}


_ERRORS = {"400": "invalid request (COULD_NOT_VALIDATE, INVALID_FILTER, ...)",
           "401": "missing, expired or insufficient session", "404": "no such entity or path"}
_QUERY: dict[str, dict[str, Any]] = {
    "limit": {"type": "integer"}, "offset": {"type": "integer"}, "filter": {"type": "string"},
    "policyType": {"type": "string", "enum": ["dial", "bind"]},
    "roleSemantic": {"type": "string", "enum": ["AllOf", "AnyOf"]},
}


def _query_schema(route, name: str) -> dict:
    """The schema of a documented query parameter (a string unless known better)."""
    if name == "method" and route.path == "/authenticate":
        return {"type": "string", "enum": sorted(METHODS)}
    return dict(_QUERY.get(name, {"type": "string"}))


# each API's title, description and the edition of upstream's spec it serves: those of OpenZiti
# v2.0.3 (edge API 0.29.0, fabric API 0.16.54); the document is built from ziti-lite's own route
# table, so ziti-lite's own operations (x-ziti-lite-permission, /ziti-lite/v1/...) are in it too
EDITIONS = {
    "management": ("Ziti Edge Management", "OpenZiti Edge Management API", "0.29.0"),
    "client": ("Ziti Edge Client", "OpenZiti Edge Client API", "0.29.0"),
    "fabric": ("Ziti Fabric", "OpenZiti Fabric API", "0.16.54"),
}


def build(ctl: HandlersController, api: str) -> dict:
    bodies = sorted({r.body for r in ctl.router.routes if r.api == api and isinstance(r.body, type)},
                    key=lambda t: t.__name__)
    _, components = msgspec.json.schema_components(bodies, ref_template="#/components/schemas/{name}")
    components["apiErrorEnvelope"] = {
        "type": "object", "required": ["error", "meta"],
        "properties": {"error": {"type": "object", "properties": {
            "code": {"type": "string"}, "message": {"type": "string"}, "requestId": {"type": "string"},
            "cause": {"type": "object"}}}, "meta": {"type": "object"}}}
    components["createEnvelope"] = {
        "type": "object", "required": ["data", "meta"],
        "properties": {"data": {"type": "object", "required": ["id", "_links"], "properties": {
            "id": {"type": "string"}, "_links": {"type": "object"}}}, "meta": {"type": "object"}}}
    components["emptyEnvelope"] = {
        "type": "object", "required": ["data", "meta"],
        "properties": {"data": {"type": "object"}, "meta": {"type": "object"}}}
    paths: dict[str, dict] = {}
    for r in ctl.router.routes:
        if r.api != api:
            continue
        item: dict[str, Any] = {"operationId": r.op_id, "tags": [r.tag or "default"], "responses": {}}
        params = [{"name": p[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in r.path.split("/") if p.startswith("{")]
        for q in r.query:
            params.append({"name": q, "in": "query", "required": q == "method", "schema": _query_schema(r, q)})
        if params:
            item["parameters"] = params
        if r.auth != "public":
            item["security"] = [{"ztSession": []}]
        if r.auth == "admin":   # OpenZiti 2.0's permission the operation needs (permissions.py)
            item["x-ziti-lite-permission"] = permissions.label(r.perm)
        if isinstance(r.body, type):
            item["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{r.body.__name__}"}}}}
        elif isinstance(r.body, str):
            item["requestBody"] = {"content": {r.body: {"schema": {"type": "string"}}}}
        ok: dict[str, Any] = {"description": "success"}
        if r.resource is not None and r.method == "GET":
            detail = _detail_schema(r.resource)
            data = {"type": "array", "items": detail} if r.path.endswith(r.resource.name) else detail
            ok["content"] = {"application/json": {"schema": {"type": "object", "properties": {
                "data": data, "meta": {"type": "object"}}, "required": ["data", "meta"]}}}
        elif r.resource is not None and r.method == "POST":
            ok["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/createEnvelope"}}}
        elif r.resource is not None:
            ok["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/emptyEnvelope"}}}
        item["responses"][str(r.status)] = ok
        for status in ("400", "401", "404"):
            item["responses"][status] = {
                "description": _ERRORS[status],
                "content": {"application/json": {"schema": _ERROR}},
            }
        item["responses"]["default"] = {
            "description": "any other error, in the same envelope",
            "content": {"application/json": {"schema": _ERROR}},
        }
        paths.setdefault(r.path, {})[r.method.lower()] = item
    base = {"management": "/edge/management/v1", "fabric": "/fabric/v1"}.get(api, "/edge/client/v1")
    title, description, edition = EDITIONS[api]
    return {
        "openapi": "3.1.0",
        # the edition of upstream's API these operations are (v2.0.3's), with ziti-lite's own among them
        "info": {"title": title, "description": description, "version": edition,
                 "x-ziti-lite-version": __version__},
        "servers": [{"url": base}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"ztSession": {"type": "apiKey", "in": "header", "name": "zt-session"}},
        },
    }


@functools.lru_cache(maxsize=8)
def document_bytes(ctl: HandlersController, api: str) -> bytes:
    return msgspec.json.encode(build(ctl, api))


@functools.lru_cache(maxsize=8)
def document_yaml(ctl: HandlersController, api: str) -> bytes:
    """The same document as YAML (what a request that accepts YAML gets, as upstream serves it);
    libyaml's emitter where PyYAML has it (ten times the pure-Python one's pace)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(build(ctl, api), Dumper=dumper, sort_keys=False).encode()
