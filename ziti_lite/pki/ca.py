"""Controller PKI primitives: pure functions, no database, no HTTP.

Layout (equivalent to an upstream quickstart controller, see the PKI reference §9.3/§9.4):

* ``root``   self-signed root CA (EC P-256, ~10 years, CA, certSign|cRLSign)
* ``signer`` intermediate "edge signer" CA issued by the root (EC P-256, CA pathlen 0); it issues
  the TLS server certificate, every client certificate (enrollment, extend) and router certs
* ``server`` TLS server certificate, **RSA 2048** (the 0.29 C SDK only verifies RS256 enrollment
  JWTs), serverAuth+clientAuth, SANs ``localhost``, ``127.0.0.1``, ``::1`` + advertised hosts

``/.well-known/est/cacerts`` serves {root, signer} (:meth:`Pki.ca_certs_pem`,
:func:`cacerts_pkcs7`); the TLS listener presents ``server`` + ``signer``
(:meth:`Pki.server_chain_pem`); enrollment JWTs are signed with the server key (``tokens.py``).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union, cast
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPublicKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ziti_lite import clock

from .csr import ParsedCsr, parse_csr

__all__ = [
    "KeyPair",
    "Pki",
    "ChainError",
    "create_controller_pki",
    "issue_server_cert",
    "reissue_ca",
    "sign_csr",
    "chain_pem",
    "fingerprint",
    "cert_info",
    "cacerts_pkcs7",
    "ca_bundle_pem",
    "verify_chain",
    "verified_path",
    "load_cert",
    "load_certs",
    "load_private_key",
    "is_ca",
    "random_serial",
]

UTC = dt.UTC
CA_DAYS = 3650
SERVER_DAYS = 365
CLIENT_DAYS = 365

CertLike = Union[str, bytes, x509.Certificate, "KeyPair"]


class ChainError(ValueError):
    """A certificate chain did not verify (bad signature, unknown issuer, expired, wrong usage)."""


@dataclass
class KeyPair:
    """A certificate and its private key, both PEM (key: unencrypted PKCS#8)."""

    cert_pem: str
    key_pem: str

    @property
    def cert(self) -> x509.Certificate:
        return load_cert(self.cert_pem)

    @property
    def key(self) -> Any:
        return load_private_key(self.key_pem)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.cert_pem)


@dataclass
class Pki:
    root: KeyPair
    signer: KeyPair
    server: KeyPair

    def ca_certs_pem(self) -> list[str]:
        """The controller CA bundle: what ``/.well-known/est/cacerts`` serves (root, signer)."""
        return [self.root.cert_pem, self.signer.cert_pem]

    def ca_bundle_pem(self) -> str:
        """Same bundle as one PEM string (the ``ca`` field of enroll/extend answers)."""
        return chain_pem(self.root, self.signer)

    def server_chain_pem(self) -> str:
        """What the TLS listener presents: server leaf followed by the signer."""
        return chain_pem(self.server, self.signer)

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {n: {"cert_pem": kp.cert_pem, "key_pem": kp.key_pem}
                for n, kp in (("root", self.root), ("signer", self.signer), ("server", self.server))}

    @classmethod
    def from_dict(cls, d: dict[str, dict[str, str]]) -> Pki:
        return cls(**{n: KeyPair(d[n]["cert_pem"], d[n]["key_pem"]) for n in ("root", "signer", "server")})


# --------------------------------------------------------------------------------------------
# loading / encoding helpers


def _pem_str(data: str | bytes) -> str:
    return data.decode("ascii") if isinstance(data, (bytes, bytearray)) else data


def load_certs(data: CertLike | Iterable[CertLike | Iterable[CertLike]] | None) -> list[x509.Certificate]:
    """Every certificate in ``data``: a PEM string/bytes (bundles allowed), DER bytes, a
    certificate object, a :class:`KeyPair`, or an iterable of those."""
    if data is None:
        return []
    if isinstance(data, x509.Certificate):
        return [data]
    if isinstance(data, KeyPair):
        return load_certs(data.cert_pem)
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if b"-----BEGIN" in raw:
            return list(x509.load_pem_x509_certificates(raw))
        return [x509.load_der_x509_certificate(raw)]
    if isinstance(data, str):
        if "-----BEGIN" not in data:
            if not data.strip():
                return []
            raise ValueError("no PEM certificate found")
        return list(x509.load_pem_x509_certificates(data.encode("ascii")))
    out: list[x509.Certificate] = []
    for item in data:
        out.extend(load_certs(item))
    return out


