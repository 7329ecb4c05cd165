"""API errors: one catalogue of every code ziti-lite answers with, and the exceptions that carry them.

``CATALOGUE`` maps each OpenZiti error code to its HTTP status and upstream message (openziti/ziti
``controller/apierror/messages.go`` and foundation ``errorz/messages.go`` at v1.3.3; the few codes
upstream does not have are marked). A raise site names the code and, where it has one, a cause::

    raise ApiError("CERT_IN_USE", cause={"fingerprint": fp})

Status and message come from the catalogue; a site passes ``message=`` only where upstream words that
one answer differently. A code missing from the catalogue is a bug: constructing it raises KeyError,
and ``tests/test_errors.py`` finds it in the source before that.

    ApiError                      code (+ status, message from CATALOGUE), cause
    ├── NotFound                  404 NOT_FOUND (generic cause "<entity> with id <id> not found")
    ├── Unauthorized              401 UNAUTHORIZED
    ├── InvalidAuth               401 INVALID_AUTH
    ├── CouldNotValidate          400 COULD_NOT_VALIDATE (field cause)
    ├── InvalidFilter             400 INVALID_FILTER
    └── ReferencedEntity          409 CAN_NOT_DELETE_REFERENCED_ENTITY

One exception handler (``ziti_lite.api.envelope.error_response``) renders every one of them
as the OpenZiti error envelope.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Code(NamedTuple):
    status: int
    message: str


CATALOGUE: dict[str, Code] = {
    # generic (foundation errorz)
    "NOT_FOUND": Code(404, "The resource requested was not found or is no longer available"),
    "UNHANDLED": Code(500, "An unhandled error occurred"),
    "ENTITY_CAN_NOT_BE_DELETED": Code(400, "The entity requested for delete can not be deleted"),
    "ENTITY_CAN_NOT_BE_UPDATED": Code(400, "The entity requested for update can not be updated"),
    "COULD_NOT_VALIDATE": Code(
        400, "The supplied request contains an invalid document or no valid accept content were available, see cause"
    ),
    "UNAUTHORIZED": Code(
        401, "The request could not be completed. The session is not authorized or the credentials are invalid"
    ),
    "INVALID_FILTER": Code(400, "The filter query supplied is invalid"),
    "INVALID_SORT_IDENTIFIER": Code(400, "The sort order supplied is invalid"),
    # requests
    "METHOD_NOT_ALLOWED": Code(405, "The resource requested does not support this HTTP verb"),
    "COULD_NOT_PARSE_BODY": Code(400, "The body of the request could not be parsed"),
    "INVALID_CONTENT_TYPE": Code(400, "The content type supplied is not acceptable"),
    "REQUEST_TOO_LARGE": Code(413, "The request body is too large"),  # ziti-lite's own: upstream has no body limit
    "RATE_LIMITED": Code(
        429, "The requested operation is rate limited and the rate limit has been exceeded. Please try again later"
    ),
    # references
    "CAN_NOT_DELETE_REFERENCED_ENTITY": Code(
        409, "the entity cannot be deleted because it is referenced by another entity, see cause"
    ),
    "REFERENCED_ENTITY_NOT_FOUND": Code(400, "REFERENCED_ENTITY_NOT_FOUND"),
    # a field's value refused by a model rule (OpenZiti 2.0's "bad request field error"; v1.3.3
    # answered those REFERENCED_ENTITY_NOT_FOUND)
    "INVALID_FIELD": Code(400, "The field contains an invalid value"),
    # authentication, MFA, posture, sessions
    "INVALID_AUTH": Code(401, "The authentication request failed"),
    "MFA_EXISTS": Code(409, "An MFA record already exists, try removing it"),
    "MFA_INVALID_TOKEN": Code(400, "An invalid token/code was provided"),
    "MFA_NOT_ENROLLED": Code(409, "The current identity is not enrolled in MFA"),
    "INVALID_BACKING_TOKEN_TYPE": Code(400, "The backing token type is invalid"),
    "INVALID_POSTURE": Code(409, "Posture response data is missing or wrong"),
    "NO_EDGE_ROUTERS_AVAILABLE": Code(
        400, "No edge routers are assigned and online to handle the requested connection"
    ),
    # enrollment
    "INVALID_ENROLLMENT_TOKEN": Code(400, "The supplied token is not valid"),
    "ENROLLMENT_EXPIRED": Code(400, "The window for this enrollment has expired"),
    "ENROLLMENT_CA_NOT_VALID": Code(400, "The CA tied to the supplied token is no longer valid"),
    "ENROLLMENT_NO_VALID_CAS": Code(400, "No CAs are valid for this request"),
    "ENROLLMENT_EXISTS": Code(409, "ENROLLMENT_EXISTS"),  # sic, upstream's text
    "COULD_NOT_PROCESS_CSR": Code(400, "The supplied csr could not be processed"),
    "INVALID_ENROLLMENT_NOT_ALLOWED": Code(409, "The configuration does not allow this enrollment"),
    "ENROLLMENT_IDENTITY_ALREADY_ENROLLED": Code(
        409, "The token supplied for this enrollment already has a matching identity, cannot enroll a new identity"
    ),
    "MISSING_OR_INVALID_CSR": Code(400, "The supplied enrollment request is missing or contains an invalid CSR"),
    "EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID": Code(
        400, "The edge router CSR enrollment must have a common name that matches the edge router's id"
    ),
    "MISSING_CERT_CLAIM": Code(
        400, "The certificate is expected to contain and externalId, which was not found"  # sic, upstream's text
    ),
    # certificates and authenticators
    "CERT_FAILED_VALIDATION": Code(400, "certificate failed to validate against CA"),
    "CERT_IN_USE": Code(409, "The certificate supplied is already associated with another identity"),
    "CA_ALREADY_VERIFIED": Code(409, "CA has already been verified"),
    "EXPECTED_PEM_CERTIFICATE": Code(400, "expected PEM block type 'CERTIFICATE'"),
    "COULD_NOT_PARSE_DER_BLOCK": Code(400, "The certificate's DER block could not be parsed"),
    "COULD_NOT_PARSE_PEM_BLOCK": Code(400, "The certificate's PEM block could not be parsed"),
    "INVALID_COMMON_NAME": Code(400, "The common name of the supplied certificate is invalid"),
    "CERTIFICATE_FAILED_VALIDATION": Code(
        400, "The supplied certificate failed to validate against the CA's certificate chain"
    ),
    "CERTIFICATE_IS_NOT_CA": Code(400, "Leading certificate is not a CA"),
    "INVALID_CERT_PEM": Code(
        400, "the supplied certificate PEM is either invalid or contains the incorrect number of certificates"
    ),
    "INVALID_CLIENT_CERT": Code(400, "The provided client certificate is invalid"),
    "CAN_NOT_UPDATE_AUTHENTICATOR": Code(409, "The authenticator cannot be updated in this fashion"),
    "MAX_AUTHENTICATOR_METHODS_REACHED": Code(
        409, "The identity already has the maximum authenticators of the specified method"
    ),
    "CAN_NOT_UPDATE_ROUTER": Code(409, "The router was not added via the Edge API and cannot be updated"),
}


class ApiError(Exception):
    """An answer in the OpenZiti error envelope: ``code`` names a CATALOGUE entry, which gives the
    status and message; ``message`` overrides the latter for one answer; ``cause`` is the envelope's cause."""

    code = "UNHANDLED"
    challenge: str | None = None   # a 401's reason for its WWW-Authenticate header (api/envelope.py)

    def __init__(self, code: str | None = None, *, cause: dict[str, Any] | None = None, message: str | None = None):
        if code is not None:
            self.code = code
        entry = CATALOGUE[self.code]
        self.status = entry.status
        self.message = message or entry.message
        self.cause = cause
        super().__init__(f"{self.code}: {self.message}")


