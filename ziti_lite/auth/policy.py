"""Auth policies: which primary methods an identity may log in with, and which secondary
factors (TOTP, an ext-jwt signer's bearer token) its API sessions need.

An identity names its policy (``identities.auth_policy_id``); the policy row keeps ``primary``
and ``secondary`` as JSON. Values the stored JSON lacks take upstream's read defaults.
"""

from __future__ import annotations

import functools
import json

from .. import clock
from ..errors import InvalidAuth
from .defaults import PRIMARY_DEFAULTS

_METHOD_KEYS = {"password": "updb", "updb": "updb", "cert": "cert", "ext-jwt": "extJwt", "extJwt": "extJwt"}


def identity_policy(store, identity_id: str) -> tuple[dict, dict] | None:
    """The identity row and its auth policy (primary, secondary parsed), or None."""
    ident = store.one("SELECT * FROM identities WHERE id = ?", (identity_id,))
    if ident is None:
        return None
    pol = store.one("SELECT primary_, secondary FROM auth_policies WHERE id = ?", (ident["auth_policy_id"],))
    if pol is None:
        return None
    return ident, _parse_rules(pol["primary_"], pol["secondary"])


@functools.lru_cache(maxsize=256)
def _parse_rules(primary: str, secondary: str) -> dict:
    """A policy's stored JSON parsed (cached by text, as every login reads it; read-only)."""
    return {"primary": json.loads(primary), "secondary": parse_secondary(secondary)}


def is_disabled(ident: dict) -> bool:
    return bool(ident["disabled_at"]) and (not ident["disabled_until"] or ident["disabled_until"] > clock.stamp())


def primary_rules(policy: dict, method: str) -> dict:
    """The auth policy's primary rules for one method, defaults filled in."""
    key = _METHOD_KEYS[method]
    return {**PRIMARY_DEFAULTS[key], **((policy.get("primary") or {}).get(key) or {})}


def check_primary(policy: dict, method: str, *, signer_id: str | None = None, cert_expired: bool = False) -> None:
    """Raise ``InvalidAuth`` unless ``policy`` (as returned by ``identity_policy``) allows logging in
    with ``method`` ("password"/"updb", "cert", "ext-jwt"/"extJwt"). For cert logins pass whether
    the presented leaf is outside its validity period; for ext-jwt the signer's id."""
    rules = primary_rules(policy, method)
    if not rules.get("allowed"):
        raise InvalidAuth()
    key = _METHOD_KEYS[method]
    if key == "cert" and cert_expired and not rules.get("allowExpiredCerts"):
        raise InvalidAuth()
    if key == "extJwt" and rules.get("allowedSigners") and signer_id not in rules["allowedSigners"]:
        raise InvalidAuth()


@functools.lru_cache(maxsize=256)
def parse_secondary(text: str | None) -> dict:
    """An auth policy's ``secondary`` JSON (cached by text; treat the result as read-only)."""
    return json.loads(text) if text else {}


def policy_secondary(store, identity_id: str) -> dict:
    """The secondary rules of ``identity_id``'s auth policy ({} without one)."""
    # a scalar subquery: the same answer as the join, at less than half its cost per login
    return parse_secondary(store.value(
        "SELECT (SELECT secondary FROM auth_policies WHERE id = i.auth_policy_id) FROM identities i WHERE i.id = ?",
        (identity_id,)))
