"""A small protocol-buffers codec for the control channel's messages, driven by field tables.

Real routers speak protobuf on the control channel (``shared/reference/behaviour/ctrl-channel.md``).
The messages used there are few and flat, so each is declared as a table of its fields (number,
name, kind) in ``messages.py`` and this module turns dicts into wire bytes and back, with the
rules of proto3: varints (negative ``int32``/``enum`` as ten bytes), length-delimited strings,
bytes, nested messages and maps (entries with key 1 and value 2), repeated numbers packed on
write and read either way, unknown fields skipped. Decoding fills every declared field (proto3
defaults for the missing ones), so handlers never test for presence. Malformed input raises
``PbError``; nothing here trusts a length it was given.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

VARINT, I64, LEN, I32 = 0, 1, 2, 5
NUMERIC = frozenset({"bool", "uint32", "uint64", "int32", "int64", "enum"})   # varints
DEPTH = 16


class PbError(ValueError):
    """Bytes that are not a valid encoding of the expected message."""


@dataclass(frozen=True, slots=True)
class Field:
    num: int
    name: str
    kind: str | Msg                    # a scalar kind, "map", or a nested message table
    repeated: bool = False
    key: str = ""                      # maps: the key's and the value's kind
    value: str | Msg = ""


@dataclass(frozen=True, slots=True)
class Msg:
    name: str
    fields: tuple[Field, ...]


_INDEX: dict[int, dict[int, Field]] = {}


def _index(msg: Msg) -> dict[int, Field]:
    found = _INDEX.get(id(msg))
    if found is None:
        found = _INDEX[id(msg)] = {f.num: f for f in msg.fields}
    return found


# ---------------------------------------------------------------- encoding
def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(num: int, wire_type: int) -> bytes:
    return varint((num << 3) | wire_type)


def _scalar(kind: str, value: Any) -> tuple[int, bytes]:
    if kind == "string":
        data = value.encode()
        return LEN, varint(len(data)) + data
    if kind == "bytes":
        return LEN, varint(len(value)) + bytes(value)
    if kind == "bool":
        return VARINT, b"\x01" if value else b"\x00"
    if kind in ("uint32", "uint64", "int32", "int64", "enum"):
        return VARINT, varint(int(value))
    if kind == "double":
        return I64, struct.pack("<d", value)
    raise PbError(f"unknown kind {kind}")


def _default(f: Field) -> Any:
    if f.kind == "map":
        return {}
    if f.repeated:
        return []
    if isinstance(f.kind, Msg):
        return None
    return {"string": "", "bytes": b"", "bool": False, "double": 0.0}.get(f.kind, 0)


def _one(kind: str | Msg, value: Any) -> tuple[int, bytes]:
    if isinstance(kind, Msg):
        data = encode(kind, value)
        return LEN, varint(len(data)) + data
    return _scalar(kind, value)


def encode(msg: Msg, values: dict[str, Any]) -> bytes:
    """The wire bytes of ``values`` (a dict by field name; missing or default fields are left out)."""
    out = bytearray()
    for f in msg.fields:
        v = values.get(f.name)
        if v is None or (not isinstance(f.kind, Msg) and v == _default(f)):
            continue
        if f.kind == "map":
            entry = Msg("entry", (Field(1, "k", f.key), Field(2, "v", f.value)))
            for k, item in v.items():
                _, data = _one(entry, {"k": k, "v": item})
                out += _tag(f.num, LEN) + data
        elif f.repeated and f.kind in NUMERIC:
            packed = b"".join(_scalar(str(f.kind), item)[1] for item in v)
            out += _tag(f.num, LEN) + varint(len(packed)) + packed
        elif f.repeated:
            for item in v:
                wt, data = _one(f.kind, item)
                out += _tag(f.num, wt) + data
        else:
            wt, data = _one(f.kind, v)
            out += _tag(f.num, wt) + data
    return bytes(out)


# ---------------------------------------------------------------- decoding
def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(buf):
            raise PbError("truncated varint")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise PbError("varint too long")


def _fields(buf: bytes):
    """(field number, wire type, value) triples; LEN values as bytes, numbers as ints."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        value: int | bytes
        if num == 0:
            raise PbError("field number 0")
        if wt == VARINT:
            value, pos = read_varint(buf, pos)
        elif wt == LEN:
            n, pos = read_varint(buf, pos)
            if n > end - pos:
                raise PbError("length runs past the message")
            value, pos = buf[pos:pos + n], pos + n
        elif wt == I64:
            if end - pos < 8:
                raise PbError("truncated fixed64")
            value, pos = struct.unpack_from("<Q", buf, pos)[0], pos + 8
        elif wt == I32:
            if end - pos < 4:
                raise PbError("truncated fixed32")
            value, pos = struct.unpack_from("<I", buf, pos)[0], pos + 4
        else:
            raise PbError(f"unsupported wire type {wt}")
        yield num, wt, value


def _number(kind: str, n: int) -> int | bool:
    if kind == "bool":
        return n != 0
    if kind in ("int32", "enum"):
        n &= 0xFFFFFFFF
        return n - (1 << 32) if n >= 1 << 31 else n
    if kind == "int64":
        return n - (1 << 64) if n >= 1 << 63 else n
    if kind == "uint32":
        return n & 0xFFFFFFFF
    return n


def _value(kind: str | Msg, wt: int, raw: Any, depth: int) -> Any:
    if isinstance(kind, Msg):
        if wt != LEN:
            raise PbError(f"{kind.name}: expected a nested message")
        return decode(kind, raw, depth + 1)
    if kind == "double":
        if wt != I64:
            raise PbError("expected a double")
        return struct.unpack("<d", struct.pack("<Q", raw))[0]
    if kind in ("string", "bytes"):
        if wt != LEN:
            raise PbError(f"expected {kind}")
        if kind == "bytes":
            return bytes(raw)
        try:
            return bytes(raw).decode()
        except UnicodeDecodeError:
            raise PbError("string is not UTF-8") from None
    if wt != VARINT:
        raise PbError(f"expected a varint for {kind}")
    return _number(kind, raw)


def decode(msg: Msg, data: bytes, depth: int = 0) -> dict[str, Any]:
    """The fields of ``msg`` read from ``data`` (every declared field present, defaults filled)."""
    if depth > DEPTH:
        raise PbError("messages nested too deeply")
    out = {f.name: _default(f) for f in msg.fields}
    index = _index(msg)
    for num, wt, raw in _fields(bytes(data)):
        f = index.get(num)
        if f is None:
            continue
        if f.kind == "map":
            if wt != LEN:
                raise PbError(f"{msg.name}.{f.name}: expected a map entry")
            key, value = _default(Field(1, "k", f.key)), _default(Field(2, "v", f.value))
            for n, w, r in _fields(raw):
                if n == 1:
                    key = _value(f.key, w, r, depth)
                elif n == 2:
                    value = _value(f.value, w, r, depth)
            out[f.name][key] = value
        elif f.repeated and f.kind in NUMERIC and wt == LEN:   # packed
            pos, items = 0, out[f.name]
            while pos < len(raw):
                n, pos = read_varint(raw, pos)
                items.append(_number(str(f.kind), n))
        elif f.repeated:
            out[f.name].append(_value(f.kind, wt, raw, depth))
        else:
            out[f.name] = _value(f.kind, wt, raw, depth)
    return out
