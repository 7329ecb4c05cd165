"""Posture checks and posture check types.

A posture check is one of six types (``typeId``): OS, PROCESS, DOMAIN, MAC, MFA, PROCESS_MULTI.
The body struct carries every type's fields; ``prepare_posture_check`` keeps those of the row's
type, checks what that type requires, and stores them normalised the way upstream's store
returns them (string lists sorted and de-duplicated, MAC addresses cleaned, process hashes
lower-cased, MFA ``timeoutSeconds <= 0`` as -1). A check's type never changes after create.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Literal

import msgspec

from .. import semver
from ..api.context import NARROW
from ..api.resource import Field, Resource
from ..errors import CouldNotValidate
from ..policy.posture_checks import TYPES, WIRE
from .common import NAME, Attributes, Body, Semantic, Tags, check_attributes, check_name

if TYPE_CHECKING:
    from ..api.context import Ctx

OsType = Literal["Windows", "WindowsServer", "Android", "iOS", "Linux", "macOS"]
PostureCheckType = Literal["OS", "PROCESS", "DOMAIN", "MAC", "MFA", "PROCESS_MULTI"]


class OperatingSystem(Body):
    type: OsType
    versions: list[str]


class Process(Body):
    os_type: OsType
    path: str
    hashes: list[str] | None = None
    signer_fingerprint: str | None = None


class ProcessMulti(Body):
    os_type: OsType
    path: str
    hashes: list[str] | None = None
    signer_fingerprints: list[str] | None = None


class PostureCheckCreate(Body):
    name: str
    type_id: PostureCheckType
    role_attributes: Attributes | None = None
    tags: Tags | None = None
    operating_systems: list[OperatingSystem] | None = None   # OS
    domains: list[str] | None = None                         # DOMAIN
    mac_addresses: list[str] | None = None                   # MAC
    process: Process | None = None                           # PROCESS
    processes: list[ProcessMulti] | None = None              # PROCESS_MULTI
    semantic: Semantic | None = None                         # PROCESS_MULTI
    timeout_seconds: int | None = None                       # MFA
    prompt_on_wake: bool | None = None
    prompt_on_unlock: bool | None = None
    ignore_legacy_endpoints: bool | None = None



# ---------------------------------------------------------------- the posture check types
# one table (``ziti_lite.policy.posture_checks.TYPES``): each type's columns, posture-check-types
# row, render and evaluation
assert set(TYPES) == set(PostureCheckType.__args__)  # type: ignore[attr-defined]
ALL_TYPE_COLUMNS = tuple(c for t in TYPES.values() for c in t.columns)


# ---------------------------------------------------------------- normalisation
def _str_list(items) -> list[str] | None:
    """A stored string list as upstream reads it back: sorted, de-duplicated, null when empty."""
    out = sorted(set(items or ()))
    return out or None


def _clean_mac(mac: str) -> str:
    return re.sub(r"[^a-f0-9]", "", mac.lower())


def _normalise(column: str, value):
    if column == "operating_systems":
        by_type: dict[str, dict] = {}
        for os_ in value:                      # the last entry of a type wins
            for i, v in enumerate(os_["versions"]):
                if not semver.valid_range(v):
                    field = f"operatingSystems[{os_['type']}][{i}]"
                    raise CouldNotValidate(field, f"invalid version for os: [{os_['type']}], version: [{v}]", v)
            by_type[os_["type"]] = {"type": os_["type"], "versions": _str_list(os_["versions"])}
        return [by_type[t] for t in sorted(by_type)]
    if column == "domains":
        return _str_list(value)
    if column == "mac_addresses":
        return _str_list(_clean_mac(m) for m in value)
    if column == "process":
        out = {"osType": value["osType"], "path": value["path"],
               "hashes": _str_list(h.lower() for h in value.get("hashes") or ())}
        if value.get("signerFingerprint"):
            out["signerFingerprint"] = value["signerFingerprint"].lower()
        return out
    if column == "processes":
        by_key: dict[str, dict] = {}
        for p in value:                        # keyed by osType-path, the last one wins
            by_key[f"{p['osType']}-{p['path']}"] = {
                "osType": p["osType"], "path": p["path"],
                "hashes": _str_list(p.get("hashes")) or [],
                "signerFingerprints": _str_list(p.get("signerFingerprints")) or []}
        return [by_key[k] for k in sorted(by_key)]
    if column == "timeout_seconds":
        return -1 if value is None or value <= 0 else value
    if column in ("prompt_on_wake", "prompt_on_unlock", "ignore_legacy_endpoints"):
        return bool(value)
    return value


def prepare_posture_check(ctx: Ctx, values: dict, existing: dict | None) -> None:
    check_name(values)
    check_attributes(values)
    patch = existing is not None and ctx.route.method == "PATCH"
    type_id = values.pop("type_id", None)
    if patch and type_id is None:  # upstream's PATCH body requires the type (its discriminator)
        raise CouldNotValidate("typeId", "typeId in body is required", "")
    if existing is not None:
        if type_id is not None and type_id != existing["type_id"]:
            raise CouldNotValidate("typeId", "the type of a posture check can not be changed", type_id)
        type_id = existing["type_id"]
    else:
        values["type_id"] = type_id
    kind = TYPES[type_id]
    for column in ALL_TYPE_COLUMNS:
        if column not in kind.columns:
            values.pop(column, None)           # a row only ever holds its own type's fields
            continue
        value = values.get(column)
        if value is None and patch:
            values.pop(column, None)
            continue
        wire = WIRE.get(column, column)
        if value is None and column in kind.required:
            raise CouldNotValidate(wire, f"{wire} in body is required", None)
        if isinstance(value, list) and not value and wire:
            raise CouldNotValidate(wire, f"{wire} in body should have at least 1 items", value)
        values[column] = _normalise(column, value)
    for key in ("role_attributes",):
        if key in values and values[key] is None:
            values[key] = []


def render_posture_check(ctx: Ctx, row: dict, out: dict) -> None:
    TYPES[row["type_id"]].render(row, out)


# the columns of the types: stored, rendered by each type's ``render`` (only the row's own)
_TYPE_FIELDS = (
    Field("operatingSystems", "json", output=False),
    Field("domains", "json", output=False),
    Field("macAddresses", "json", output=False),
    Field("process", "json", output=False),
    Field("processes", "json", output=False),
    Field("semantic", output=False),
    Field("timeoutSeconds", "int", output=False),
    Field("promptOnWake", "bool", output=False),
    Field("promptOnUnlock", "bool", output=False),
    Field("ignoreLegacyEndpoints", "bool", output=False),
)

POSTURE_CHECKS = Resource(
    name="posture-checks", entity="postureCheck", table="posture_checks", permission="posture-check",
    fields=(
        NAME,
        Field("typeId"),
        Field("version", "int"),
        Field("roleAttributes", "set", empty_null=False),  # upstream too answers [] for posture checks
        *_TYPE_FIELDS,
    ),
    filters=("name", "promptOnUnlock", "promptOnWake"),
    computed=_TYPE_FIELDS,
    create=PostureCheckCreate,
    prepare=prepare_posture_check, render=render_posture_check,
)


# the body names its type, and only that type's fields are read: another type's fields (a console
# sends every type's, the unused ones empty) are ignored, never checked
_WIRE = {f.name: f.encode_name for f in msgspec.structs.fields(PostureCheckCreate)}
_OTHER_TYPES = {t: {_WIRE[c] for c in ALL_TYPE_COLUMNS if c not in kind.columns} for t, kind in TYPES.items()}


def _narrow(doc: dict) -> dict:
    others = _OTHER_TYPES.get(str(doc.get("typeId")))     # an unknown or missing type: the whole body is checked
    return doc if others is None else {k: v for k, v in doc.items() if k not in others}


NARROW[PostureCheckCreate] = NARROW[POSTURE_CHECKS.patch] = _narrow


def render_posture_check_type(ctx: Ctx, row: dict, out: dict) -> None:
    # as upstream answers them: operating systems and versions in byte order, null for a type
    # that names no versions (it keeps no empty list)
    oses = sorted(json.loads(row["operating_systems"] or "[]"), key=lambda o: o["type"])
    out["operatingSystems"] = [{**o, "versions": sorted(o.get("versions") or []) or None} for o in oses]


POSTURE_CHECK_TYPES = Resource(
    name="posture-check-types", entity="postureCheckType", table="posture_check_types",
    auth={"list": "session", "detail": "session"},   # any complete session, as upstream
    fields=(NAME, Field("operatingSystems", "json")),
    ops=("list", "detail"),
    filters=("name",),
    constants={"version": None},  # upstream never sets it
    render=render_posture_check_type,
)

RESOURCES = (POSTURE_CHECK_TYPES, POSTURE_CHECKS)