def load_cert(data: CertLike) -> x509.Certificate:
    """The first certificate in ``data`` (see :func:`load_certs`)."""
    certs = load_certs(data)
    if not certs:
        raise ValueError("no certificate found")
    return certs[0]


@lru_cache(maxsize=64)
def _load_private_key_cached(pem: str) -> Any:
    return serialization.load_pem_private_key(pem.encode("ascii"), password=None)


def load_private_key(pem: str | bytes) -> Any:
    """Load an unencrypted PEM private key (cached: keys are reused for every signature)."""
    return _load_private_key_cached(_pem_str(pem))


def _cert_to_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _key_to_pem(key: Any) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def cert_der(cert_pem_or_der: CertLike) -> bytes:
    """The DER of the (first) certificate given."""
    return _der(load_cert(cert_pem_or_der))


def random_serial() -> int:
    """A random, positive, non-zero 128-bit serial number."""
    while True:
        s = secrets.randbits(128)
        if s:
            return s


def _hash_for(key: Any) -> hashes.SHA256 | hashes.SHA384 | hashes.SHA512 | None:
    if isinstance(key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)):
        return None
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if key.curve.key_size == 384:
            return hashes.SHA384()
        if key.curve.key_size == 521:
            return hashes.SHA512()
    return hashes.SHA256()


def _aware(t: dt.datetime | None) -> dt.datetime:
    if t is None:
        return clock.now()
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _aki(issuer: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    try:
        ski = issuer.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    except x509.ExtensionNotFound:
        # an issuer's key signs, so it is never one of the key-agreement-only types (X25519, X448)
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(
            cast(CertificateIssuerPublicKeyTypes, issuer.public_key()))


def _ca_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
        encipher_only=False, decipher_only=False,
    )


def _leaf_key_usage(*, data_encipherment: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=True,
        data_encipherment=data_encipherment, key_agreement=False, key_cert_sign=False,
        crl_sign=False, encipher_only=False, decipher_only=False,
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = []
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


# --------------------------------------------------------------------------------------------
# controller PKI


def _make_ca(
    subject: x509.Name,
    key: Any,
    issuer: KeyPair | None,
    *,
    path_length: int | None,
    now: dt.datetime,
    days: int,
) -> KeyPair:
    if issuer is None:
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key())
        issuer_name, issuer_key = subject, key
    else:
        ic = issuer.cert
        issuer_name, issuer_key, aki = ic.subject, issuer.key, _aki(ic)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(random_serial())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(_ca_key_usage(), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
    )
    cert = builder.sign(issuer_key, _hash_for(issuer_key))
    return KeyPair(_cert_to_pem(cert), _key_to_pem(key))


def _host_only(h: str) -> str:
    """``host``, ``host:port``, ``[v6]:port``, ``https://host:port/path`` → host."""
    h = h.strip()
    if not h:
        return ""
    if "://" in h:
        return urlsplit(h).hostname or ""
    if h.startswith("["):
        end = h.find("]")
        return h[1:end] if end > 0 else h
    try:
        ipaddress.ip_address(h)
        return h
    except ValueError:
        pass
    if h.count(":") == 1:
        host, port = h.rsplit(":", 1)
        if port.isdigit():
            return host
    return h


def _server_sans(hosts: Iterable[str]) -> list[x509.GeneralName]:
    sans: list[x509.GeneralName] = []
    seen: set[tuple[str, str]] = set()
    for raw in ["localhost", "127.0.0.1", "::1", *hosts]:
        h = _host_only(raw)
        if not h:
            continue
        try:
            ip = ipaddress.ip_address(h)
        except ValueError:
            key = ("dns", h.lower())
            gn: x509.GeneralName = x509.DNSName(h)
        else:
            key = ("ip", str(ip))
            gn = x509.IPAddress(ip)
        if key not in seen:
            seen.add(key)
            sans.append(gn)
    return sans


