from __future__ import annotations

import base64
import ipaddress

import pytest
from asn1crypto import algos as a_algos
from asn1crypto import core as a_core
from asn1crypto import csr as a_csr
from asn1crypto import keys as a_keys
from asn1crypto import x509 as a_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from ziti_lite.pki import ca
from ziti_lite.pki.csr import CsrError, ParsedCsr, build_csr, parse_csr


def _crypto_csr(cn: str = "abc", key=None, sans=()) -> tuple[x509.CertificateSigningRequest, object]:
    key = key or ec.generate_private_key(ec.SECP256R1())
    b = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                   x509.NameAttribute(NameOID.ORGANIZATION_NAME, "NetFoundry"),
                   x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(key, hashes.SHA256()), key


def _pem(der: bytes, label: str = "CERTIFICATE REQUEST", width: int = 64, eol: str = "\n") -> str:
    b64 = base64.b64encode(der).decode()
    body = eol.join(b64[i:i + width] for i in range(0, len(b64), width))
    return f"-----BEGIN {label}-----{eol}{body}{eol}-----END {label}-----{eol}"


def mbedtls_style_csr(key: ec.EllipticCurvePrivateKey, *, cn: str, iss: str,
                      dns: str | None = None) -> bytes:
    """A CSR as the C SDK (mbedTLS) writes it: subject O=OpenZiti, DC=<iss>, CN=<sub>, and
    ecdsa-with-SHA256 with an explicit NULL parameter. Built by hand with asn1crypto."""
    spki = key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    subject = a_x509.Name(name="", value=a_x509.RDNSequence([
        a_x509.RelativeDistinguishedName([a_x509.NameTypeAndValue(
            {"type": "organization_name", "value": a_x509.DirectoryString(name="utf8_string", value="OpenZiti")})]),
        a_x509.RelativeDistinguishedName([a_x509.NameTypeAndValue(
            {"type": "domain_component", "value": iss})]),
        a_x509.RelativeDistinguishedName([a_x509.NameTypeAndValue(
            {"type": "common_name", "value": a_x509.DirectoryString(name="utf8_string", value=cn)})]),
    ]))
    attributes = []
    if dns:
        exts = a_x509.Extensions([{
            "extn_id": "subject_alt_name", "critical": False,
            "extn_value": a_x509.GeneralNames([a_x509.GeneralName(name="dns_name", value=dns)]),
        }])
        attributes.append({"type": "extension_request", "values": [exts]})
    info = a_csr.CertificationRequestInfo({
        "version": "v1",
        "subject": subject,
        "subject_pk_info": a_keys.PublicKeyInfo.load(spki),
        "attributes": attributes,
    })
    tbs = info.dump()
    signature = key.sign(tbs, ec.ECDSA(hashes.SHA256()))
    req = a_csr.CertificationRequest({
        "certification_request_info": info,
        "signature_algorithm": a_algos.SignedDigestAlgorithm(
            {"algorithm": "sha256_ecdsa", "parameters": a_core.Null()}),
        "signature": signature,
    })
    der = req.dump()
    # the algorithm identifier really carries 05 00 (NULL) after the OID
    assert bytes.fromhex("06082a8648ce3d0403020500") in der
    return der


# ------------------------------------------------------------------------------- input forms


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_parse_pem_der_base64(key_type):
    key = ec.generate_private_key(ec.SECP256R1()) if key_type == "ec" else \
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
    csr, _ = _crypto_csr("ident-1", key, [x509.DNSName("a.example"), x509.IPAddress(ipaddress.ip_address("10.0.0.1"))])
    der = csr.public_bytes(serialization.Encoding.DER)
    pem = csr.public_bytes(serialization.Encoding.PEM)
    forms = [
        pem, pem.decode(), b"\n  " + pem + b"\n\n",              # bytes / str / surrounding whitespace
        _pem(der, "NEW CERTIFICATE REQUEST"),                    # old OpenSSL / Java label
        _pem(der, eol="\r\n"), _pem(der, width=76),              # CRLF, other wrapping
        b"Certificate Request:\n    Data: ...\n" + pem,          # text before the block
        der,                                                     # raw DER
        base64.b64encode(der), base64.b64encode(der).decode(),   # bare base64
        _pem(der).split("-----\n", 1)[1].rsplit("\n-----", 1)[0],  # bare base64, wrapped lines
    ]
    for form in forms:
        p = parse_csr(form)
        assert isinstance(p, ParsedCsr)
        assert p.der == der
        assert p.subject == csr.subject
        assert p.common_name == "ident-1"
        assert p.sans == [x509.DNSName("a.example"), x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]
        assert p.fallback is False
        assert p.public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ) == key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert parse_csr(parse_csr(der).pem).der == der


