"""The seams are typed: every ``ctx`` parameter in ziti_lite is a ``Ctx`` and every ``ctl``
parameter names what it is (``app.Controller`` or a Protocol of the module's own layer), so
mypy sees a request context passed where the controller is meant. Read from the source
(``ast``), as tests/test_layers.py reads the imports."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "ziti_lite"


def _parameters(name: str) -> list[tuple[str, int, str | None]]:
    """(file, line, annotation) of every parameter called ``name`` of a function in ziti_lite."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                    if arg.arg == name:
                        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else None
                        out.append((str(path.relative_to(PACKAGE.parent)), node.lineno, annotation))
    return out


def test_every_ctx_is_a_ctx():
    found = _parameters("ctx")
    assert len(found) > 200
    bad = [f"{file}:{line} ctx: {annotation}" for file, line, annotation in found if annotation != "Ctx"]
    assert not bad, "annotate these `ctx: Ctx`:\n" + "\n".join(bad)


def test_every_ctl_names_what_it_is():
    found = _parameters("ctl")
    assert len(found) > 50
    bad = [f"{file}:{line} ctl: {annotation}" for file, line, annotation in found
           if annotation is None or annotation == "Any" or not annotation.endswith(("Controller", "HasTlsContexts"))]
    assert not bad, ("annotate these with `Controller` or the Protocol of their layer (ARCHITECTURE.md,"
                     " layers):\n" + "\n".join(bad))
