"""Revocations (OpenZiti 2.0's ``/revocations``): the list of OIDC token ids, API sessions and
identities whose JWTs are no longer accepted, as a collection an admin reads and adds to.

Why a resource of its own: upstream serves the revocation list as an entity (list, detail,
create; no update or delete: entries leave when they expire, 24 h on), and the table is the one
the OIDC provider already keeps (``auth/oidc_tokens.py``: rotated refresh tokens, logouts), so
its entries are listed too, as upstream's are. What a revocation does lives with the tokens
(``oidc_tokens.refusal``, ``end_sessions``); this module declares the collection, checks a body
as upstream does (a ``JTI`` or ``API_SESSION`` names a UUID, an ``IDENTITY`` an identity that
exists: 400 and 404), replaces an entry of the same id (upstream's ``CreateOrReplace``: the
cut-off and expiry move to now), and adds an ``IDENTITY`` revocation whenever an identity is
deleted or disabled, as upstream's identity store does in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from .. import clock
from ..api import crud
from ..api.context import Ctx
from ..api.resource import Field, Resource, Row
from ..auth import oidc_tokens
from ..db.filters import Symbol
from ..errors import CouldNotValidate, NotFound
from .common import Body, Tags, exists
from .identities import IDENTITIES

RevocationType = Literal["JTI", "IDENTITY", "API_SESSION"]


class RevocationCreate(Body):
    id: str
    type: RevocationType
    tags: Tags | None = None


def prepare_revocation(ctx: Ctx, values: Row, existing: Row | None) -> None:
    """Upstream's checks of a new revocation, its expiry, and the replacement of an entry of the
    same id (the new one counts from now)."""
    id, kind = values.get("id") or "", values["type"]
    if kind == oidc_tokens.REVOKE_IDENTITY:
        if not exists(ctx.store, "identities", id):
            raise NotFound()
    elif not oidc_tokens.is_uuid(id):
        raise CouldNotValidate("id", "must be a valid UUID v4", id)
    values["id"] = id
    values["expires_at"] = clock.fmt(clock.now() + dt.timedelta(seconds=oidc_tokens.lifetime(ctx.ctl)))
    ctx.store.execute("DELETE FROM revocations WHERE id = ?", (id,))


def after_revocation(ctx: Ctx, id: str, before: Row | None, values: Row | None) -> None:
    """A new revocation ends the OIDC API sessions it leaves without a usable token."""
    if values is not None:
        oidc_tokens.end_sessions(ctx.store, id, values["type"])


REVOCATIONS = Resource(
    name="revocations", entity="revocation", permission="revocation",
    fields=(Field("expiresAt", "datetime"), Field("type")),
    create=RevocationCreate,
    ops=("list", "detail", "create"),
    # upstream's symbols: issuedBefore is the cut-off, the time the entry was made
    filters=("expiresAt", "type", "issuedBefore"),
    extra_symbols={"issuedBefore": Symbol("datetime", "t.created_at")},
    prepare=prepare_revocation,
    after_write=after_revocation,
)


def _identity_changed(ctx: Ctx, id: str, before: Row | None, values: Row | None) -> None:
    """An identity deleted, or disabled that was not: its tokens issued so far are revoked."""
    disabled = before is not None and values is not None and not before.get("disabled_at") \
        and values.get("disabled_at")
    if (before is not None and values is None) or disabled:
        oidc_tokens.put_revocation(ctx.ctl, id, oidc_tokens.REVOKE_IDENTITY)


crud.listen(IDENTITIES)(_identity_changed)

RESOURCES = (REVOCATIONS,)
