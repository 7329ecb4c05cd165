"""The per-request context handed to every handler, and body decoding with upstream errors."""

from __future__ import annotations

import asyncio
import re
import types
import typing
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, Union

import msgspec
from starlette.requests import Request

from ..errors import ApiError, CouldNotValidate, Unauthorized, generic_cause
from .router import Route

if TYPE_CHECKING:  # typing only: these sit in higher layers (see tests/test_layers.py)
    from ..db.store import Store
    from .caller import Session
    from .controller import ApiController

T = TypeVar("T")
MAX_BODY = 4 * 1024 * 1024
BODY_WAIT = 5.0  # seconds between two chunks of a request body (settings.idle_timeout)
_json = msgspec.json.Decoder()
_decoders: dict[type, msgspec.json.Decoder] = {}


class Ctx:
    """What a handler sees: the controller, the request, path params and the caller's session.
    Data one hook hands to another travels with the write or the page (the values of a write,
    the render hook a prefetcher returns: api/resource.py, api/crud.py), not on the Ctx."""

    __slots__ = ("ctl", "request", "api", "params", "route", "session", "_body", "audited", "_query")

    ctl: ApiController
    request: Request
    api: str                                # "management" | "client" | "fabric"
    params: dict[str, str]                  # path parameters
    route: Route
    session: Session | None                 # set by Controller.authorize on non-public routes
    _body: bytes | None
    # the request's audit row is written (inside the write's transaction, events/changes.py):
    # the after-change hook adds none (events/audit.py)
    audited: bool

    def __init__(self, ctl: ApiController, request: Request, api: str, params: dict[str, str], route: Route):
        self.ctl = ctl
        self.request = request
        self.api = api
        self.params = params
        self.route = route
        self.session = None
        self._body = None
        self.audited = False
        self._query: dict[str, list[str]] | None = None

    @property
    def store(self) -> Store:
        return self.ctl.store

    def q(self, name: str, default: str | None = None) -> str | None:
        """A query parameter; when it is repeated, its first value (as upstream's go-swagger)."""
        values = self._params().get(name)
        return values[0] if values else default

    def qlist(self, name: str) -> list[str]:
        return list(self._params().get(name, ()))

    def _params(self) -> dict[str, list[str]]:
        return self._query if self._query is not None else self._parse_query()

    def _parse_query(self) -> dict[str, list[str]]:
        """The query string's parameters as Starlette's ``query_params`` reads them; a string
        without escapes (``limit=10&offset=20``, most of them) split directly, ~1 µs against
        ~5 µs for the general parser every list request paid."""
        text = self.request.scope.get("query_string", b"").decode("latin-1")
        out: dict[str, list[str]] = {}
        if "%" in text or "+" in text:
            pairs = urllib.parse.parse_qsl(text, keep_blank_values=True)
        else:
            pairs = [(k, v) for k, _, v in (p.partition("=") for p in text.split("&") if p)]
        for k, v in pairs:
            out.setdefault(k, []).append(v)
        self._query = out
        return out

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
                raise ApiError("COULD_NOT_PARSE_BODY",
                               cause=generic_cause(f"request body not received within {wait:g} s")) from None
            self._body = b"".join(chunks)
        return self._body

    async def json(self, type_: type[T]) -> T:
        body = await self.body()
        media = (self.request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if body.strip() and media and media != "application/json" and not media.endswith("+json"):
            # as upstream's API binding: a JSON operation consumes application/json only
            raise CouldNotValidate(
                "Content-Type", f'unsupported media type "{media}", only [application/json] are allowed', media)
        return decode(body, type_)

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


# ---------------------------------------------------------------- Go's field matching
# Go's encoding/json, which upstream decodes bodies with, matches an object's keys to a struct's
# fields exactly, else case-insensitively ("Type" fills ``type``): the real CLI sends such keys
# (a posture check's operating systems, from a Go struct without JSON tags).
_names_cache: dict[Any, tuple[frozenset[str], dict[str, str]]] = {}


def _members(t: Any) -> tuple[Any, ...]:
    """The types a field's type is made of (union members, list items, dict values)."""
    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        return _members(typing.get_args(t)[0])
    if origin in (Union, types.UnionType, list, tuple, set, frozenset, dict):
        args = typing.get_args(t)
        return tuple(a for a in (args[1:] if origin is dict else args) if a is not Ellipsis)
    return ()


def _field_names(t: Any) -> tuple[frozenset[str], dict[str, str]]:
    """Every wire name of the structs reachable from ``t``, and their lower-case forms."""
    cached = _names_cache.get(t)
    if cached is not None:
        return cached
    exact: set[str] = set()
    stack, seen = [t], set()
    while stack:
        cur = stack.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, type) and issubclass(cur, msgspec.Struct):
            for f in msgspec.structs.fields(cur):
                exact.add(f.encode_name)
                stack.append(f.type)
        else:
            stack.extend(_members(cur))
    lower: dict[str, str] = {}
    for name in sorted(exact):
        lower.setdefault(name.lower(), name)
    _names_cache[t] = result = (frozenset(exact), lower)
    return result


_folders: dict[Any, re.Pattern[bytes] | None] = {}


