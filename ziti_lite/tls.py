"""Client certificates from the TLS handshake, handed to the application.

uvicorn's HTTP protocols do not pass the peer certificate to the ASGI app. ``TlsH11Protocol``
(and ``TlsHttpToolsProtocol`` when httptools is installed) fixes that: asyncio calls
``connection_made`` only once the handshake is complete, so there the chain the client sent is
read from the SSL object and the app is wrapped, for that connection only, so that every
request's scope carries the ASGI TLS extension::

    scope["extensions"]["tls"] = {"client_cert_chain": [PEM, ...], ...}   # leaf first

Handlers read it with :func:`peer_certs`; this is the only module that touches TLS data.
Tests that use Starlette's TestClient put the same extension into the scope
(:class:`WithClientCert`).

Trust: like upstream (Go's ``tls.RequestClientCert``), the listener asks for a client
certificate, does not require one, and lets the handshake succeed whatever chain is presented;
the application decides per request against the CAs valid at that moment (controller CA,
verified and auth-enabled CA entities, auth policy ``allowExpiredCerts``), so a certificate from
an unknown CA gets ``401 INVALID_AUTH`` rather than a failed handshake. The stdlib ``ssl`` module
has no verify callback, so :func:`accept_any_client_chain` installs one (always "ok") on the
context's ``SSL_CTX`` through ctypes, after checking that it found the right object. Where that
is not possible the handshake falls back to OpenSSL's own check against the controller CAs and
every registered CA entity (:func:`trust` adds new ones while running).
"""

from __future__ import annotations

import _ssl
import ctypes
import functools
import logging
import ssl
import sys
from typing import Any, Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from uvicorn.protocols.http.h11_impl import H11Protocol

try:  # optional: uvicorn uses httptools when it is installed
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - depends on the environment
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

log = logging.getLogger("ziti_lite.tls")
_DER = _ssl.ENCODING_DER
_TLS_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


# ------------------------------------------------------------------ reading the handshake
def _chain_der(ssl_object: Any) -> list[bytes]:
    """DER of the certificates the client sent, leaf first ([] when it sent none)."""
    if ssl_object is None:
        return []
    out: list[bytes] = []
    inner = getattr(ssl_object, "_sslobj", ssl_object)
    getter = getattr(inner, "get_unverified_chain", None)  # private in 3.10-3.12, public in 3.13
    if getter is not None:
        try:
            for item in getter() or ():
                out.append(bytes(item) if isinstance(item, (bytes, bytearray)) else item.public_bytes(_DER))
        except Exception:
            out = []
    leaf = ssl_object.getpeercert(binary_form=True)
    if leaf and (not out or out[0] != leaf):
        out = [leaf] + [c for c in out if c != leaf]
    return out if leaf else []


def client_chain(transport: Any) -> list[bytes]:
    """DER of the certificates the peer of an asyncio TLS transport sent, leaf first."""
    return _chain_der(transport.get_extra_info("ssl_object"))


def _pem(der: bytes) -> str:
    return ssl.DER_cert_to_PEM_cert(der)


def tls_extension(transport: Any) -> dict | None:
    """The ASGI TLS extension for one connection, or None on a plain-text connection."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    try:
        chain = [_pem(d) for d in _chain_der(ssl_object)]
    except Exception:
        chain = []
    return {"server_cert": None, "client_cert_chain": chain, "client_cert_name": None,
            "client_cert_error": None, "tls_version": _TLS_VERSIONS.get(ssl_object.version() or ""),
            "cipher_suite": None}


class _WithTls:
    """The app of one connection: adds that connection's TLS extension to every scope."""

    __slots__ = ("app", "ext")

    def __init__(self, app, ext: dict):
        self.app, self.ext = app, ext

    async def __call__(self, scope, receive, send):
        if scope.get("type") in ("http", "websocket"):
            scope["extensions"] = {**(scope.get("extensions") or {}), "tls": self.ext}
        return await self.app(scope, receive, send)


class TlsH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, passing the client certificate chain to the app."""

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        ext = tls_extension(transport)
        if ext is not None:
            self.app = _WithTls(self.app, ext)


if HttpToolsProtocol is not None:
    class TlsHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, passing the client certificate chain to the app."""

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            ext = tls_extension(transport)
            if ext is not None:
                self.app = _WithTls(self.app, ext)
else:  # pragma: no cover
    TlsHttpToolsProtocol = None  # type: ignore[assignment,misc]


def protocol_class() -> type:
    """The HTTP protocol class for ``uvicorn.Config(http=...)``."""
    return TlsH11Protocol if TlsHttpToolsProtocol is None else TlsHttpToolsProtocol


# ------------------------------------------------------------------ the handshake's verdict
_SSL_VERIFY_PEER = 0x01
_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


@_VerifyCallback
def _chain_ok(preverify_ok: int, store_ctx: int) -> int:
    """OpenSSL's per-certificate verify callback: every presented chain passes the handshake."""
    return 1


_CHAIN_OK_ADDRESS = ctypes.cast(_chain_ok, ctypes.c_void_p).value


def _accepts_any(context: ssl.SSLContext) -> bool:
    return getattr(context, "_ziti_lite_accepts_any", False)


