"""The plan: what to create, update (field by field) and delete so that the network matches
the file, and its readable rendering.

Entities are matched by name within their kind. Only the fields the file gives are compared,
and of those only the ones the API lets a PATCH change (the resource table's update body:
``wiring.resource(...).update``) and the export carries; the others (an identity's enrollment
or hosting costs, read-only fields, ...) are used when the entity is created. ``@name`` references are compared
as names, as ``exchange.export`` writes them. With ``prune``, what the network has and the file
does not is deleted, only within the kinds the file names and never a built-in (those
``exchange.export`` leaves out, and the embedded edge router).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .. import exchange, wiring
from .document import NetcodeError, Network

ORDER = exchange.IMPORT_ORDER
# wire fields of the update body that the export shows under another name
EXPORTED_AS = {"identities": {"authPolicyId": "authPolicy", "type": "typeId"}}
# values never printed: they are credentials
SECRET_KEYS = frozenset({"password", "secret", "clientSecret", "privateKey", "key", "token", "enrollmentToken",
                         "jwt", "ott"})


@dataclass
class Change:
    action: str                      # create | update | delete
    kind: str
    name: str
    entity: dict                     # the file's entity (create, update) or the network's (delete)
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)   # update: field -> (old, new)


def comparable(kind: str) -> frozenset[str]:
    """The fields a plan compares: those of the resource's update body, as the export names them."""
    res = wiring.resource(exchange.COLLECTION[kind])
    names = {f.encode_name for f in msgspec.structs.fields(res.update)} if res.update else set()
    renames = EXPORTED_AS.get(kind, {})
    return frozenset(renames.get(n, n) for n in names) - {"name"}


def _roles(kind: str) -> set[str]:
    return set(exchange.ROLES.get(kind, {})) | ({"configs"} if kind == "services" else set())


def canonical(kind: str, key: str, value: Any) -> Any:
    """Equal when the API treats them alike: empty lists, maps and null; role lists, and every
    list of strings (role attributes and the other sets, which the API stores sorted and without
    repeats, as upstream), in any order."""
    if value in (None, [], {}):
        return None
    if isinstance(value, list) and (key in _roles(kind) or all(isinstance(v, str) for v in value)):
        return sorted({json.dumps(v) for v in value})
    return value


def desired_entity(kind: str, entity: dict) -> dict:
    e = dict(entity)
    if kind == "identities" and "type" in e:
        e.setdefault("typeId", e.pop("type"))
    return e


def _system_changes(network: Network, system: dict[str, dict]) -> list[Change]:
    """The router identities and default admin a 2.0 export lists (or any identity of the file
    named as one of the network's), as 2.0's importer takes them: never created, matched by
    name, their role attributes set. A router's identity the same run creates (with its router)
    gets its attributes after the router."""
    new_routers = {e["name"] for e in network.entities.get("edgeRouters", [])}
    out = []
    for entity in network.entities.get("identities", []):
        if not (exchange.system_identity(entity) or entity["name"] in system):
            continue
        name, want = entity["name"], entity.get("roleAttributes")
        old = system.get(name)
        if old is None and not (name in new_routers and want):
            continue   # not in this network and not coming with a router of the file: nothing to set
        before = old.get("roleAttributes") if old is not None else None
        if canonical("identities", "roleAttributes", want) != canonical("identities", "roleAttributes", before):
            out.append(Change("update", "identities", name, entity, {"roleAttributes": (before, want or [])}))
    return out


def compute(current: dict[str, list[dict]], network: Network, prune: bool,
            protected: set[tuple[str, str]], system: dict[str, dict] | None = None) -> list[Change]:
    """``system``: the network's router identities and default admin by name
    (``exchange.system_identities``), which a 2.0 export's identities may name."""
    changes: list[Change] = []
    for kind in ORDER:
        if kind not in network.entities:
            if kind == "edgeRouters":
                changes.extend(_system_changes(network, system or {}))
            continue
        have = {e["name"]: e for e in current.get(kind) or []}
        fields = comparable(kind)
        for entity in network.entities[kind]:
            if kind == "identities" and (exchange.system_identity(entity) or entity["name"] in (system or {})):
                continue   # a router's identity or the default admin, after the edge routers: _system_changes
            if exchange.system_policy(kind, entity):
                continue   # a router's own, which comes with it (and is never exported)
            want = desired_entity(kind, entity)
            old = have.get(want["name"])
            if old is None:
                changes.append(Change("create", kind, want["name"], want))
                continue
            # a field the export does not carry (an identity's hosting costs, ...) cannot be
            # compared: like create-only fields, it is set when the entity is created
            diff = {k: (old.get(k), v) for k, v in want.items()
                    if k in fields and k in old and canonical(kind, k, v) != canonical(kind, k, old.get(k))}
            if diff:
                changes.append(Change("update", kind, want["name"], want, diff))
        if kind == "edgeRouters":
            changes.extend(_system_changes(network, system or {}))
    if prune:
        for kind in reversed(ORDER):
            if kind not in network.entities:
                continue
            wanted = {e["name"] for e in network.entities[kind]}
            for e in current.get(kind) or []:
                if e["name"] not in wanted and (kind, e["name"]) not in protected:
                    changes.append(Change("delete", kind, e["name"], e))
    return changes


