"""Every live TLS server context of a controller, and loading the server certificate into them.

The API listener, the embedded edge router and any other listener the controller runs present
the same server certificate (with the signing CA behind it). Each context is built here, one
call per listener (``api``, ``edge``, ``ctrl``: ``server.build`` calls them in turn), and
``register``-ed on the controller; after a renewal ``reload`` loads the new pair into every
registered context. ``SSLContext.load_cert_chain`` on a live context changes what *new*
handshakes present: a connection made earlier keeps the certificate it was made with, so nothing
open is cut. Reloads run on the event loop's thread, where the listeners create their SSL
objects, so no handshake starts half-way through a reload.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import TYPE_CHECKING, Protocol

from .. import tls

if TYPE_CHECKING:
    from ..config import Settings
    from ..db.store import Store


class LifecycleController(tls.HasTlsContexts, Protocol):
    """The controller as the lifecycle modules see it. Each folder below ``app`` names the part
    of ``app.Controller`` it uses with a Protocol of its own (ARCHITECTURE.md lists them), which
    extends another only where its modules pass the controller on: mypy checks the controller
    against them where it is passed, and a ``Ctx`` passed instead is refused."""
    settings: Settings
    store: Store
    state: dict[str, str]
    cert_renewals: dict[str, int]


def load_server_chain(context: ssl.SSLContext, state: dict[str, str]) -> None:
    """Load the server certificate, the signing CA behind it and the server key into ``context``
    (the ``ssl`` module loads them only from files: a private directory, removed at once)."""
    with tempfile.TemporaryDirectory(prefix="ziti-lite-") as d:
        os.chmod(d, 0o700)
        cert = os.path.join(d, "server.pem")
        key = os.path.join(d, "server.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(state["server_key"])
        with open(cert, "w") as f:
            f.write(state["server_cert"].strip() + "\n" + state["signer_cert"].strip() + "\n")
        context.load_cert_chain(cert, key)


def register(ctl: LifecycleController, context: ssl.SSLContext) -> ssl.SSLContext:
    """Make ``context`` one of the controller's live server contexts (renewals reload it);
    returns it, so a listener writes ``ctl.x_context = contexts.register(ctl, make())``."""
    if not any(c is context for c in ctl.tls_contexts):
        ctl.tls_contexts.append(context)
    return context


def reload(ctl: LifecycleController) -> int:
    """Load ``ctl.state``'s server pair into every registered context; returns how many. Where a
    context checks client chains itself (no accept-any callback), the signing CA is added to its
    trust too, so certificates issued by a renewed signing CA keep passing the handshake."""
    for context in ctl.tls_contexts:
        load_server_chain(context, ctl.state)
        tls.trust_context(context, ctl.state["signer_cert"])
    return len(ctl.tls_contexts)


# ---------------------------------------------------------------- one context per listener
def api(ctl: LifecycleController) -> ssl.SSLContext:
    """The API's: client certificates of the controller's CAs and of every registered CA."""
    return register(ctl, ssl_context(ctl.state, _registered_cas(ctl)))


def edge(ctl: LifecycleController) -> ssl.SSLContext:
    """The embedded edge router's: the API's certificate and client-chain rules, plus the ALPN
    name upstream's edge listener offers (SDKs that send none are served as well)."""
    context = register(ctl, ssl_context(ctl.state, _registered_cas(ctl)))
    context.set_alpn_protocols(["ziti-edge"])
    return context


def ctrl(ctl: LifecycleController) -> ssl.SSLContext:
    """The routers' control channel's (``ctrl_ssl_context``)."""
    return register(ctl, ctrl_ssl_context(ctl.state))


def _registered_cas(ctl: LifecycleController) -> list[str]:
    return ctl.store.column("SELECT cert_pem FROM cas")


X509_V_FLAG_PARTIAL_CHAIN = 0x80000
X509_V_FLAG_NO_CHECK_TIME = 0x200000


def _server_side(state: dict) -> ssl.SSLContext:
    """A TLS 1.2+ server context presenting the controller's server certificate and its chain."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    load_server_chain(ctx, state)
    return ctx


def ctrl_ssl_context(state: dict) -> ssl.SSLContext:
    """The routers' control channel. Routers' certificates are the controller's to check: any
    chain passes the handshake and ``ctrl/channel.py`` verifies it against the controller's own
    CAs, with validity dates, so a refusal is logged with its reason; where the callback cannot
    be installed, OpenSSL requires a certificate verifying against those CAs itself."""
    ctx = _server_side(state)
    ctx.set_alpn_protocols(["ziti-ctrl"])
    if not tls.accept_any_client_chain(ctx):
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=state["signer_cert"] + state["root_cert"])
    return ctx


def ssl_context(state: dict, extra_cas: list[str] | None = None) -> ssl.SSLContext:
    ctx = _server_side(state)
    if tls.accept_any_client_chain(ctx):
        return ctx
    ctx.load_verify_locations(cadata=state["signer_cert"] + state["root_cert"])
    for pem in extra_cas or ():
        try:
            ctx.load_verify_locations(cadata=pem)
        except (ssl.SSLError, ValueError):
            pass  # a CA entity whose PEM OpenSSL refuses is simply not trusted by the handshake
    # validity dates are the auth policy's business (allowExpiredCerts), not the handshake's;
    # registered CAs may be intermediates, which must count as anchors (as in Go's x509 roots)
    ctx.verify_flags |= X509_V_FLAG_NO_CHECK_TIME | X509_V_FLAG_PARTIAL_CHAIN
    return ctx
