"""The per-request context handed to every handler, and body decoding with upstream errors."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from starlette.requests import Request

from ..errors import ApiError, CouldNotValidate, Unauthorized
from .router import Route

if TYPE_CHECKING:  # typing only: these sit in higher layers (see tests/test_layers.py)
    from ..app import Controller
    from ..auth.sessions import Session
    from ..db.store import Store
    from ..resources.service_view import View

T = TypeVar("T")
MAX_BODY = 4 * 1024 * 1024
BODY_WAIT = 5.0  # seconds between two chunks of a request body (settings.idle_timeout)
_json = msgspec.json.Decoder()
_decoders: dict[type, msgspec.json.Decoder] = {}


class Ctx:
    """What a handler sees: the controller, the request, path params and the caller's session;
    and what hooks of one request leave for later hooks of the same request (declared below)."""

    __slots__ = ("ctl", "request", "api", "params", "route", "session", "_body",
                 "pending_enrollment", "identity_extras", "service_view")

    ctl: Controller
    request: Request
    api: str                                # "management" | "client" | "fabric"
    params: dict[str, str]                  # path parameters
    route: Route
    session: Session | None                 # set by Controller.authorize on non-public routes
    _body: bytes | None
    # an identity create's ``enrollment`` object, from prepare to after_write (resources/identities.py)
    pending_enrollment: dict | None
    # identity id -> related rows of a list page, read by the identity renderer (resources/identities.py)
    identity_extras: dict[str, Any] | None
    # the caller-dependent values of the services of this request (resources/service_view.py)
    service_view: View | None

    def __init__(self, ctl: Controller, request: Request, api: str, params: dict[str, str], route: Route):
        self.ctl = ctl
        self.request = request
        self.api = api
        self.params = params
        self.route = route
        self.session = None
        self._body = None
        self.pending_enrollment = None
        self.identity_extras = None
        self.service_view = None

    @property
    def store(self) -> Store:
        return self.ctl.store

    def q(self, name: str, default: str | None = None) -> str | None:
        """A query parameter; when it is repeated, its first value (as upstream's go-swagger)."""
        values = self.request.query_params.getlist(name)
        return values[0] if values else default

    def qlist(self, name: str) -> list[str]:
        return self.request.query_params.getlist(name)

    async def body(self) -> bytes:
        if self._body is None:
            declared = self.request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
                raise ApiError("REQUEST_TOO_LARGE")   # refused before a byte of it is read
            size = 0
            chunks = []
            # a client that stops sending its body mid-way holds the request only so long
            wait = self.ctl.settings.idle_timeout or BODY_WAIT
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(wait) as deadline:
                    async for chunk in self.request.stream():
                        size += len(chunk)
                        if size > MAX_BODY:
                            raise ApiError("REQUEST_TOO_LARGE")
                        chunks.append(chunk)
                        deadline.reschedule(loop.time() + wait)
            except TimeoutError:
                raise ApiError("COULD_NOT_PARSE_BODY", cause={
                    "code": "UNHANDLED", "message": f"request body not received within {wait:g} s"}) from None
            self._body = b"".join(chunks)
        return self._body

    async def json(self, type_: type[T]) -> T:
        return decode(await self.body(), type_)

    async def json_any(self) -> Any:
        body = await self.body()
        if not body.strip():
            return {}
        try:
            return _json.decode(body)
        except (msgspec.DecodeError, UnicodeDecodeError) as e:
            raise not_parsable(e) from None
        except RecursionError:
            raise too_deep() from None

    @property
    def api_session(self) -> Session:
        """The caller's API session: there on every route above ``public`` (on a public one, 401)."""
        session = self.session
        if session is None:
            raise Unauthorized()
        return session

    @property
    def identity_id(self) -> str:
        """The caller's identity (see ``api_session``)."""
        return self.api_session.identity_id

    @property
    def client_ip(self) -> str:
        c = self.request.client
        return c.host if c else ""


_missing = re.compile(r"Object missing required field `([^`]+)`(?: - at `\$(.*)`)?")
_at = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$")


def decode(body: bytes, type_: type[T]) -> T:
    dec = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.json.Decoder(type_)
    if not body.strip():
        body = b"{}"
    try:
        return dec.decode(body)
    except msgspec.ValidationError as e:
        try:
            _json.decode(body)  # a type error found before the end of a truncated document
        except (msgspec.DecodeError, UnicodeDecodeError) as de:
            raise not_parsable(de) from None
        except RecursionError:
            raise too_deep() from None
        raise validation_error(str(e), body) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise not_parsable(e) from None
    except RecursionError:
        raise too_deep() from None


def not_parsable(e: Exception) -> ApiError:
    """400 for a body that is not JSON (truncated, not UTF-8, ...)."""
    if isinstance(e, UnicodeDecodeError):
        message = f"invalid UTF-8 in JSON body at byte {e.start}"
    else:
        message = str(e)
    return ApiError("COULD_NOT_PARSE_BODY", cause={"code": "UNHANDLED", "message": message})


def too_deep() -> ApiError:
    cause = {"code": "UNHANDLED", "message": "JSON document nested too deeply"}
    return ApiError("COULD_NOT_PARSE_BODY", cause=cause)


def _path_to_field(path: str) -> str:
    path = re.sub(r"\[(\d+)\]", r".\1", path or "")
    return path.lstrip(".")


def _lookup(doc: Any, field: str) -> Any:
    for part in field.split(".") if field else []:
        if isinstance(doc, dict):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


def validation_error(text: str, body: bytes) -> ApiError:
    m = _missing.match(text)
    if m:
        prefix = _path_to_field(m.group(2) or "")
        field = f"{prefix}.{m.group(1)}" if prefix else m.group(1)
        return CouldNotValidate(field, f"{field} in body is required", None)
    m = _at.match(text)
    reason, field = (m.group(1), _path_to_field(m.group(2) or "")) if m else (text, "")
    try:
        doc = _json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        doc = None
    value = _lookup(doc, field) if field else doc
    if value is not None and not isinstance(value, (str, int, float, bool, list, dict)):
        value = str(value)
    return CouldNotValidate(field or "body", f"{field or 'body'} in body: {reason}", value)
