"""Types and checks shared by the resource families."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from ..api.context import Ctx
from ..api.resource import Field
from ..errors import CouldNotValidate, Unauthorized


class Body(msgspec.Struct, rename="camel", kw_only=True):
    """Base of every request body: camelCase on the wire, unknown keys ignored (as upstream)."""


TagValue = str | int | float | bool | None
Tags = dict[str, TagValue]
Attributes = list[str]
Cost = Annotated[int, Meta(ge=0, le=65535)]
Precedence = Annotated[str, Meta(pattern="^(default|required|failed)$")]
Semantic = Annotated[str, Meta(pattern="^(AllOf|AnyOf)$")]

NAME = Field("name")
ROLE_ATTRIBUTES = Field("roleAttributes", "set")


def check_attributes(values: dict, field: str = "role_attributes", wire: str = "roleAttributes") -> None:
    attrs = values.get(field)
    if attrs is None:
        return
    for a in attrs:
        if a.startswith("#") or a.startswith("@"):
            raise CouldNotValidate(wire, "role attributes may not be prefixed with # or @", attrs)
    # duplicates removed; the resource table stores sets sorted, as upstream answers them
    values[field] = list(dict.fromkeys(attrs))


def check_name(values: dict) -> None:
    if "name" in values and (values["name"] is None or values["name"] == ""):
        raise CouldNotValidate("name", "name is required", values.get("name"))


def exists(store, table: str, id: Any) -> bool:
    return store.value(f"SELECT 1 FROM {table} WHERE id = ?", (id,)) is not None


def name_of(store, table: str, id: str | None) -> str | None:
    if id is None:
        return None
    return store.value(f"SELECT name FROM {table} WHERE id = ?", (id,))


def non_admin_caller(ctx: Ctx) -> bool:
    """Whether the request is a management API session that is no admin's (admin protection)."""
    session = ctx.session
    return session is not None and not session.is_admin and ctx.api == "management"


def refuse_for_admin(ctx: Ctx, identity_id: str | None, reason: str) -> None:
    """Admin protection beyond upstream's identity rules: a caller that is no admin may not act
    on an admin identity through the operations that would let it take the identity over or
    lock it out (enrollments, disabling, MFA removal): 401 UNAUTHORIZED with ``reason``."""
    session = ctx.session
    if session is None or session.is_admin or ctx.api != "management" or identity_id is None:
        return
    if ctx.store.value("SELECT is_admin OR is_default_admin FROM identities WHERE id = ?", (identity_id,)):
        raise Unauthorized(reason)
