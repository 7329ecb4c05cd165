"""Entity ids and opaque tokens."""

import secrets
import uuid

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def new_id() -> str:
    """A short random id like upstream's shortids (10 chars of [0-9a-zA-Z], ~59 bits)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(10))


def new_token() -> str:
    """API session, session and enrollment tokens are random UUIDs upstream."""
    return str(uuid.uuid4())
