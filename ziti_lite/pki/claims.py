"""A CA's ``externalIdClaim``: where in a client certificate an identity's external id is.

The claim names a location (subject ``COMMON_NAME``, ``SAN_URI`` or ``SAN_EMAIL`` values), a
matcher that keeps some of the values there (``ALL``, ``PREFIX``/``SUFFIX`` with
``matcherCriteria``, or ``SCHEME`` for URIs), a parser applied to each kept value (``NONE``, or
``SPLIT`` on ``parserCriteria``), and the ``index`` of the resulting candidate to use.

``problem`` is OpenZiti 2.0's check of a claim when a CA is written: a claim that could never
yield an external id (``PREFIX`` on ``SAN_URI``, a matcher or parser without its criteria) is
refused then, not at the first login (v1.3.3 stored it and failed every login).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["ClaimError", "external_id", "is_configured", "problem"]


class ClaimError(ValueError):
    """The claim is misconfigured or the certificate does not carry it."""


def is_configured(claim: dict | None) -> bool:
    """A claim without a location is treated as no claim at all."""
    return bool(claim) and bool((claim or {}).get("location"))


def _located(cert: x509.Certificate, location: str) -> list[str]:
    if location == "COMMON_NAME":
        out = []
        for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
            v = a.value
            out.append(v if isinstance(v, str) else v.decode("utf-8", "replace"))
        return out[:1]
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    if location == "SAN_URI":
        return list(sans.get_values_for_type(x509.UniformResourceIdentifier))
    if location == "SAN_EMAIL":
        return list(sans.get_values_for_type(x509.RFC822Name))
    raise ClaimError(f"unsupported location [{location}]")


def _matches(value: str, matcher: str, criteria: str, location: str) -> bool:
    if matcher == "ALL":
        return True
    if matcher in ("PREFIX", "SUFFIX", "SCHEME") and not criteria:
        raise ClaimError(f"invalid criteria [{criteria}] for matcher [{matcher}]")
    if matcher == "PREFIX" and location != "SAN_URI":
        return value.startswith(criteria)
    if matcher == "SUFFIX" and location != "SAN_URI":
        return value.endswith(criteria)
    if matcher == "SCHEME" and location == "SAN_URI":
        return urlsplit(value).scheme == criteria
    raise ClaimError(f"unsupported matcher [{matcher}] for location [{location}]")


# the matchers each kind of location takes: strings (subject, e-mail) and URIs
_MATCHERS = {"COMMON_NAME": ("ALL", "PREFIX", "SUFFIX"), "SAN_EMAIL": ("ALL", "PREFIX", "SUFFIX"),
             "SAN_URI": ("ALL", "SCHEME")}


def problem(claim: dict) -> tuple[str, str, object] | None:
    """Why a CA may not store ``claim`` (its leaves filled, "" for unset), as OpenZiti 2.0 checks
    it on create, replace and on a patch that touches it: (field, reason, value), or None."""
    index, location = claim.get("index") or 0, claim.get("location") or ""
    matcher, parser = claim.get("matcher") or "", claim.get("parser") or ""
    if index < 0:
        return "externalIdClaim.index", "index must be greater than or equal to zero", index
    if location not in _MATCHERS:
        return "externalIdClaim.location", f"unsupported location [{location}]", location
    reason = ""
    if matcher not in _MATCHERS[location]:
        reason = f"unsupported matcher [{matcher}] for location [{location}]"
    elif matcher != "ALL" and not claim.get("matcherCriteria"):
        reason = f"invalid criteria [] for matcher [{matcher}]"
    elif parser == "SPLIT" and not claim.get("parserCriteria"):
        reason = f"invalid criteria [] for parser [{parser}]"
    elif parser not in ("NONE", "SPLIT"):
        reason = f"unsupported parser [{parser}] for location [{location}]"
    if reason:
        return "externalIdClaim", reason, f"location={location} matcher={matcher} parser={parser}"
    return None


def _parsed(value: str, parser: str, criteria: str) -> list[str]:
    if parser == "NONE":
        return [value]
    if parser == "SPLIT":
        if not criteria:
            raise ClaimError(f"invalid criteria [{criteria}] for parser [{parser}]")
        return value.split(criteria)
    raise ClaimError(f"unsupported parser [{parser}]")


def external_id(claim: dict | None, cert: x509.Certificate) -> str:
    """The external id ``claim`` selects in ``cert``; "" when no claim is configured.
    Raises :class:`ClaimError` when the claim is configured but yields nothing usable."""
    if not is_configured(claim):
        return ""
    assert claim is not None
    location = claim.get("location") or ""
    matcher = claim.get("matcher") or ""
    parser = claim.get("parser") or ""
    candidates: list[str] = []
    for value in _located(cert, location):
        if _matches(value, matcher, claim.get("matcherCriteria") or "", location):
            candidates.extend(_parsed(value, parser, claim.get("parserCriteria") or ""))
    if not candidates and matcher not in ("ALL", "PREFIX", "SUFFIX", "SCHEME"):
        _matches("", matcher, "", location)  # report the misconfiguration, not "no claim"
    index = claim.get("index") or 0
    if index < 0 or index >= len(candidates):
        raise ClaimError("no claim found")
    if candidates[index] == "":
        raise ClaimError("claim resolved to an empty value")
    return candidates[index]