def issue_server_cert(
    signer: KeyPair,
    hosts: Sequence[str],
    *,
    name: str = "ziti-lite",
    days: int = SERVER_DAYS,
    key_pem: str | None = None,
    now: dt.datetime | None = None,
) -> KeyPair:
    """A TLS server certificate issued by ``signer``.

    RSA 2048 (a new key unless ``key_pem`` is given: keeping the key keeps outstanding enrollment
    JWTs verifiable by clients, which check them against the presented leaf's public key).
    SANs: DNS ``localhost``, IP ``127.0.0.1`` and ``::1``, plus every host (``host``,
    ``host:port`` or URL accepted; IP literals become IP SANs, names DNS SANs). EKU serverAuth +
    clientAuth; CN = ``name``.
    """
    now = _aware(now)
    key = load_private_key(key_pem) if key_pem else rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sc = signer.cert
    skey = signer.key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name, "OpenZiti"))
        .issuer_name(sc.subject)
        .public_key(key.public_key())
        .serial_number(random_serial())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_leaf_key_usage(data_encipherment=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(_server_sans(hosts)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_aki(sc), critical=False)
    )
    cert = builder.sign(skey, _hash_for(skey))
    return KeyPair(_cert_to_pem(cert), _key_to_pem(key))


def create_controller_pki(hosts: Sequence[str], name: str = "ziti-lite", *, server_days: int = SERVER_DAYS) -> Pki:
    """Root CA → signing CA → RSA TLS server cert for ``hosts`` (see module docstring)."""
    now = clock.now()
    root_key = ec.generate_private_key(ec.SECP256R1())
    root = _make_ca(_name(f"{name} Root CA", name), root_key, None, path_length=None, now=now, days=CA_DAYS)
    signer_key = ec.generate_private_key(ec.SECP256R1())
    signer = _make_ca(_name(f"{name} Signing CA", name), signer_key, root, path_length=0, now=now, days=CA_DAYS)
    server = issue_server_cert(signer, hosts, name=name, now=now, days=server_days)
    return Pki(root=root, signer=signer, server=server)


def reissue_ca(ca: KeyPair, issuer: KeyPair | None, *, days: int = CA_DAYS, now: dt.datetime | None = None) -> KeyPair:
    """``ca`` certified again for ``days`` from ``now``: same subject, same key, same path length,
    by ``issuer`` (None: self-signed again, for the root). Everything ``ca`` signed before still
    verifies under the new certificate (the issuer name and key it names are unchanged), so
    renewing a CA never strands the certificates it issued."""
    cert = ca.cert
    try:
        path_length = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.path_length
    except x509.ExtensionNotFound:
        path_length = None
    return _make_ca(cert.subject, ca.key, issuer, path_length=path_length, now=_aware(now), days=days)


# --------------------------------------------------------------------------------------------
# issuing certificates from CSRs

