"""The caller's API session as the request machinery carries it (``Ctx.session``).

A plain record: ``auth/sessions.py`` finds and makes them (and re-exports this class), the
handlers read them. It sits here, below auth, so that ``Ctx`` can name its type without an
arrow up the layers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Session:
    id: str
    token: str
    identity_id: str
    is_admin: bool
    authenticator_id: str
    partial: bool
    last_activity_at: str
    bearer: str | None = None   # the OIDC access token the session was named by (auth/oidc_tokens.py), else None
    identity_name: str = ""     # the identity's name (the author of its changes: events/changes.py, audit.py)
    # the identity's permissions (ziti_lite/permissions.py), read with the row: a change to them
    # moves the store's generation, so the next request of any of its sessions sees the new set
    permissions: frozenset[str] = frozenset()