def _needs_folding(body: bytes, type_: Any) -> bool:
    """Whether the body has a key that is one of the type's wire names in another case: one
    search of a pattern made per type (a key matching a name case-insensitively, not exactly)."""
    if type_ not in _folders:
        exact, _ = _field_names(type_)
        names = b"|".join(re.escape(n.encode()) for n in sorted(exact, key=len, reverse=True))
        _folders[type_] = re.compile(
            b'"(?!(?:' + names + b')")(?i:' + names + b')"\\s*:') if names else None
    pattern = _folders[type_]
    return pattern is not None and pattern.search(body) is not None


def _fold(doc: Any, t: Any) -> Any:
    """``doc`` with keys renamed to the wire names of ``t``'s structs where they differ in case."""
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        if not isinstance(doc, dict):
            return doc
        fields = {f.encode_name: f.type for f in msgspec.structs.fields(t)}
        lower = {n.lower(): n for n in fields}
        out: dict = {}
        for k, v in doc.items():
            name = k if k in fields else lower.get(k.lower() if isinstance(k, str) else k, k)
            out[name] = _fold(v, fields[name]) if name in fields else v
        return out
    members = _members(t)
    origin = typing.get_origin(t)
    if origin in (list, tuple, set, frozenset) and isinstance(doc, list) and members:
        return [_fold(v, members[0]) for v in doc]
    if origin is dict and isinstance(doc, dict) and members:
        return {k: _fold(v, members[0]) for k, v in doc.items()}
    if origin in (Union, types.UnionType):  # the first member of the value's JSON kind
        for m in members:
            kind = typing.get_origin(m) or m
            if (isinstance(doc, dict) and (kind is dict or (isinstance(m, type) and issubclass(m, msgspec.Struct)))) \
                    or (isinstance(doc, list) and kind in (list, tuple, set, frozenset)):
                return _fold(doc, m)
    return doc


# body struct -> a function that narrows the decoded document before it is checked against the
# struct: a polymorphic body (one struct for every kind) keeps only the keys of the kind it names,
# the others ignored unchecked, as upstream's discriminated bodies ignore them
NARROW: dict[Any, Callable[[dict], dict]] = {}


def decode(body: bytes, type_: type[T]) -> T:
    dec = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.json.Decoder(type_)
    if not body.strip():
        body = b"{}"
    try:
        narrow = NARROW.get(type_)
        if narrow is not None:
            doc = _json.decode(body)
            if isinstance(doc, dict):
                return msgspec.convert(narrow(_fold(doc, type_) if _needs_folding(body, type_) else doc), type_)
        if _needs_folding(body, type_):
            return msgspec.convert(_fold(_json.decode(body), type_), type_)
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
    return ApiError("COULD_NOT_PARSE_BODY", cause=generic_cause(message))


def too_deep() -> ApiError:
    cause = generic_cause("JSON document nested too deeply")
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


# msgspec's constraint failures, worded as go-openapi's validation words them
_CONSTRAINTS = (
    (re.compile(r"Expected `str` of length >= (\d+)$"), "should be at least {} chars long"),
    (re.compile(r"Expected `str` of length <= (\d+)$"), "should be at most {} chars long"),
    (re.compile(r"Expected `array` of length >= (\d+)$"), "should have at least {} items"),
    (re.compile(r"Expected `array` of length <= (\d+)$"), "should have at most {} items"),
    (re.compile(r"Expected `(?:int|float)` >= (\S+)$"), "should be greater than or equal to {}"),
    (re.compile(r"Expected `(?:int|float)` <= (\S+)$"), "should be less than or equal to {}"),
)


def _constraint_reason(field: str, reason: str) -> str:
    for pattern, text in _CONSTRAINTS:
        m = pattern.match(reason)
        if m:
            return f"{field} in body " + text.format(m.group(1))
    return f"{field} in body: {reason}"


# one expected type: a Go unmarshal error
_TYPE_MISMATCH = re.compile(r"Expected `([^`|]+?)(?: \| null)?`, got `([^`]+)`$")


def validation_error(text: str, body: bytes) -> ApiError:
    m = _missing.match(text)
    if m:
        prefix = _path_to_field(m.group(2) or "")
        field = f"{prefix}.{m.group(1)}" if prefix else m.group(1)
        return CouldNotValidate(field, f"{field} in body is required", None)
    m = _at.match(text)
    reason, field = (m.group(1), _path_to_field(m.group(2) or "")) if m else (text, "")
    t = _TYPE_MISMATCH.match(reason)
    if t or (field == "typeId" and reason.startswith("Invalid enum value")):
        # a value of the wrong JSON type (or an unknown type discriminator) fails upstream's
        # unmarshalling, before any validation: COULD_NOT_PARSE_BODY
        message = (f"json: cannot unmarshal {t.group(2)} into field {field or 'body'} of type {t.group(1)}"
                   if t else f"invalid typeId value: {reason.removeprefix('Invalid enum value ')}")
        return ApiError("COULD_NOT_PARSE_BODY", cause=generic_cause(message))
    try:
        doc = _json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        doc = None
    value = _lookup(doc, field) if field else doc
    if value is not None and not isinstance(value, (str, int, float, bool, list, dict)):
        value = str(value)
    return CouldNotValidate(field or "body", _constraint_reason(field or "body", reason), value)
