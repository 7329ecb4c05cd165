"""The TOTP enrollment, one implementation for both paths that enroll: ``/current-identity/mfa``
(``mfa.py``) and the OIDC login's ``/oidc/login/totp/enroll`` (``oidc/provider.py``).

Both call ``enroll`` and ``verify`` inside their write; the MFA record's change is reported
through ``crud.changed`` as an entity of type ``mfas`` (upstream's store, declared here), so
each path makes the same entityChange event and audit row. This module registers no operation
(only the record's cascade from its identity), so importing it from the OIDC provider changes
no route order.
"""

from __future__ import annotations

from ..api import crud
from ..api.context import Ctx
from ..api.resource import Field, Resource
from ..auth import mfa
from ..resources.identities import IDENTITIES

# the MFA record as an entity for entityChange and the audit trail (never mounted: its routes are
# the hand-written ones of mfa.py); upstream's field names
MFAS = Resource(name="mfas", entity="mfa", table="mfa", ops=(),
                fields=(Field("identityId"), Field("isVerified", "bool"), Field("secret"),
                        Field("recoveryCodes", "json")))
crud.cascades(IDENTITIES, MFAS, "identity_id", rank=3)   # an identity's MFA record goes with it, reported


def changed(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    """Report a change of the MFA record ``id`` (inside its write; ``before``: its row then)."""
    crud.changed(ctx, MFAS, id, before, values)


def row(ctx: Ctx, id: str) -> dict | None:
    return ctx.store.one("SELECT * FROM mfa WHERE id = ?", (id,))


def enroll(ctx: Ctx, identity_id: str) -> dict:
    """A new, unverified TOTP enrollment of the identity (the caller checked it has none)."""
    rec = mfa.create(ctx.store, identity_id)
    changed(ctx, rec["id"], None, rec)
    return rec


def verify(ctx: Ctx, rec: dict, code: str | None) -> bool:
    """Finish an unverified enrollment with a current TOTP code (no recovery code); False when
    the code is not one."""
    if not mfa.valid_totp(rec["secret"], code):
        return False
    before = row(ctx, rec["id"])
    mfa.mark_verified(ctx.store, rec)
    changed(ctx, rec["id"], before, {"is_verified": 1})
    return True
