"""Role matching: which entities a role list selects.

A role list holds ``#attribute`` and ``@id`` entries. An entity with id E and attribute set A
is selected when E is one of the ``@`` ids, or the list is ``#all``, or the ``#`` attributes are
non-empty and (AllOf) all of them are in A, or (AnyOf) any of them is in A. An empty list
selects nothing.

The same rule exists twice here, on purpose: ``matches`` for one entity against one policy
(entity-side changes), and ``member_sql`` for one policy against every entity (policy-side
changes), which reads the ``entity_role_attributes`` index instead of parsing every entity's
JSON. ``role_filter_sql`` is the different rule of the lists' ``roleFilter`` parameter, where
``#all`` is an ordinary attribute.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..errors import CouldNotValidate
from .model import Side

ALL = "#all"
ALL_OF, ANY_OF = "AllOf", "AnyOf"
PREFIX_REASON = "role entries must prefixed with # (to indicate role attributes) or @ (to indicate a name or id)"
ALL_REASON = "if using #all, it should be the only role specified"


def split(roles: Iterable[str]) -> tuple[list[str], list[str]]:
    """(attributes without '#', ids without '@')."""
    attrs, ids = [], []
    for r in roles:
        if r.startswith("#"):
            attrs.append(r[1:])
        elif r.startswith("@"):
            ids.append(r[1:])
    return attrs, ids


def canonical_semantic(semantic: str | None) -> str:
    return ANY_OF if (semantic or "").lower() == "anyof" else ALL_OF


def validate(field: str, roles: list[str]) -> list[str]:
    """Check a role list as upstream does and return it sorted without duplicates."""
    if len(roles) > 1 and ALL in roles:
        raise CouldNotValidate(field, ALL_REASON, roles)
    bad = [r for r in roles if not (r.startswith("#") or r.startswith("@"))]
    if bad:
        raise CouldNotValidate(field, PREFIX_REASON, bad)
    return sorted(set(roles))


def matches(entity_id: str, attributes: Iterable[str], roles: Iterable[str], semantic: str) -> bool:
    want, ids = split(roles)
    if entity_id in ids or "all" in want:
        return True
    if not want:
        return False
    have = set(attributes)
    if canonical_semantic(semantic) == ANY_OF:
        return any(a in have for a in want)
    return all(a in have for a in want)


def member_sql(side: Side, roles: list[str], semantic: str) -> tuple[str, list]:
    """SQL yielding one column ``id``: every entity of ``side`` the role list selects."""
    want, ids = split(roles)
    scope = side.where("e")
    if "all" in want:
        return f"SELECT e.id AS id FROM {side.table} e WHERE {scope}", []
    parts: list[str] = []
    params: list[str | int] = []
    if ids:
        parts.append(
            f"SELECT e.id AS id FROM {side.table} e WHERE e.id IN (SELECT value FROM json_each(?)) AND {scope}"
        )
        params.append(json.dumps(ids))
    if want:
        want = sorted(set(want))
        base = (
            "SELECT entity_id AS id FROM entity_role_attributes"
            " WHERE kind = ? AND attribute IN (SELECT value FROM json_each(?))"
        )
        params += [side.name, json.dumps(want)]
        if canonical_semantic(semantic) == ANY_OF or len(want) == 1:
            parts.append(base)
        else:
            parts.append(base + " GROUP BY entity_id HAVING count(*) = ?")
            params.append(len(want))
    if not parts:
        return "SELECT NULL AS id WHERE 0", []
    if len(parts) == 1:
        return parts[0], params
    return " UNION ".join(f"SELECT id FROM ({p})" for p in parts), params


def role_filter_sql(side: Side, values: list[str], semantic: str | None) -> tuple[str, list]:
    """Condition on ``t`` for ``?roleFilter=…&roleSemantic=…`` on a list of ``side``.

    Entities carrying the ``#`` attributes (all of them, or any for AnyOf) plus the existing
    entities named by ``@`` ids; ``#all`` is just an attribute here, unknown ids are ignored.
    """
    if semantic is None or semantic == "":
        semantic = ALL_OF
    if semantic.lower() not in ("allof", "anyof"):
        raise CouldNotValidate("semantic", "invalid semantic", semantic)
    bad = [v for v in values if not (v.startswith("#") or v.startswith("@"))]
    if bad:
        raise CouldNotValidate("roleFilter", PREFIX_REASON, bad)
    want, ids = split(values)
    want = sorted(set(want))
    parts: list[str] = []
    params: list[str | int] = []
    if want:
        sub = (
            "SELECT entity_id FROM entity_role_attributes"
            " WHERE kind = ? AND attribute IN (SELECT value FROM json_each(?))"
        )
        params += [side.name, json.dumps(want)]
        if semantic.lower() == "allof" and len(want) > 1:
            sub += " GROUP BY entity_id HAVING count(*) = ?"
            params.append(len(want))
        parts.append(f"t.id IN ({sub})")
    if ids:
        parts.append("t.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(set(ids))))
    return " OR ".join(parts) or "0", params
