"""Auth policy defaults, the one copy: the values a policy reads as where its stored JSON lacks
them (upstream's read defaults), and the ``Default`` policy a new controller is seeded with.

Data only, so every layer can import it: the login checks, the auth-policies resource and the
bootstrap. Callers copy before they change anything.
"""

from __future__ import annotations

import copy
from typing import Any

PRIMARY_DEFAULTS: dict[str, dict[str, Any]] = {
    "cert": {"allowed": True, "allowExpiredCerts": True},
    "extJwt": {"allowed": True, "allowedSigners": []},
    "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 5, "minPasswordLength": 5,
             "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False},
}
SECONDARY_DEFAULTS: dict[str, Any] = {"requireExtJwtSigner": None, "requireTotp": False}


def default_policy() -> dict[str, dict]:
    """``primary``/``secondary`` of the seeded ``Default`` policy: the read defaults, except
    that its password logins are never locked out (``maxAttempts`` 0)."""
    primary = copy.deepcopy(PRIMARY_DEFAULTS)
    primary["updb"]["maxAttempts"] = 0
    return {"primary": primary, "secondary": dict(SECONDARY_DEFAULTS)}