# ------------------------------------------------------------------ references
def references(kind: str, entity: dict) -> list[tuple[str, str, str]]:
    """Every ``@`` reference of a file entity: (field, target collection, the value)."""
    out: list[tuple[str, str, str]] = []

    def add(field: str, collection: str, value: Any) -> None:
        if isinstance(value, str) and value.startswith("@"):
            out.append((field, collection, value))
        elif value is not None:
            raise NetcodeError(f"field {field!r} must be an @name reference, got {value!r}")

    if kind == "identities" and "authPolicy" in entity:
        add("authPolicy", "auth-policies", entity["authPolicy"])
    elif kind == "configs":
        add("configType", "config-types", entity.get("configType"))
        if entity.get("configType") is None:
            raise NetcodeError("field 'configType' is required (an @name of a config type)")
    elif kind == "services":
        for c in _list(entity, "configs"):
            add("configs", "configs", c)
    elif kind == "externalJwtSigners":
        policy = entity.get("enrollAuthPolicyId")   # "default" is the same id everywhere
        if isinstance(policy, str) and policy.startswith("@"):
            add("enrollAuthPolicyId", "auth-policies", policy)
    elif kind == "authPolicies":
        primary = entity.get("primary") or {}
        ext = primary.get("extJwt") or {} if isinstance(primary, dict) else {}
        for s in _list(ext, "allowedSigners") if isinstance(ext, dict) else []:
            add("primary.extJwt.allowedSigners", "external-jwt-signers", s)
        secondary = entity.get("secondary") or {}
        if isinstance(secondary, dict) and secondary.get("requireExtJwtSigner"):
            add("secondary.requireExtJwtSigner", "external-jwt-signers", secondary["requireExtJwtSigner"])
    for role_field, collection in exchange.ROLES.get(kind, {}).items():
        for r in _list(entity, role_field):
            if not isinstance(r, str) or r[:1] not in ("@", "#"):
                raise NetcodeError(f"field {role_field!r}: role {r!r} must start with # (an attribute) or @ (a name)")
            if r.startswith("@"):
                out.append((role_field, collection, r))
    return out


def _list(entity: dict, key: str) -> list:
    value = entity.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise NetcodeError(f"field {key!r} must be a list, got {type(value).__name__}")
    return value


KIND_OF = {collection: kind for kind, collection in exchange.COLLECTION.items()}


def check_references(network: Network, names: dict[str, dict[str, str]]) -> None:
    """Every ``@`` reference names an entity that will exist: one of the file's own (for a kind
    the file names, since with ``--prune`` the others go) or, for other kinds, the network's.
    ``@id`` references to an existing entity are rewritten to ``@name`` (the export's form).
    ``names``: collection -> {name: id} of the network, built-ins included."""
    for kind, entities in network.entities.items():
        for entity in entities:
            where = network.where(kind, entity["name"])
            try:
                refs = references(kind, entity)
            except NetcodeError as e:
                raise NetcodeError(f"{where}: {e}") from None
            for field_name, collection, value in refs:
                target = value[1:]
                target_kind = KIND_OF[collection]
                in_file = {e["name"] for e in network.entities.get(target_kind, [])}
                existing = names.get(collection, {})
                if target in in_file or target in existing:
                    continue
                by_id = {i: n for n, i in existing.items()}
                if target in by_id and (target_kind not in network.entities or by_id[target] in in_file):
                    _rewrite(entity, field_name, value, "@" + by_id[target])
                    continue
                noun = wiring.resource(collection).entity
                raise NetcodeError(f"{where}: field {field_name!r}: {value} names no {noun} in the file or the network")


def _rewrite(entity: dict, field_name: str, old: str, new: str) -> None:
    if isinstance(entity.get(field_name), list):
        entity[field_name] = [new if v == old else v for v in entity[field_name]]
    elif field_name in entity:
        entity[field_name] = new


# ------------------------------------------------------------------ rendering
def mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "(secret)" if k in SECRET_KEYS and v not in (None, False, True) else mask(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def show(value: Any) -> str:
    return json.dumps(mask(value), ensure_ascii=False, sort_keys=True)


def render(changes: list[Change]) -> list[str]:
    lines: list[str] = []
    for c in changes:
        if c.action == "create":
            lines.append(f"+ create {c.kind} {c.name!r}")
            for k, v in sorted(c.entity.items()):
                if k != "name":
                    lines.append(f"    {k}: {'(secret)' if k in SECRET_KEYS else show(v)}")
        elif c.action == "update":
            lines.append(f"~ update {c.kind} {c.name!r}")
            for k, (old, new) in sorted(c.fields.items()):
                if k in SECRET_KEYS:
                    lines.append(f"    {k}: (secret changed)")
                else:
                    lines.append(f"    {k}: {show(old)} -> {show(new)}")
        else:
            lines.append(f"- delete {c.kind} {c.name!r}")
    lines.append(summary(changes))
    return lines


def summary(changes: list[Change]) -> str:
    n = {a: sum(c.action == a for c in changes) for a in ("create", "update", "delete")}
    if not changes:
        return "Plan: nothing to do (the network matches the file)."
    return f"Plan: {n['create']} to create, {n['update']} to update, {n['delete']} to delete."