_USAGES = {
    "client": [ExtendedKeyUsageOID.CLIENT_AUTH],
    "server": [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
}


def sign_csr(
    csr: ParsedCsr | str | bytes,
    signer: KeyPair,
    days: float = CLIENT_DAYS,
    usage: str = "client",
    *,
    sans: Sequence[x509.GeneralName] | None = None,
    copy_sans: bool | None = None,
    now: dt.datetime | None = None,
) -> str:
    """Issue a certificate for a (verified) CSR; returns the leaf PEM.

    As upstream: subject copied verbatim from the CSR; NotBefore = now − 1 min, NotAfter =
    now + ``days``; keyUsage (critical) digitalSignature|keyEncipherment|dataEncipherment;
    authorityKeyIdentifier from the signer; no basicConstraints, no SKID. Serial: 128-bit random.

    ``usage``: ``"client"`` → EKU clientAuth; ``"server"`` (router server certs) → serverAuth +
    clientAuth. SANs: ``sans`` when given (extend copies the current cert's SANs); otherwise the
    CSR's SANs when ``copy_sans`` (default: True for ``"server"``, False for ``"client"``: an
    identity's ott cert drops CSR SANs; pass ``copy_sans=True`` for a router's client cert).
    A CSR given as PEM/DER is parsed first (:class:`~ziti_lite.pki.csr.CsrError` when invalid).
    """
    if not isinstance(csr, ParsedCsr):
        csr = parse_csr(csr)
    if usage not in _USAGES:
        raise ValueError(f"unknown certificate usage {usage!r}")
    now = _aware(now)
    if sans is None:
        if copy_sans is None:
            copy_sans = usage == "server"
        sans = list(csr.sans) if copy_sans else []
    sc = signer.cert
    skey = signer.key
    builder = (
        x509.CertificateBuilder()
        .subject_name(csr.subject)
        .issuer_name(sc.subject)
        .public_key(csr.public_key)
        .serial_number(random_serial())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(_leaf_key_usage(data_encipherment=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage(_USAGES[usage]), critical=False)
        .add_extension(_aki(sc), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    cert = builder.sign(skey, _hash_for(skey))
    return _cert_to_pem(cert)


# --------------------------------------------------------------------------------------------
# inspection / encoding


def chain_pem(*kps: CertLike) -> str:
    """Concatenate certificate PEMs (KeyPairs, PEM strings or certificate objects), in order,
    each ending in one newline."""
    parts = []
    for kp in kps:
        if isinstance(kp, KeyPair):
            text = kp.cert_pem
        elif isinstance(kp, x509.Certificate):
            text = _cert_to_pem(kp)
        elif isinstance(kp, (bytes, bytearray)) and b"-----BEGIN" not in kp:
            text = _cert_to_pem(x509.load_der_x509_certificate(bytes(kp)))
        else:
            text = _pem_str(kp)
        text = text.strip()
        if text:
            parts.append(text + "\n")
    return "".join(parts)


def fingerprint(cert_pem_or_der: CertLike) -> str:
    """Lowercase hex SHA-1 of the certificate DER, no separators (upstream authenticator, CA and
    JWT ``kid`` fingerprint)."""
    return hashlib.sha1(_der(load_cert(cert_pem_or_der))).hexdigest()


def is_ca(cert: CertLike) -> bool:
    c = load_cert(cert)
    try:
        return bool(c.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def cert_info(pem: CertLike) -> dict[str, Any]:
    """Summary of the first certificate: ``cn`` (subject CN or None), ``subject``/``issuer``
    (RFC 4514 strings), ``serial`` (int), ``not_before``/``not_after`` (aware UTC datetimes),
    ``fingerprint`` (SHA-1 hex), ``is_ca`` (bool)."""
    c = load_cert(pem)
    cns = c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    cn = cns[0].value if cns else None
    return {
        "cn": cn if isinstance(cn, str) else (cn.decode("utf-8", "replace") if cn else None),
        "subject": c.subject.rfc4514_string(),
        "issuer": c.issuer.rfc4514_string(),
        "serial": c.serial_number,
        "not_before": c.not_valid_before_utc,
        "not_after": c.not_valid_after_utc,
        "fingerprint": fingerprint(c),
        "is_ca": is_ca(c),
    }


def _dedupe(certs: Iterable[x509.Certificate]) -> list[x509.Certificate]:
    seen: set[bytes] = set()
    out = []
    for c in certs:
        d = hashlib.sha1(_der(c)).digest()
        if d not in seen:
            seen.add(d)
            out.append(c)
    return out


def ca_bundle_pem(*certs: CertLike | Iterable[CertLike]) -> str:
    """Upstream's "CA bundle" rule: only CA certificates, de-duplicated by SHA-1, as PEM."""
    return chain_pem(*[c for c in _dedupe(load_certs(list(certs))) if is_ca(c)])


def cacerts_pkcs7(certs_pem: Sequence[CertLike]) -> str:
    """Body of ``/.well-known/est/cacerts``: standard, padded base64 of a DER certs-only PKCS#7
    SignedData, wrapped at 64 characters per line with ``\\n``, no trailing newline.
    Certificates are de-duplicated (by SHA-1), order kept."""
    certs = _dedupe(load_certs(list(certs_pem)))
    if not certs:
        raise ValueError("no certificates for the PKCS#7 bundle")
    der = pkcs7.serialize_certificates(certs, serialization.Encoding.DER)
    b64 = base64.b64encode(der).decode("ascii")
    return "\n".join(b64[i : i + 64] for i in range(0, len(b64), 64))


# --------------------------------------------------------------------------------------------
# chain verification (client certificates presented in a TLS handshake)

_EKU_OIDS = {"client": ExtendedKeyUsageOID.CLIENT_AUTH, "server": ExtendedKeyUsageOID.SERVER_AUTH}


def _eku_allows(cert: x509.Certificate, eku: str | None) -> bool:
    if eku is None:
        return True
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True  # no EKU extension: any usage
    return _EKU_OIDS[eku] in usages or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages


def _can_sign_certs(cert: x509.Certificate, below: int) -> str | None:
    """None when ``cert`` may issue a chain with ``below`` CA certificates under it, else why not."""
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        if cert.version == x509.Version.v1:
            return None  # legacy v1 CA certificate
        return "issuer is not a CA"
    if not bc.ca:
        return "issuer is not a CA"
    if bc.path_length is not None and below > bc.path_length:
        return "path length constraint exceeded"
    try:
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        if not ku.key_cert_sign:
            return "issuer key usage lacks keyCertSign"
    except x509.ExtensionNotFound:
        pass
    return None


def verified_path(
    leaf_pem: CertLike,
    intermediates_pem: Iterable[CertLike] | None,
    trust_anchors_pem: Iterable[CertLike],
    at: dt.datetime | None = None,
    allow_expired: bool = False,
    *,
    eku: str | None = None,
) -> list[x509.Certificate]:
    """Build and verify a path leaf → … → trust anchor; returns it (leaf first, anchor last).

    Intermediates may come in any order and may contain unrelated certificates. Signatures are
    checked for RSA (PKCS#1 v1.5 / PSS), ECDSA and EdDSA issuers. Every issuer must be a CA
    (basicConstraints, pathLen, keyCertSign when keyUsage present). Validity of every certificate
    in the path is checked at ``at`` (default: now) unless ``allow_expired`` (upstream cert auth
    ignores dates during chain building). ``eku`` (``"client"``/``"server"``): every certificate
    in the path that carries an EKU extension must allow it (or anyExtendedKeyUsage).
    A leaf that is itself one of the trust anchors verifies as ``[leaf]``.

    One indivisible step (over 80 lines on purpose): a single path search whose checks share
    the search's state at each hop; split, its parts would only pass that state around.
    Raises :class:`ChainError`.
    """
    if eku is not None and eku not in _EKU_OIDS:
        raise ValueError(f"unknown eku {eku!r}")
    try:
        leaf = load_cert(leaf_pem)
        inters = load_certs(list(intermediates_pem or []))
        anchors = _dedupe(load_certs(list(trust_anchors_pem)))
    except ValueError as e:
        raise ChainError(f"could not parse certificate: {e}") from e
    if not anchors:
        raise ChainError("no trust anchors")
    when = _aware(at)

    def time_ok(c: x509.Certificate) -> bool:
        return allow_expired or c.not_valid_before_utc <= when <= c.not_valid_after_utc

    if not time_ok(leaf):
        raise ChainError("certificate is expired or not yet valid")
    if not _eku_allows(leaf, eku):
        raise ChainError("certificate extended key usage does not allow this use")
    anchor_ders = {_der(a) for a in anchors}
    if _der(leaf) in anchor_ders:
        return [leaf]

    candidates = [(a, True) for a in anchors] + [(c, False) for c in _dedupe(inters) if _der(c) not in anchor_ders]
    reasons: list[str] = []

    def walk(path: list[x509.Certificate]) -> list[x509.Certificate] | None:
        cur = path[-1]
        if len(path) > 12:
            return None
        in_path = {_der(c) for c in path}
        for cand, is_anchor in candidates:
            if cand.subject != cur.issuer or _der(cand) in in_path:
                continue
            try:
                cur.verify_directly_issued_by(cand)
            except Exception as e:  # InvalidSignature, ValueError, TypeError, UnsupportedAlgorithm
                reasons.append(f"signature check against {cand.subject.rfc4514_string()} failed: {type(e).__name__}")
                continue
            why = _can_sign_certs(cand, len(path) - 1)
            if why:
                reasons.append(why)
                continue
            if not time_ok(cand):
                reasons.append(f"issuer {cand.subject.rfc4514_string()} is expired or not yet valid")
                continue
            if not _eku_allows(cand, eku):
                reasons.append("issuer extended key usage does not allow this use")
                continue
            if is_anchor:
                return path + [cand]
            found = walk(path + [cand])
            if found:
                return found
        return None

    found = walk([leaf])
    if found is None:
        detail = "; ".join(dict.fromkeys(reasons)) or "no issuer found among intermediates and trust anchors"
        raise ChainError(f"certificate does not chain to a trusted CA: {detail}")
    return found


def verify_chain(
    leaf_pem: CertLike,
    intermediates_pem: Iterable[CertLike] | None,
    trust_anchors_pem: Iterable[CertLike],
    at: dt.datetime | None = None,
    allow_expired: bool = False,
    *,
    eku: str | None = None,
) -> bool:
    """True when the leaf chains to a trust anchor (see :func:`verified_path`); raises
    :class:`ChainError` otherwise."""
    verified_path(leaf_pem, intermediates_pem, trust_anchors_pem, at, allow_expired, eku=eku)
    return True
