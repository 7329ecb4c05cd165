"""What ``serve`` checks before it listens, each failure one line naming the problem and the fix.

By the time these run the database was opened (``db.store``: an SQLite file, ziti-lite's, of a
version this ziti-lite opens, migrated) and the controller's certificates renewed where due or
re-issued for new hosts (``renewal``). What is left can only come from a damaged or hand-edited
controller table, and serving with it would fail every handshake or client: the advertised hosts
must be in the server certificate's SANs, the certificate must match its key, and server
certificate -> signing CA -> root must verify now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization

from .. import clock
from ..pki import ca
from .renewal import hosts_for, sans_lack

if TYPE_CHECKING:
    from .contexts import LifecycleController

RESTORE = "restore the file from a snapshot (PATH.pre-*, ziti-lite snapshot) or a backup"


class StartupError(Exception):
    """A reason not to serve: one line, problem and fix."""


def _public(key: Any) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def check(ctl: LifecycleController) -> None:
    """Raise ``StartupError`` for the first problem found (see the module docstring)."""
    state, db = ctl.state, ctl.settings.db
    try:
        server = ca.load_cert(state["server_cert"])
        key = ca.load_private_key(state["server_key"])
    except (KeyError, ValueError, TypeError) as e:
        raise StartupError(f"the TLS server certificate or key stored in {db} cannot be read ({e}): {RESTORE}"
                           ) from None
    if _public(server.public_key()) != _public(key.public_key()):
        raise StartupError(f"the TLS server certificate stored in {db} does not match its private key: {RESTORE}")
    missing = sans_lack(state["server_cert"], hosts_for(ctl.settings))
    if missing:
        raise StartupError(f"the TLS server certificate does not name {', '.join(missing)}: check --host and"
                           " --advertise, or " + RESTORE)
    try:
        ca.verify_chain(server, [state["signer_cert"]], [state["root_cert"]], at=clock.now(), eku="server")
    except (ca.ChainError, KeyError, ValueError) as e:
        raise StartupError(f"the TLS server certificate in {db} does not verify to the stored root CA ({e}):"
                           f" {RESTORE}") from None
