from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import random
import re

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store

from ziti_lite.pki import ca
from ziti_lite.pki.csr import build_csr, parse_csr

from .conftest import make_ca

UTC = dt.UTC


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


def _ext(cert: x509.Certificate, cls):
    return cert.extensions.get_extension_for_class(cls)


def _issue(pki: ca.Pki, cn: str = "ident-1", key_type: str = "ec", **kw) -> x509.Certificate:
    csr_pem, _ = build_csr(cn, key_type=key_type, sans=kw.pop("csr_sans", ()))
    pem = ca.sign_csr(parse_csr(csr_pem), kw.pop("signer", pki.signer), **kw)
    return x509.load_pem_x509_certificate(pem.encode())


# ------------------------------------------------------------------------------- layout


def test_root_and_signer(pki):
    root, signer = pki.root.cert, pki.signer.cert
    assert root.subject == root.issuer
    root.verify_directly_issued_by(root)
    signer.verify_directly_issued_by(root)
    assert _ext(root, x509.BasicConstraints).value.ca
    assert _ext(root, x509.BasicConstraints).critical
    bc = _ext(signer, x509.BasicConstraints).value
    assert bc.ca and bc.path_length == 0
    for c in (root, signer):
        ku = _ext(c, x509.KeyUsage).value
        assert ku.key_cert_sign and ku.crl_sign
        assert c.not_valid_after_utc - _now() > dt.timedelta(days=3000)
        assert 0 < c.serial_number < 2**128
        _ext(c, x509.SubjectKeyIdentifier)
    assert (_ext(signer, x509.AuthorityKeyIdentifier).value.key_identifier
            == _ext(root, x509.SubjectKeyIdentifier).value.digest)
    assert ca.cert_info(pki.root.cert_pem)["is_ca"] is True
    # keys are unencrypted PKCS#8 PEM
    for kp in (pki.root, pki.signer, pki.server):
        assert kp.key_pem.startswith("-----BEGIN PRIVATE KEY-----")
        serialization.load_pem_private_key(kp.key_pem.encode(), None)


def test_server_cert(pki):
    server = pki.server.cert
    key = server.public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    assert isinstance(pki.server.key, rsa.RSAPrivateKey)
    server.verify_directly_issued_by(pki.signer.cert)
    assert not _ext(server, x509.BasicConstraints).value.ca
    eku = _ext(server, x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    san = _ext(server, x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "ctrl.example.com", "api.example.org"}
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"), ipaddress.ip_address("10.1.2.3")}
    assert len(list(san)) == 6  # no duplicates
    assert 0 < server.serial_number < 2**128
    # cryptography's (strict, RFC 5280 / CABF-like) server verifier accepts it, by name and by IP
    for name in (x509.DNSName("localhost"), x509.DNSName("ctrl.example.com"),
                 x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))):
        verifier = PolicyBuilder().store(Store([pki.root.cert])).time(_now()).build_server_verifier(name)
        chain = verifier.verify(server, [pki.signer.cert])
        assert chain[-1] == pki.root.cert
    assert ca.verify_chain(pki.server.cert_pem, [], pki.ca_certs_pem(), eku="server")


def test_pki_helpers(pki):
    assert pki.server_chain_pem() == pki.server.cert_pem.strip() + "\n" + pki.signer.cert_pem.strip() + "\n"
    certs = x509.load_pem_x509_certificates(pki.ca_bundle_pem().encode())
    assert certs == [pki.root.cert, pki.signer.cert]
    again = ca.Pki.from_dict(pki.to_dict())
    assert again == pki


def test_issue_server_cert_new_hosts_same_key(pki):
    kp = ca.issue_server_cert(pki.signer, ["new.example.net:443", "192.168.7.7"], key_pem=pki.server.key_pem)
    c = kp.cert
    assert c.public_key().public_numbers() == pki.server.cert.public_key().public_numbers()
    san = _ext(c, x509.SubjectAlternativeName).value
    assert "new.example.net" in san.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("192.168.7.7") in san.get_values_for_type(x509.IPAddress)
    assert ca.fingerprint(kp.cert_pem) != ca.fingerprint(pki.server.cert_pem)


