"""Reading a network file: JSON or YAML, the entity lists of ``ziti ops export`` plus ``tests``.

Only the document's shape is checked here (known entity kinds, a name on every entity, no
duplicate names, well-formed assertions, ``@name`` references that resolve within the file or
the network); whether a field has the right type or a config suits its config type is for the
API's own validation, which ``apply`` runs on a scratch copy before the first real write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from .. import exchange


class NetcodeError(Exception):
    """Bad input or a refused change: one line for the user, exit status 1."""


@dataclass
class Network:
    file: str
    entities: dict[str, list[dict]]        # only the kinds the file names
    tests: list[dict] = field(default_factory=list)
    lines: dict[tuple[str, int], int] = field(default_factory=dict)   # YAML: (kind, index) -> line

    def where(self, kind: str, name: str | None = None, index: int | None = None) -> str:
        """``FILE[:LINE]: kind 'name'``: where an entity is, for messages."""
        if index is None and name is not None:
            index = next((i for i, e in enumerate(self.entities.get(kind, [])) if e.get("name") == name), None)
        line = self.lines.get((kind, index)) if index is not None else None
        return f"{self.file}{f':{line}' if line else ''}: {kind}" + (
            f" {name!r}" if name is not None else f"[{index}]" if index is not None else "")


def entity_lines(text: str) -> dict[tuple[str, int], int]:
    """The line of each item of each top-level list of a YAML document."""
    out: dict[tuple[str, int], int] = {}
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return out
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.SequenceNode):
                for i, item in enumerate(value.value):
                    out[(key.value, i)] = item.start_mark.line + 1
    return out


def parse(text: str, file: str) -> Any:
    """JSON when it parses as JSON, else YAML (a superset); syntax errors with line numbers."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"
        raise NetcodeError(f"{file}: YAML syntax error at {where}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise NetcodeError(f"{file}: not JSON or YAML: {e}") from None


def load(text: str, file: str) -> Network:
    doc = parse(text, file)
    lines = {} if text.lstrip().startswith(("{", "[")) else entity_lines(text)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise NetcodeError(f"{file}: expected a mapping of entity lists (and 'tests'), got {type(doc).__name__}")
    tests = doc.pop("tests", None) or []
    unknown = sorted(set(doc) - set(exchange.COLLECTION))
    if unknown:
        known = ", ".join(sorted(exchange.COLLECTION))
        raise NetcodeError(f"{file}: unknown entity kind {unknown[0]!r} (known: {known}, tests)")
    entities: dict[str, list[dict]] = {}
    for kind, items in doc.items():
        items = items or []
        if not isinstance(items, list):
            raise NetcodeError(f"{file}: {kind}: expected a list of entities, got {type(items).__name__}")
        network = Network(file, {}, [], lines)
        seen: set[str] = set()
        for i, e in enumerate(items):
            if not isinstance(e, dict):
                raise NetcodeError(f"{network.where(kind, index=i)}: expected a mapping, got {type(e).__name__}")
            name = e.get("name")
            if not isinstance(name, str) or not name:
                raise NetcodeError(f"{network.where(kind, index=i)}: field 'name' must be a non-empty string")
            if name in seen:
                raise NetcodeError(f"{network.where(kind, name, i)}: duplicate name")
            seen.add(name)
        entities[kind] = [json.loads(json.dumps(e, default=str)) for e in items]  # plain JSON (YAML dates...)
    if not isinstance(tests, list):
        raise NetcodeError(f"{file}: tests: expected a list of assertions")
    network = Network(file, entities, tests, lines)
    for i, t in enumerate(tests):
        check_assertion(t, network.where("tests", index=i))
    return network


ASSERTION_KEYS = {"name", "identity", "service", "services", "can", "cannot", "router", "policyType"}
ACTIONS = ("dial", "bind")


def check_assertion(t: Any, where: str) -> None:
    if not isinstance(t, dict):
        raise NetcodeError(f"{where}: expected a mapping such as {{identity: alice, service: crm, can: dial}}")
    unknown = sorted(set(t) - ASSERTION_KEYS)
    if unknown:
        raise NetcodeError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(ASSERTION_KEYS))})")
    for key in ("name", "identity", "service", "router", "can", "cannot", "policyType"):
        if key in t and not isinstance(t[key], str):
            raise NetcodeError(f"{where}: field {key!r} must be a string")
    if "identity" not in t:
        raise NetcodeError(f"{where}: field 'identity' is required")
    if "services" in t:
        if not isinstance(t["services"], list) or not all(isinstance(s, str) for s in t["services"]):
            raise NetcodeError(f"{where}: field 'services' must be a list of service names")
        if set(t) & {"service", "can", "cannot", "router"}:
            raise NetcodeError(f"{where}: 'services' (exactly these) stands alone: no service/can/cannot/router")
        if t.get("policyType", "dial").lower() not in ACTIONS:
            raise NetcodeError(f"{where}: field 'policyType' must be dial or bind")
        return
    if "service" not in t:
        raise NetcodeError(f"{where}: field 'service' (or 'services') is required")
    verbs = [k for k in ("can", "cannot") if k in t]
    if len(verbs) != 1 and "router" not in t:
        raise NetcodeError(f"{where}: give exactly one of 'can' or 'cannot' (dial or bind), or 'router'")
    if len(verbs) > 1:
        raise NetcodeError(f"{where}: give 'can' or 'cannot', not both")
    for v in verbs:
        if t[v].lower() not in ACTIONS:
            raise NetcodeError(f"{where}: field {v!r} must be dial or bind, got {t[v]!r}")


def describe(t: dict) -> str:
    """An assertion in words, for plans and failures."""
    if t.get("name"):
        label = f"{t['name']}: "
    else:
        label = ""
    if "services" in t:
        kind = t.get("policyType", "dial").lower()
        return f"{label}{t['identity']} has exactly the {kind} services [{', '.join(t['services'])}]"
    if "router" in t and not ("can" in t or "cannot" in t):
        return f"{label}{t['identity']} reaches {t['service']} through edge router {t['router']}"
    verb = "can" if "can" in t else "cannot"
    via = f" through edge router {t['router']}" if "router" in t else ""
    return f"{label}{t['identity']} {verb} {t[verb].lower()} {t['service']}{via}"
