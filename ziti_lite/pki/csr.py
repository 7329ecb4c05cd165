"""Certificate signing requests: lenient input, strict signature check.

:func:`parse_csr` accepts PEM (``CERTIFICATE REQUEST`` or ``NEW CERTIFICATE REQUEST``), raw DER,
or bare base64 DER, and always verifies the CSR's self-signature.

CSRs made by mbedTLS (the C SDK) encode ``ecdsa-with-SHA256`` with an explicit NULL parameter,
which ``cryptography`` refuses to load. For those the DER is read with asn1crypto, the public
key is taken from the SubjectPublicKeyInfo and the signature is verified over the exact DER of
``certificationRequestInfo`` here. Subject and SANs are then read by ``cryptography`` from the
same ``certificationRequestInfo`` bytes wrapped with a parameter-less algorithm identifier.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from asn1crypto import algos as a_algos
from asn1crypto import core as a_core
from asn1crypto import csr as a_csr
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

__all__ = ["CsrError", "ParsedCsr", "parse_csr", "build_csr"]


class CsrError(ValueError):
    """The input is not a well-formed, correctly self-signed certificate signing request."""


@dataclass(frozen=True)
class ParsedCsr:
    der: bytes                               # the CSR as received (DER)
    public_key: Any                          # cryptography public key object
    subject: x509.Name
    sans: list[x509.GeneralName] = field(default_factory=list)
    signature_algorithm: str = ""            # dotted OID of the signature algorithm
    fallback: bool = False                   # True when cryptography refused it (mbedTLS style)

    @property
    def common_name(self) -> str | None:
        attrs = self.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not attrs:
            return None
        v = attrs[0].value
        return v if isinstance(v, str) else v.decode("utf-8", "replace")

    @property
    def pem(self) -> str:
        b64 = base64.b64encode(self.der).decode("ascii")
        body = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        return f"-----BEGIN CERTIFICATE REQUEST-----\n{body}\n-----END CERTIFICATE REQUEST-----\n"


_PEM_RE = re.compile(
    rb"-----BEGIN ((?:NEW )?CERTIFICATE REQUEST)-----(.*?)-----END \1-----", re.DOTALL
)
_WS = re.compile(rb"\s+")


def _b64(text: bytes) -> bytes:
    compact = _WS.sub(b"", text)
    if not compact:
        raise CsrError("empty CSR")
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as e:
        raise CsrError(f"CSR is not valid base64: {e}") from e


def _to_der(raw: bytes) -> bytes:
    if raw[:1] == b"\x30":
        return raw
    stripped = raw.strip()
    if not stripped:
        raise CsrError("empty CSR")
    if b"-----BEGIN" in stripped:
        m = _PEM_RE.search(stripped)
        if not m:
            raise CsrError("no CERTIFICATE REQUEST PEM block found")
        body = b"\n".join(line for line in m.group(2).splitlines() if b":" not in line)
        der = _b64(body)
    else:
        der = _b64(stripped)
    if der[:1] != b"\x30":
        raise CsrError("CSR is not a DER SEQUENCE")
    return der


def _sans_of(c: x509.CertificateSigningRequest) -> list[x509.GeneralName]:
    try:
        return list(c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return []


_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "md5": hashes.MD5, "sha1": hashes.SHA1, "sha224": hashes.SHA224, "sha256": hashes.SHA256,
    "sha384": hashes.SHA384, "sha512": hashes.SHA512,
    "sha3_224": hashes.SHA3_224, "sha3_256": hashes.SHA3_256, "sha3_384": hashes.SHA3_384,
    "sha3_512": hashes.SHA3_512,
}


def _hash(name: str) -> hashes.HashAlgorithm:
    try:
        return _HASHES[name]()
    except KeyError:
        raise CsrError(f"unsupported CSR signature hash {name!r}") from None


def _verify_manually(alg: a_algos.SignedDigestAlgorithm, key: Any, sig: bytes, tbs: bytes) -> None:
    try:
        sig_algo = alg.signature_algo
    except ValueError as e:
        raise CsrError(f"unsupported CSR signature algorithm {alg['algorithm'].dotted}") from e
    try:
        if sig_algo == "rsassa_pkcs1v15" and isinstance(key, rsa.RSAPublicKey):
            key.verify(sig, tbs, padding.PKCS1v15(), _hash(alg.hash_algo))
        elif sig_algo == "rsassa_pss" and isinstance(key, rsa.RSAPublicKey):
            params = alg["parameters"]
            mgf_hash = params["mask_gen_algorithm"]["parameters"]["algorithm"].native
            pad = padding.PSS(mgf=padding.MGF1(_hash(mgf_hash)), salt_length=params["salt_length"].native)
            key.verify(sig, tbs, pad, _hash(alg.hash_algo))
        elif sig_algo == "ecdsa" and isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(sig, tbs, ec.ECDSA(_hash(alg.hash_algo)))
        elif sig_algo == "ed25519" and isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(sig, tbs)
        elif sig_algo == "ed448" and isinstance(key, ed448.Ed448PublicKey):
            key.verify(sig, tbs)
        else:
            raise CsrError(f"CSR signature algorithm {sig_algo} does not match its {type(key).__name__}")
    except InvalidSignature:
        raise CsrError("CSR signature is invalid") from None
    except (ValueError, TypeError, UnsupportedAlgorithm, KeyError) as e:
        if isinstance(e, CsrError):
            raise
        raise CsrError(f"could not verify CSR signature: {e}") from e


def _parse_fallback(der: bytes, first_error: Exception) -> ParsedCsr:
    try:
        req = a_csr.CertificationRequest.load(der, strict=True)
        info = req["certification_request_info"]
        tbs = info.dump()                      # the bytes as received (asn1crypto keeps them)
        spki = info["subject_pk_info"].dump()
        alg = req["signature_algorithm"]
        alg_oid = alg["algorithm"].dotted
        sig = req["signature"].native
    except Exception as e:
        raise CsrError(f"could not parse CSR: {first_error}") from e
    if not isinstance(sig, bytes):
        raise CsrError("could not parse CSR signature")
    try:
        key = serialization.load_der_public_key(spki)
    except (ValueError, UnsupportedAlgorithm) as e:
        raise CsrError(f"unsupported CSR public key: {e}") from e
    _verify_manually(alg, key, sig, tbs)
    # Subject and SANs: let cryptography read the same certificationRequestInfo, wrapped with a
    # parameter-less algorithm identifier (the signature was already checked above).
    try:
        rewrapped = _tlv(0x30, tbs + _tlv(0x30, a_core.ObjectIdentifier(_ECDSA_SHA256).dump())
                         + req["signature"].dump())
        c = x509.load_der_x509_csr(rewrapped)
        subject = c.subject
        sans = _sans_of(c)
        # touch the values so that lazy parse errors surface here
        subject.rfc4514_string()
    except Exception as e:
        raise CsrError(f"could not parse CSR subject or extensions: {e}") from e
    return ParsedCsr(der=der, public_key=key, subject=subject, sans=sans,
                     signature_algorithm=alg_oid, fallback=True)


_ECDSA_SHA256 = "1.2.840.10045.4.3.2"


def _tlv(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        length = bytes([n])
    else:
        b = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(b)]) + b
    return bytes([tag]) + length + content


def parse_csr(data: bytes | str) -> ParsedCsr:
    """Parse and verify a CSR (PEM, DER or bare base64 DER). Raises :class:`CsrError`."""
    if isinstance(data, str):
        try:
            raw = data.encode("ascii")
        except UnicodeEncodeError:
            raise CsrError("CSR text is not ASCII") from None
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:
        raise CsrError(f"CSR must be bytes or str, not {type(data).__name__}")
    if not raw:
        raise CsrError("empty CSR")
    der = _to_der(raw)
    try:
        c = x509.load_der_x509_csr(der)
        alg_oid = c.signature_algorithm_oid.dotted_string
        valid = c.is_signature_valid
    except (ValueError, UnsupportedAlgorithm, TypeError) as e:
        return _parse_fallback(der, e)
    if not valid:
        raise CsrError("CSR signature is invalid")
    try:
        key = c.public_key()
        subject = c.subject
        subject.rfc4514_string()
        sans = _sans_of(c)
    except (ValueError, UnsupportedAlgorithm, TypeError) as e:
        raise CsrError(f"could not parse CSR: {e}") from e
    return ParsedCsr(der=der, public_key=key, subject=subject, sans=sans, signature_algorithm=alg_oid)


# --------------------------------------------------------------------------------------------
# client side (tests, helpers): build a CSR like an SDK would


def _general_name(s: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(s))
    except ValueError:
        pass
    if "://" in s:
        return x509.UniformResourceIdentifier(s)
    if "@" in s:
        return x509.RFC822Name(s)
    return x509.DNSName(s)


def build_csr(
    common_name: str | None = None,
    *,
    key_pem: str | None = None,
    key_type: str = "ec",
    subject: x509.Name | None = None,
    sans: Sequence[str | x509.GeneralName] = (),
    explicit_null_params: bool = False,
) -> tuple[str, str]:
    """Make a CSR the way an SDK does; returns ``(csr_pem, key_pem)``.

    ``key_type``: ``"ec"`` (P-256) or ``"rsa"`` (2048), ignored when ``key_pem`` is given.
    Subject: ``subject`` or ``O=OpenZiti, CN=<common_name>``. ``sans``: strings (IP literals →
    IP, ``scheme://`` → URI, ``a@b`` → email, else DNS) or general names.
    ``explicit_null_params``: encode the signature algorithm with a NULL parameter, as mbedTLS
    does for ECDSA (same signature, the algorithm identifier is outside the signed part).
    """
    key: CertificateIssuerPrivateKeyTypes
    if key_pem is not None:
        # a key that cannot sign (X25519, DH...) fails in sign() below
        key = cast(CertificateIssuerPrivateKeyTypes,
                   serialization.load_pem_private_key(key_pem.encode("ascii"), password=None))
    elif key_type == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    elif key_type == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        raise ValueError(f"unknown key_type {key_type!r}")
    if subject is None:
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "OpenZiti")]
        if common_name:
            attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        subject = x509.Name(attrs)
    b = x509.CertificateSigningRequestBuilder().subject_name(subject)
    if sans:
        gns = [s if isinstance(s, x509.GeneralName) else _general_name(s) for s in sans]
        b = b.add_extension(x509.SubjectAlternativeName(gns), critical=False)
    hash_alg = None if isinstance(key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)) else hashes.SHA256()
    csr = b.sign(key, hash_alg)
    der = csr.public_bytes(serialization.Encoding.DER)
    if explicit_null_params:
        req = a_csr.CertificationRequest.load(der)
        alg = req["signature_algorithm"]["algorithm"].dotted
        der = _tlv(0x30, req["certification_request_info"].dump()
                   + _tlv(0x30, a_core.ObjectIdentifier(alg).dump() + a_core.Null().dump())
                   + req["signature"].dump())
    b64 = base64.b64encode(der).decode("ascii")
    body = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
    csr_pem = f"-----BEGIN CERTIFICATE REQUEST-----\n{body}\n-----END CERTIFICATE REQUEST-----\n"
    key_out = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode("ascii")
    return csr_pem, key_out