def generic_cause(message: str) -> dict[str, Any]:
    return {"code": "UNHANDLED", "message": message}


def field_cause(field: str, reason: str, value: Any) -> dict[str, Any]:
    return {"field": field, "reason": reason, "value": go_text(redact(field, value))}


REDACTED = "<redacted>"


def _secret(name: str) -> bool:
    name = name.rsplit(".", 1)[-1].lower()
    return "password" in name or name in ("secret", "clientsecret")


def redact(field: str, value: Any) -> Any:
    """``value`` with every password in it replaced: an error never echoes a submitted secret."""
    if value is None:
        return None
    if _secret(field or ""):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(str(k), v) if _secret(str(k)) else redact("", v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact("", v) for v in value]
    return value


def go_text(value: Any) -> str:
    """Render a value as upstream's `%v` does: nil, [a b], true."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_text(v)}" for k, v in value.items()) + "]"
    return str(value)


class NotFound(ApiError):
    code = "NOT_FOUND"

    def __init__(self, entity: str | None = None, id: str | None = None, message: str | None = None):
        text = message or (f"{entity} with id {id} not found" if entity else None)
        super().__init__(cause=generic_cause(text) if text else None)


class Unauthorized(ApiError):
    code = "UNAUTHORIZED"

    def __init__(self, reason: str | None = "unauthenticated for invalid credentials", *,
                 challenge: str | None = None):
        super().__init__(cause=generic_cause(reason) if reason else None)
        self.challenge = challenge


class InvalidAuth(ApiError):
    code = "INVALID_AUTH"

    def __init__(self):
        super().__init__()


class CouldNotValidate(ApiError):
    code = "COULD_NOT_VALIDATE"

    def __init__(self, field: str, reason: str, value: Any = None):
        super().__init__(cause=field_cause(field, reason, value))


class InvalidFilter(ApiError):
    code = "INVALID_FILTER"

    def __init__(self, detail: str):
        super().__init__(cause=generic_cause(detail))


class ReferencedEntity(ApiError):
    code = "CAN_NOT_DELETE_REFERENCED_ENTITY"

    def __init__(self, field: str, entity: str, referrer: str, ids: list[str]):
        super().__init__(
            cause=field_cause(field, f"entity type {entity} referenced by {referrer}: {go_text(ids)}", ids)
        )

