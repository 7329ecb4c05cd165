"""``derive_patch``: PATCH bodies derived from the PUT structs (``ziti_lite/api/resource.py``)."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET

from ziti_lite.api.resource import derive_patch


class Inner(msgspec.Struct, rename="camel", kw_only=True):
    some_flag: bool
    note: str | None = None


class ThingUpdate(msgspec.Struct, rename="camel", kw_only=True):
    name: str
    service_id: str = msgspec.field(name="service")
    inner: Inner
    secret: str


def test_every_field_optional_and_unset_by_default():
    patch = derive_patch(ThingUpdate)
    assert patch.__name__ == "ThingPatch"
    body = msgspec.json.decode(b"{}", type=patch)
    assert all(getattr(body, f) is UNSET for f in patch.__struct_fields__)


def test_wire_renames_are_kept():
    patch = derive_patch(ThingUpdate)
    body = msgspec.json.decode(b'{"service": "s1"}', type=patch)
    assert body.service_id == "s1"
    assert {f.encode_name for f in msgspec.structs.fields(patch)} == {"name", "service", "inner", "secret"}


def test_nested_structs_kept_unless_asked():
    with pytest.raises(msgspec.ValidationError):  # the nested struct still requires its fields
        msgspec.json.decode(b'{"inner": {}}', type=derive_patch(ThingUpdate))
    body = msgspec.json.decode(b'{"inner": {"note": "n"}}', type=derive_patch(ThingUpdate, nested=True))
    assert body.inner.some_flag is None and body.inner.note == "n"
    assert type(body.inner).__name__ == "InnerPatch"


def test_default_and_kept_fields():
    patch = derive_patch(ThingUpdate, default=None, keep=("secret",))
    with pytest.raises(msgspec.ValidationError, match="secret"):
        msgspec.json.decode(b"{}", type=patch)
    body = msgspec.json.decode(b'{"secret": "x"}', type=patch)
    assert body.name is None and body.secret == "x"
