"""The resource table: every collection of the API, declared family by family."""

from __future__ import annotations

import importlib

FAMILIES = (
    "identities",
    "services",
    "auth",
    "cas_enrollments",
    "routers",
    "posture",
    "policies",
)


def registry() -> list:
    out = []
    for fam in FAMILIES:
        out.extend(importlib.import_module(f"ziti_lite.resources.{fam}").RESOURCES)
    return out


def by_name(name: str):
    for r in registry():
        if r.name == name:
            return r
    raise KeyError(name)