# ------------------------------------------------------------------------------- sign_csr


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_sign_client_csr(pki, key_type):
    csr_pem, key_pem = build_csr("ident-" + key_type, key_type=key_type, sans=["should.be.dropped"])
    parsed = parse_csr(csr_pem)
    before = _now()
    pem = ca.sign_csr(parsed, pki.signer)
    cert = x509.load_pem_x509_certificate(pem.encode())
    assert pem.startswith("-----BEGIN CERTIFICATE-----") and pem.count("BEGIN") == 1
    assert cert.subject == parsed.subject  # copied verbatim
    assert cert.issuer == pki.signer.cert.subject
    assert cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == serialization.load_pem_private_key(key_pem.encode(), None).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    cert.verify_directly_issued_by(pki.signer.cert)
    assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
    # validity: now - 1 min .. now + 365 days
    assert abs((cert.not_valid_before_utc - (before - dt.timedelta(minutes=1))).total_seconds()) < 5
    assert abs((cert.not_valid_after_utc - (before + dt.timedelta(days=365))).total_seconds()) < 5
    # serial: positive, at most 128 bits
    assert 0 < cert.serial_number < 2**128
    # extensions, as upstream's client signer
    ku = _ext(cert, x509.KeyUsage)
    assert ku.critical
    assert ku.value.digital_signature and ku.value.key_encipherment and ku.value.data_encipherment
    assert not ku.value.key_cert_sign
    assert list(_ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert (
        _ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier
        == _ext(pki.signer.cert, x509.SubjectKeyIdentifier).value.digest
    )
    for absent in (x509.BasicConstraints, x509.SubjectAlternativeName, x509.SubjectKeyIdentifier):
        with pytest.raises(x509.ExtensionNotFound):
            _ext(cert, absent)
    # chains to the controller CAs
    assert ca.verify_chain(pem, [], [pki.signer.cert_pem], eku="client")
    assert ca.verify_chain(pem, [pki.signer.cert_pem], [pki.root.cert_pem], eku="client")


def test_sign_csr_server_usage_copies_sans(pki):
    cert = _issue(pki, "router-1", usage="server", csr_sans=["router.example", "10.9.9.9"])
    assert set(_ext(cert, x509.ExtendedKeyUsage).value) == {
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
    }
    san = _ext(cert, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["router.example"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.9.9.9")]
    # cryptography's strict server verifier accepts a router server cert
    verifier = (
        PolicyBuilder().store(Store([pki.root.cert])).time(_now()).build_server_verifier(x509.DNSName("router.example"))
    )
    verifier.verify(cert, [pki.signer.cert])


def test_sign_csr_client_with_sans(pki):
    # router client cert: clientAuth + CSR SANs; cryptography's client verifier (needs a SAN) accepts it
    cert = _issue(pki, "router-1", copy_sans=True, csr_sans=["router.example"])
    assert list(_ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    verifier = PolicyBuilder().store(Store([pki.root.cert])).time(_now()).build_client_verifier()
    verifier.verify(cert, [pki.signer.cert])
    # explicit SANs (extend: SANs copied from the current cert) win over the CSR's
    cert = _issue(pki, "ident", sans=[x509.DNSName("old.example")], csr_sans=["csr.example"])
    assert _ext(cert, x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName) == ["old.example"]


def test_sign_csr_rejects_unknown_usage(pki):
    csr_pem, _ = build_csr("x")
    with pytest.raises(ValueError):
        ca.sign_csr(parse_csr(csr_pem), pki.signer, usage="ca")


def test_serials_are_random(pki):
    serials = {_issue(pki, f"s{i}").serial_number for i in range(4)}
    assert len(serials) == 4


# ------------------------------------------------------------------------------- encodings


def test_chain_pem_and_fingerprint(pki):
    pem = ca.chain_pem(pki.server, pki.signer.cert_pem, pki.root.cert)
    certs = x509.load_pem_x509_certificates(pem.encode())
    assert certs == [pki.server.cert, pki.signer.cert, pki.root.cert]
    assert pem.endswith("-----END CERTIFICATE-----\n") and "\n\n" not in pem
    der = pki.server.cert.public_bytes(serialization.Encoding.DER)
    fp = hashlib.sha1(der).hexdigest()
    assert ca.fingerprint(pki.server.cert_pem) == fp
    assert ca.fingerprint(pki.server.cert_pem.encode()) == fp
    assert ca.fingerprint(der) == fp
    assert ca.fingerprint(pki.server.cert) == fp
    assert re.fullmatch(r"[0-9a-f]{40}", fp)


def test_cert_info(pki):
    info = ca.cert_info(pki.server.cert_pem)
    assert info["cn"] == "test-ctrl"
    assert info["fingerprint"] == ca.fingerprint(pki.server.cert_pem)
    assert info["is_ca"] is False
    assert info["not_before"] < _now() < info["not_after"]
    assert info["not_before"].tzinfo is not None
    assert info["serial"] == pki.server.cert.serial_number
    assert "test-ctrl Signing CA" in info["issuer"]
    assert ca.cert_info(pki.signer.cert_pem)["is_ca"] is True


def test_cacerts_pkcs7(pki):
    body = ca.cacerts_pkcs7(pki.ca_certs_pem())
    assert isinstance(body, str)
    lines = body.split("\n")
    assert all(len(line) == 64 for line in lines[:-1])
    assert 0 < len(lines[-1]) <= 64
    assert not body.endswith("\n") and "\r" not in body
    assert re.fullmatch(r"[A-Za-z0-9+/=\n]+", body)
    der = base64.b64decode(body)
    certs = pkcs7.load_der_pkcs7_certificates(der)
    assert {c.public_bytes(serialization.Encoding.DER) for c in certs} == {
        pki.root.cert.public_bytes(serialization.Encoding.DER),
        pki.signer.cert.public_bytes(serialization.Encoding.DER),
    }
    assert der == pkcs7.serialize_certificates([pki.root.cert, pki.signer.cert], serialization.Encoding.DER)
    # duplicates collapse; a single bundle string works as well
    assert ca.cacerts_pkcs7([pki.ca_bundle_pem(), pki.root.cert_pem]) == body
    with pytest.raises(ValueError):
        ca.cacerts_pkcs7([])


def test_ca_bundle_filters_non_ca(pki):
    bundle = ca.ca_bundle_pem(pki.signer.cert_pem, pki.server, [pki.root.cert_pem, pki.signer.cert_pem])
    assert x509.load_pem_x509_certificates(bundle.encode()) == [pki.signer.cert, pki.root.cert]


# ------------------------------------------------------------------------------- verify_chain


def test_verify_chain_intermediates_any_order(pki):
    leaf = _issue(pki)
    noise = [pki.server.cert_pem, pki.signer.cert_pem, make_ca("unrelated").cert_pem]
    random.Random(7).shuffle(noise)
    assert ca.verify_chain(leaf.public_bytes(serialization.Encoding.PEM).decode(), noise, [pki.root.cert_pem])
    path = ca.verified_path(leaf, noise, [pki.root.cert_pem])
    assert path == [leaf, pki.signer.cert, pki.root.cert]
    # trust anchors given as one bundle string
    assert ca.verified_path(leaf, [], [pki.ca_bundle_pem()])[-1] == pki.signer.cert


def test_verify_chain_external_rsa_ca(pki):
    # an external (3rd-party) RSA root → RSA intermediate → client cert with an EC key
    root = make_ca("ext-root", key_type="rsa")
    inter = make_ca("ext-inter", key_type="rsa", issuer=root, path_length=0)
    leaf_pem = ca.sign_csr(parse_csr(build_csr("device-1")[0]), inter)
    assert ca.verify_chain(leaf_pem, [inter.cert_pem], [root.cert_pem], eku="client")
    # missing intermediate / wrong CA
    with pytest.raises(ca.ChainError):
        ca.verify_chain(leaf_pem, [], [root.cert_pem])
    with pytest.raises(ca.ChainError):
        ca.verify_chain(leaf_pem, [inter.cert_pem], pki.ca_certs_pem())
    # a controller-issued cert does not verify against the external CA
    with pytest.raises(ca.ChainError):
        ca.verify_chain(_issue(pki), [pki.signer.cert_pem], [root.cert_pem])


def test_verify_chain_wrong_ca_same_name(pki):
    # an impostor CA with the signer's exact subject: issuer names match, signatures don't
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    fake = (
        x509.CertificateBuilder()
        .subject_name(pki.signer.cert.subject)
        .issuer_name(pki.signer.cert.subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    fake_kp = ca.KeyPair(
        fake.public_bytes(serialization.Encoding.PEM).decode(),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    )
    forged = _issue(pki, "forged", signer=fake_kp)
    with pytest.raises(ca.ChainError):
        ca.verify_chain(forged, [fake_kp.cert_pem], pki.ca_certs_pem())
    with pytest.raises(ca.ChainError):
        ca.verify_chain(forged, [], [pki.signer.cert_pem])


def test_verify_chain_expired(pki):
    past = _now() - dt.timedelta(days=400)
    expired = _issue(pki, "old", now=past, days=30)
    assert expired.not_valid_after_utc < _now()
    with pytest.raises(ca.ChainError, match="expired"):
        ca.verify_chain(expired, [], pki.ca_certs_pem())
    assert ca.verify_chain(expired, [], pki.ca_certs_pem(), allow_expired=True)
    # checked at ``at``: inside the leaf's window but before the CAs existed → still refused
    with pytest.raises(ca.ChainError, match="issuer"):
        ca.verify_chain(expired, [], pki.ca_certs_pem(), at=past + dt.timedelta(days=1))
    short = _issue(pki, "short", days=1)
    assert ca.verify_chain(short, [], pki.ca_certs_pem(), at=_now() + dt.timedelta(hours=12))
    with pytest.raises(ca.ChainError):
        ca.verify_chain(short, [], pki.ca_certs_pem(), at=_now() + dt.timedelta(days=2))
    # not yet valid
    future = _issue(pki, "future", now=_now() + dt.timedelta(days=10))
    with pytest.raises(ca.ChainError):
        ca.verify_chain(future, [], pki.ca_certs_pem())
    assert ca.verify_chain(future, [], pki.ca_certs_pem(), allow_expired=True)


def test_verify_chain_expired_intermediate(pki):
    root = make_ca("r2")
    inter = make_ca("i2", issuer=root, not_before=_now() - dt.timedelta(days=100), days=10)
    leaf = _issue(pki, "leaf", signer=inter, now=_now() - dt.timedelta(days=95), days=365)
    with pytest.raises(ca.ChainError):
        ca.verify_chain(leaf, [inter.cert_pem], [root.cert_pem])
    assert ca.verify_chain(leaf, [inter.cert_pem], [root.cert_pem], allow_expired=True)


def test_verify_chain_usage_and_ca_rules(pki):
    server_only = _issue(pki, "srv", usage="server")
    assert ca.verify_chain(server_only, [], pki.ca_certs_pem(), eku="server")
    client = _issue(pki, "cli")
    with pytest.raises(ca.ChainError):
        ca.verify_chain(client, [], pki.ca_certs_pem(), eku="server")
    assert ca.verify_chain(client, [], pki.ca_certs_pem())  # key usage "any" by default
    # a leaf issued by a non-CA certificate is refused
    root = make_ca("r3")
    not_a_ca = make_ca("not-a-ca", issuer=root, is_ca=False)
    leaf = _issue(pki, "x", signer=not_a_ca)
    with pytest.raises(ca.ChainError, match="not a CA"):
        ca.verify_chain(leaf, [not_a_ca.cert_pem], [root.cert_pem])
    # pathlen 0 intermediate cannot have a CA below it
    inter0 = make_ca("i0", issuer=root, path_length=0)
    inter1 = make_ca("i1", issuer=inter0)
    leaf = _issue(pki, "y", signer=inter1)
    with pytest.raises(ca.ChainError, match="path length"):
        ca.verify_chain(leaf, [inter1.cert_pem, inter0.cert_pem], [root.cert_pem])


def test_verify_chain_tampered_and_garbage(pki):
    leaf = _issue(pki)
    der = bytearray(leaf.public_bytes(serialization.Encoding.DER))
    der[-5] ^= 0x01  # inside the signature
    with pytest.raises(ca.ChainError):
        ca.verify_chain(bytes(der), [], pki.ca_certs_pem())
    with pytest.raises(ca.ChainError):
        ca.verify_chain("not a cert", [], pki.ca_certs_pem())
    with pytest.raises(ca.ChainError):
        ca.verify_chain(leaf, [], [])
    # a certificate that is itself a trust anchor verifies as itself
    assert ca.verified_path(pki.signer.cert_pem, [], pki.ca_certs_pem()) == [pki.signer.cert]


def test_create_controller_pki_is_fresh():
    import time

    t = time.perf_counter()
    a = ca.create_controller_pki(["localhost"])
    assert time.perf_counter() - t < 5
    assert a.root.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "ziti-lite Root CA"
    assert isinstance(a.server.cert.public_key(), rsa.RSAPublicKey)


def test_sign_csr_accepts_raw_pem(pki):
    csr_pem, _ = build_csr("raw-1")
    cert = x509.load_pem_x509_certificate(ca.sign_csr(csr_pem, pki.signer).encode())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "raw-1"
    from ziti_lite.pki.csr import CsrError

    with pytest.raises(CsrError):
        ca.sign_csr("garbage", pki.signer)
