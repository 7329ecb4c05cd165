"""The control channel's parts (``ctrl/part.py``): every ``Part`` of the package is declared once
in ``CtrlServer``'s list and built once, and every content type has exactly one handler."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ziti_lite.ctrl as ctrl
from ziti_lite.ctrl import links
from ziti_lite.ctrl.messages import C
from ziti_lite.ctrl.part import Part
from ziti_lite.ctrl.server import CtrlServer


def _part_classes() -> set[type[Part]]:
    found = set()
    for info in pkgutil.iter_modules(ctrl.__path__):
        module = importlib.import_module(f"ziti_lite.ctrl.{info.name}")
        found |= {v for v in vars(module).values()
                  if isinstance(v, type) and issubclass(v, Part) and v is not Part and v.__module__ == module.__name__}
    return found


def _server() -> CtrlServer:
    return CtrlServer(None, "127.0.0.1", 0, "127.0.0.1", None)   # type: ignore[arg-type]


def test_every_part_is_declared_once():
    declared = [t for _, t in CtrlServer.part_types()]
    assert len(declared) == len(set(declared))
    assert set(declared) == _part_classes(), "a Part subclass not declared in CtrlServer (or declared, not a Part)"
    server = _server()
    assert [type(p) for p in server.parts] == declared
    assert all(getattr(server, name) is part for (name, _), part in zip(CtrlServer.part_types(), server.parts,
                                                                          strict=True))


def test_every_content_type_has_one_handler():
    server = _server()
    seen: dict[int, str] = {}
    for part in server.parts:
        for content in part.handlers():
            assert content not in seen, f"content type {content}: {type(part).__name__} and {seen[content]}"
            seen[content] = type(part).__name__
    assert set(server.handlers) == set(seen) | {C.CLIENT_HELLO}


def test_a_second_handler_for_a_content_type_is_refused(monkeypatch):
    monkeypatch.setattr(links.Links, "handlers", lambda self: {C.CONNECT_EVENTS: self._metrics})
    with pytest.raises(ValueError, match="a second handler"):
        _server()