def test_build_csr_helper():
    csr_pem, key_pem = build_csr("id-7", key_type="rsa", sans=["r.example", "127.0.0.1", "spiffe://z/x"])
    p = parse_csr(csr_pem)
    assert p.common_name == "id-7"
    assert p.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "OpenZiti"
    assert isinstance(p.public_key, rsa.RSAPublicKey)
    assert p.sans == [
        x509.DNSName("r.example"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.UniformResourceIdentifier("spiffe://z/x"),
    ]
    key = serialization.load_pem_private_key(key_pem.encode(), None)
    assert key.public_key().public_numbers() == p.public_key.public_numbers()


# ------------------------------------------------------------------------------- mbedTLS style


def test_mbedtls_csr_with_null_params_is_accepted(pki):
    key = ec.generate_private_key(ec.SECP256R1())
    der = mbedtls_style_csr(key, cn="ident-9", iss="https://127.0.0.1:1280", dns="dev.example")
    with pytest.raises(ValueError):  # precondition: cryptography alone refuses it
        x509.load_der_x509_csr(der)
    for form in (der, _pem(der), _pem(der).encode(), base64.b64encode(der)):
        p = parse_csr(form)
        assert p.fallback is True
        assert p.der == der
        assert p.common_name == "ident-9"
        assert p.subject.get_attributes_for_oid(NameOID.DOMAIN_COMPONENT)[0].value == "https://127.0.0.1:1280"
        assert p.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "OpenZiti"
        assert p.sans == [x509.DNSName("dev.example")]
        assert p.signature_algorithm == "1.2.840.10045.4.3.2"
        assert p.public_key.public_numbers() == key.public_key().public_numbers()
    # it can be signed, and the certificate carries the CSR subject and key
    cert = x509.load_pem_x509_certificate(ca.sign_csr(parse_csr(der), pki.signer).encode())
    assert cert.subject == parse_csr(der).subject
    assert cert.subject.rfc4514_string() == "CN=ident-9,DC=https://127.0.0.1:1280,O=OpenZiti"
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    assert ca.verify_chain(cert, [], pki.ca_certs_pem(), eku="client")


def test_build_csr_explicit_null_params():
    csr_pem, _ = build_csr("id-8", explicit_null_params=True, sans=["1.2.3.4"])
    p = parse_csr(csr_pem)
    assert p.fallback is True and p.common_name == "id-8"
    assert p.sans == [x509.IPAddress(ipaddress.ip_address("1.2.3.4"))]


def test_mbedtls_csr_tampered_is_refused():
    key = ec.generate_private_key(ec.SECP256R1())
    der = mbedtls_style_csr(key, cn="ident-9", iss="https://ctrl:1280")
    # change the CN inside certificationRequestInfo
    tampered = der.replace(b"ident-9", b"ident-X")
    assert tampered != der
    with pytest.raises(CsrError, match="signature"):
        parse_csr(tampered)
    # flip a bit inside the signature
    sig = bytearray(der)
    sig[-3] ^= 0x04
    with pytest.raises(CsrError):
        parse_csr(bytes(sig))
    # signed by a different key than the one in the CSR
    other = ec.generate_private_key(ec.SECP256R1())
    req = a_csr.CertificationRequest.load(der)
    info = req["certification_request_info"]
    forged = a_csr.CertificationRequest(
        {
            "certification_request_info": a_csr.CertificationRequestInfo.load(info.dump()),
            "signature_algorithm": a_algos.SignedDigestAlgorithm(
                {"algorithm": "sha256_ecdsa", "parameters": a_core.Null()}
            ),
            "signature": other.sign(info.dump(), ec.ECDSA(hashes.SHA256())),
        }
    ).dump()
    with pytest.raises(CsrError, match="signature"):
        parse_csr(forged)


def test_mbedtls_rsa_style_csr_wrong_algorithm_for_key():
    # ECDSA algorithm id with NULL over an RSA key: refused (algorithm does not match the key)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    csr, _ = _crypto_csr("r", rsa_key)
    req = a_csr.CertificationRequest.load(csr.public_bytes(serialization.Encoding.DER))
    bad = a_csr.CertificationRequest(
        {
            "certification_request_info": a_csr.CertificationRequestInfo.load(req["certification_request_info"].dump()),
            "signature_algorithm": a_algos.SignedDigestAlgorithm(
                {"algorithm": "sha256_ecdsa", "parameters": a_core.Null()}
            ),
            "signature": req["signature"].native,
        }
    ).dump()
    with pytest.raises(CsrError):
        parse_csr(bad)


# ------------------------------------------------------------------------------- refusals


def test_tampered_regular_csr_is_refused():
    csr, _ = _crypto_csr("abcdef")
    der = csr.public_bytes(serialization.Encoding.DER)
    with pytest.raises(CsrError, match="signature"):
        parse_csr(der.replace(b"abcdef", b"abcdeX"))
    sig = bytearray(der)
    sig[-3] ^= 0x04
    with pytest.raises(CsrError):
        parse_csr(bytes(sig))


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        "",
        "   \n",
        b"hello world",
        "hello world",
        b"\x30\x03\x02\x01\x00",
        b"\x30\x82\xff\xff\x00",
        b"\x00\x01\x02\x03",
        "-----BEGIN CERTIFICATE REQUEST-----\n!!!!\n-----END CERTIFICATE REQUEST-----\n",
        "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
        "-----BEGIN CERTIFICATE REQUEST-----\nnot closed",
        "TWFu",
        "é",
        None,
        42,
        {"csr": "x"},
    ],
)
def test_garbage_is_csr_error(garbage):
    with pytest.raises(CsrError):
        parse_csr(garbage)


def test_other_pem_types_are_refused(pki):
    with pytest.raises(CsrError):
        parse_csr(pki.server.cert_pem)  # a certificate, not a CSR
    with pytest.raises(CsrError):
        parse_csr(pki.server.key_pem)
    with pytest.raises(CsrError):
        parse_csr(pki.server.cert.public_bytes(serialization.Encoding.DER))


def test_trailing_der_bytes_are_refused():
    csr, _ = _crypto_csr()
    with pytest.raises(CsrError):
        parse_csr(csr.public_bytes(serialization.Encoding.DER) + b"\x00\x00")


def test_csr_error_is_value_error():
    assert issubclass(CsrError, ValueError)
