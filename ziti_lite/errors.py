"""API errors: each class carries its OpenZiti code, HTTP status and fixed message.

    ApiError                      code, status, message, cause
    ├── NotFound                  404 NOT_FOUND
    ├── Unauthorized              401 UNAUTHORIZED
    ├── InvalidAuth               401 INVALID_AUTH
    ├── CouldNotValidate          400 COULD_NOT_VALIDATE (field cause)
    ├── InvalidFilter             400 INVALID_FILTER
    ├── ReferencedEntity          409 CAN_NOT_DELETE_REFERENCED_ENTITY
    └── ...                       any other code via ApiError(code, status, message)

One exception handler (``ziti_lite.api.envelope.error_response``) renders every one of them
as the OpenZiti error envelope.
"""

from __future__ import annotations

from typing import Any

MESSAGES = {
    "NOT_FOUND": "The resource requested was not found or is no longer available",
    "UNHANDLED": "An unhandled error occurred",
    "ENTITY_CAN_NOT_BE_DELETED": "The entity requested for delete can not be deleted",
    "ENTITY_CAN_NOT_BE_UPDATED": "The entity requested for update can not be updated",
    "COULD_NOT_VALIDATE": "The supplied request contains an invalid document or no valid accept content were available, see cause",  # noqa: E501 (upstream's text)
    "UNAUTHORIZED": "The request could not be completed. The session is not authorized or the credentials are invalid",
    "INVALID_FILTER": "The filter query supplied is invalid",
    "INVALID_PAGINATION": "The pagination properties provided are invalid",
    "INVALID_SORT_IDENTIFIER": "The sort order supplied is invalid",
    "METHOD_NOT_ALLOWED": "The resource requested does not support this HTTP verb",
    "COULD_NOT_PARSE_BODY": "The body of the request could not be parsed",
    "INVALID_CONTENT_TYPE": "The supplied content type is not acceptable",
    "INVALID_AUTH": "The authentication request failed",
    "INVALID_AUTH_METHOD": "The supplied authentication method is not supported",
    "CAN_NOT_DELETE_REFERENCED_ENTITY": "the entity cannot be deleted because it is referenced by another entity, see cause",  # noqa: E501 (upstream's text)
    "REFERENCED_ENTITY_NOT_FOUND": "REFERENCED_ENTITY_NOT_FOUND",
    "ENROLLMENT_EXISTS": "an enrollment of the same method already exists for this identity",
    "RATE_LIMITED": "The resource is rate limited and the rate limit has been exceeded. Please try again later",
    "REQUEST_TOO_LARGE": "The request body is too large",
    "TIMEOUT": "The request took too long to process",
}


class ApiError(Exception):
    code = "UNHANDLED"
    status = 500

    def __init__(
        self,
        code: str | None = None,
        status: int | None = None,
        message: str | None = None,
        cause: dict[str, Any] | None = None,
    ):
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.message = message or MESSAGES.get(self.code, self.code.replace("_", " ").lower())
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
    code, status = "NOT_FOUND", 404

    def __init__(self, entity: str | None = None, id: str | None = None, message: str | None = None):
        text = message or (f"{entity} with id {id} not found" if entity else None)
        super().__init__(cause=generic_cause(text) if text else None)


class Unauthorized(ApiError):
    code, status = "UNAUTHORIZED", 401

    def __init__(self, reason: str | None = "unauthenticated for invalid credentials"):
        super().__init__(cause=generic_cause(reason) if reason else None)


class InvalidAuth(ApiError):
    code, status = "INVALID_AUTH", 401

    def __init__(self):
        super().__init__()


class CouldNotValidate(ApiError):
    code, status = "COULD_NOT_VALIDATE", 400

    def __init__(self, field: str, reason: str, value: Any = None):
        super().__init__(cause=field_cause(field, reason, value))


class InvalidFilter(ApiError):
    code, status = "INVALID_FILTER", 400

    def __init__(self, detail: str):
        super().__init__(cause=generic_cause(detail))


class ReferencedEntity(ApiError):
    code, status = "CAN_NOT_DELETE_REFERENCED_ENTITY", 409

    def __init__(self, field: str, entity: str, referrer: str, ids: list[str]):
        super().__init__(
            cause=field_cause(field, f"entity type {entity} referenced by {referrer}: {go_text(ids)}", ids)
        )


class BadRequest(ApiError):
    status = 400
