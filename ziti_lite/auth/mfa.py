"""TOTP second factor: secrets, codes, recovery codes, the provisioning URL and its QR code,
and the one MFA record an identity may have.

Parameters are upstream's: a 10-byte secret in base32 (16 characters), HMAC-SHA1, 6 digits,
30-second steps, codes accepted from two steps before to two steps after now (±60 s), no
replay protection. Codes are checked against the controller clock (``ziti_lite.clock``), so
tests move time instead of sleeping. 20 recovery codes of 6 base32 characters, each usable once.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import struct
import urllib.parse
import zlib
from typing import TYPE_CHECKING

import pyotp
import segno

from .. import clock
from ..ids import new_id

if TYPE_CHECKING:
    from .sessions import AuthController

DIGITS = 6
PERIOD = 30
WINDOW = 2                 # steps either side of now
SECRET_BYTES = 10
RECOVERY_CODES = 20
DEFAULT_ISSUER = "openziti.io"
QR_SIZE = 256
_CODE = re.compile(r"[0-9]{6}")


# ---------------------------------------------------------------- secrets and codes
def new_secret() -> str:
    return base64.b32encode(os.urandom(SECRET_BYTES)).decode().rstrip("=")


def new_recovery_codes() -> list[str]:
    return [base64.b32encode(os.urandom(8)).decode().rstrip("=")[:6] for _ in range(RECOVERY_CODES)]


class _TOTP(pyotp.TOTP):
    """pyotp's TOTP without its 112-bit minimum on secrets: upstream's secrets are 80 bits
    (authenticator apps accept them) and identities enrolled upstream keep theirs."""

    def byte_secret(self) -> bytes:
        secret = self.secret.upper()
        return base64.b32decode(secret + "=" * (-len(secret) % 8))


def totp(secret: str) -> pyotp.TOTP:
    return _TOTP(secret, digits=DIGITS, digest=hashlib.sha1, interval=PERIOD)


def valid_totp(secret: str, code: str | None) -> bool:
    """A current TOTP code: exactly six digits, within the window around the controller's now."""
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        return False
    return totp(secret).verify(code, for_time=clock.now(), valid_window=WINDOW)


def issuer(ctl: AuthController) -> str:
    return ctl.settings.totp_issuer or DEFAULT_ISSUER


def provisioning_url(issuer: str, account: str, secret: str) -> str:
    """``otpauth://totp/<issuer>:<account>?issuer=...&secret=...`` as upstream writes it: the label
    is left as is, the query is sorted and escaped, and no algorithm/digits/period are given."""
    query = urllib.parse.urlencode(sorted({"issuer": issuer, "secret": secret}.items()))
    return f"otpauth://totp/{issuer}:{account}?{query}"


def qr_png(text: str, size: int = QR_SIZE) -> bytes:
    """A ``size``×``size`` PNG of the QR code (medium error correction) of ``text``."""
    qr = segno.make(text, error="m", micro=False, boost_error=False)
    rows = [bytes(r) for r in qr.matrix]
    border = 4
    modules = len(rows) + 2 * border
    scale = max(1, size // modules)
    side = max(size, modules * scale)
    offset = (side - modules * scale) // 2
    white, black = b"\xff", b"\x00"
    blank = white * side
    out = []
    for y in range(side):
        my = (y - offset) // scale - border if y >= offset else -1
        if not 0 <= my < len(rows):
            out.append(blank)
            continue
        line = bytearray(blank)
        for mx, dark in enumerate(rows[my]):
            if dark:
                x0 = offset + (mx + border) * scale
                line[x0:x0 + scale] = black * scale
        out.append(bytes(line))
    return _png_gray(side, side, out)


def _png_gray(width: int, height: int, rows: list[bytes]) -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


# ---------------------------------------------------------------- the MFA record
def get(store, identity_id: str) -> dict | None:
    row = store.one("SELECT * FROM mfa WHERE identity_id = ?", (identity_id,))
    if row is not None:
        row["recovery_codes"] = json.loads(row["recovery_codes"])
    return row


def create(store, identity_id: str) -> dict:
    now = clock.stamp()
    row = {"id": new_id(), "created_at": now, "updated_at": now, "identity_id": identity_id,
           "is_verified": 0, "secret": new_secret(), "recovery_codes": new_recovery_codes()}
    store.execute("INSERT INTO mfa (id, created_at, updated_at, identity_id, is_verified, secret, recovery_codes)"
                  " VALUES (?,?,?,?,?,?,?)",
                  (row["id"], now, now, identity_id, 0, row["secret"], json.dumps(row["recovery_codes"])))
    return row


def mark_verified(store, rec: dict) -> None:
    store.execute("UPDATE mfa SET is_verified = 1, updated_at = ? WHERE id = ?", (clock.stamp(), rec["id"]))


def regenerate(store, rec: dict) -> list[str]:
    codes = new_recovery_codes()
    store.execute("UPDATE mfa SET recovery_codes = ?, updated_at = ? WHERE id = ?",
                  (json.dumps(codes), clock.stamp(), rec["id"]))
    return codes


def delete(store, identity_id: str) -> None:
    store.execute("DELETE FROM mfa WHERE identity_id = ?", (identity_id,))
    # the MFA posture of the identity's sessions fails from now on
    store.execute("UPDATE api_sessions SET mfa_passed_at = NULL WHERE identity_id = ?", (identity_id,))


def check_code(store, rec: dict, code: str | None, recovery: bool = True) -> bool:
    """A recovery code (consumed when it matches) or else a current TOTP code.
    Call inside a write transaction when ``recovery`` is true."""
    if not isinstance(code, str) or not code:
        return False
    if recovery and code in rec["recovery_codes"]:
        rest = [c for c in rec["recovery_codes"] if c != code]
        store.execute("UPDATE mfa SET recovery_codes = ?, updated_at = ? WHERE id = ?",
                      (json.dumps(rest), clock.stamp(), rec["id"]))
        rec["recovery_codes"] = rest
        return True
    return valid_totp(rec["secret"], code)


def pass_session(store, session_id: str, verified_now: bool = False) -> None:
    """The session has given its TOTP: MFA complete, MFA posture passed now. A session that just
    verified a new enrollment also becomes one that requires MFA (as upstream)."""
    extra = "is_mfa_required = 1, " if verified_now else ""
    store.execute(f"UPDATE api_sessions SET {extra}is_mfa_complete = 1, mfa_passed_at = ? WHERE id = ?",
                  (clock.stamp(), session_id))


def record_pass(store, session_id: str, at: str) -> None:
    """The session gave a TOTP code at ``at`` outside a login (a TOTP token): the MFA posture
    checks count from then; whether the session owes its login's TOTP is left as it was."""
    store.execute("UPDATE api_sessions SET mfa_passed_at = ? WHERE id = ?", (at, session_id))


def passed_at(store, session_id: str) -> str | None:
    """When the API session last passed TOTP (``None`` if never, or since the MFA was removed);
    the posture check of type MFA reads this."""
    return store.value("SELECT mfa_passed_at FROM api_sessions WHERE id = ?", (session_id,))