def _libssl():
    """The libssl that ``_ssl`` itself is linked against (symbols looked up through it)."""
    lib = ctypes.CDLL(_ssl.__file__)
    lib.SSL_CTX_get_options.restype = ctypes.c_uint64
    lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
    lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_get_verify_callback.restype = ctypes.c_void_p
    lib.SSL_CTX_get_verify_callback.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_set_verify.restype = None
    lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
    return lib


def accept_any_client_chain(context: ssl.SSLContext) -> bool:
    """Ask for a client certificate and let every presented chain through the handshake.

    CPython's ``SSLContext`` object holds its ``SSL_CTX *`` right after the object header; the
    pointer is used only after OpenSSL confirms it is the context (same options, same verify
    mode, no other callback). Returns False, leaving the context as it was, when that cannot be
    established. (CPython keeps a context's callback when ``verify_mode`` is set again.)"""
    context.verify_mode = ssl.CERT_OPTIONAL
    try:
        if sys.implementation.name != "cpython" or not (3, 8) <= sys.version_info[:2] <= (3, 14):
            raise LookupError("an interpreter whose SSLContext layout is not known here")
        lib = _libssl()
        ptr = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
        if (not ptr or lib.SSL_CTX_get_options(ptr) != int(context.options)
                or lib.SSL_CTX_get_verify_mode(ptr) != _SSL_VERIFY_PEER
                or lib.SSL_CTX_get_verify_callback(ptr) not in (None, _CHAIN_OK_ADDRESS)):
            raise LookupError("SSL_CTX not found where expected")
        lib.SSL_CTX_set_verify(ptr, _SSL_VERIFY_PEER, _chain_ok)
    except (OSError, AttributeError, LookupError, ValueError) as exc:
        log.warning("client certificates: handshake verification stays on (%s); certificates of"
                    " CAs unknown to the controller fail the handshake instead of getting 401", exc)
        return False
    context._ziti_lite_accepts_any = True  # type: ignore[attr-defined]
    return True


# ------------------------------------------------------------------ what handlers use
def peer_certs(ctx_or_scope: Any) -> list[x509.Certificate]:
    """The client's certificates for this request, leaf first; [] when none was presented.

    Accepts a handler context, a Starlette request or an ASGI scope. Chain entries may be PEM
    strings (the ASGI TLS extension) or DER bytes. A leaf that does not parse counts as no
    certificate; an unparsable intermediate is skipped."""
    scope = ctx_or_scope
    if hasattr(scope, "request"):
        scope = scope.request
    if hasattr(scope, "scope"):
        scope = scope.scope
    ext = ((scope.get("extensions") or {}).get("tls") or {}) if isinstance(scope, dict) else {}
    out: list[x509.Certificate] = []
    for i, item in enumerate(ext.get("client_cert_chain") or ()):
        try:
            out.extend(_load_certs(item if isinstance(item, str) else bytes(item)))
        except Exception:
            if i == 0:
                return []
    return out


@functools.lru_cache(maxsize=1024)
def _load_certs(item: str | bytes) -> tuple[x509.Certificate, ...]:
    """One chain entry (DER or PEM) parsed; cached, as a keep-alive client sends the same chain
    with every request and certificates are immutable."""
    if isinstance(item, bytes) and not item.lstrip().startswith(b"-----"):
        return (x509.load_der_x509_certificate(item),)
    return tuple(x509.load_pem_x509_certificates(item.encode("ascii") if isinstance(item, str) else item))


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


class HasTlsContexts(Protocol):
    """The controller as ``trust`` sees it: its live TLS server contexts (a Protocol, as every
    layer below the controller names the part of ``app.Controller`` it uses)."""
    tls_contexts: list[ssl.SSLContext]


def trust(ctl: HasTlsContexts, pem: str | None) -> None:
    """Let handshakes accept chains ending at ``pem`` from now on, on every live server context
    of the controller (``lifecycle/contexts.py``) that could not be made to accept every chain;
    otherwise there is nothing to do."""
    for context in ctl.tls_contexts:
        trust_context(context, pem)


def trust_context(context: ssl.SSLContext, pem: str | None) -> None:
    """``trust`` for one context."""
    if _accepts_any(context) or not pem or "-----BEGIN CERTIFICATE-----" not in pem:
        return
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError):
        pass  # not a usable certificate: the handshake just keeps refusing it


class WithClientCert:
    """ASGI wrapper for tests without TLS: presents ``chain`` (PEM strings or DER bytes, leaf
    first) as the connection's client certificates, like :class:`TlsH11Protocol` does."""

    def __init__(self, app, chain: list | None = None):
        self.app = app
        self.chain = list(chain or [])

    async def __call__(self, scope, receive, send):
        if scope.get("type") in ("http", "websocket") and self.chain:
            chain = [c if isinstance(c, str) else _pem(bytes(c)) for c in self.chain]
            scope["extensions"] = {**(scope.get("extensions") or {}),
                                   "tls": {"client_cert_chain": chain, "server_cert": None, "client_cert_name": None,
                                           "client_cert_error": None, "tls_version": None, "cipher_suite": None}}
        return await self.app(scope, receive, send)
