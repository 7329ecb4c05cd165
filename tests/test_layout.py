"""The tests mirror the package: ``tests/<pkg>/test_<module>.py`` tests ``ziti_lite/<pkg>/<module>.py``
(or the package ``ziti_lite/<pkg>/<module>/``), so the tests of a module are where one looks.

* a module whose tests are split by topic has several files ``test_<module>_<topic>.py``;
* cross-cutting tests that test no one module carry a name from ``CROSS_CUTTING``.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent
PACKAGE = TESTS.parent / "ziti_lite"

# names (of a test file without ``test_``, or of a test directory) that test no single module
CROSS_CUTTING = {
    "interop": "real SDKs and tools built from outside sources (make interop)",
    "live_tls": "end to end over real TLS: a served controller and real clients",
    "c_sdk": "the OpenZiti C SDK (openziti wheel) against a live controller",
    "go_sdk": "the OpenZiti Go SDK against the embedded router (interop)",
    "go_sdk_oidc": "the newest OpenZiti Go SDK, logging in through OIDC, against the embedded router (interop)",
    "real_router": "a real OpenZiti router (ziti router v1.3.3) under ziti-lite (interop)",
    "hot_path": "the read hot path's shortcuts (app, sessions, store, crud) against the plain code",
    "schema_matches_models": "schema.sql (not a module) against the resource table",
    "layers": "the import layers of the whole package",
    "advisories": "upstream's security advisories after v1.3.3, checked against the whole API",
    "layout": "this file (and the length of functions, a shape rule of the whole package)",
}


def mirrored(path: Path) -> bool:
    rel = path.relative_to(TESTS)
    dirs, name = rel.parts[:-1], rel.stem.removeprefix("test_")
    if name in CROSS_CUTTING or any(d in CROSS_CUTTING for d in dirs):
        return True
    base = PACKAGE.joinpath(*dirs)
    words = name.split("_")
    candidates = ("_".join(words[:n]) for n in range(len(words), 0, -1))
    return any((base / f"{c}.py").is_file() or (base / c / "__init__.py").is_file() for c in candidates)


def test_every_test_file_maps_to_a_module():
    files = sorted(p for p in TESTS.rglob("test_*.py") if "go_sdk" not in p.relative_to(TESTS).parts[:-1])
    assert len(files) > 50
    strays = [str(p.relative_to(TESTS)) for p in files if not mirrored(p)]
    assert not strays, f"test files named after no ziti_lite module (rename, or add to CROSS_CUTTING): {strays}"


def test_the_rule():
    assert mirrored(TESTS / "db" / "test_store.py")
    assert mirrored(TESTS / "resources" / "test_routers_terminators.py")
    assert mirrored(TESTS / "enroll" / "test_complete_ca.py")
    assert not mirrored(TESTS / "enroll" / "test_anything.py")
    assert mirrored(TESTS / "client" / "test_live_tls.py")
    assert not mirrored(TESTS / "hardening" / "test_truths.py")
    assert not mirrored(TESTS / "api" / "test_nothing_here.py")


ROOT = TESTS.parent
# a path that names a machine rather than the repository: a home, a checkout, a mount
FOREIGN = ("/work/", "/home/", "/root/", "/Users/", "/mnt/", "/opt/")


def test_no_absolute_path_outside_the_repository_in_tests_or_scripts():
    import ast
    found = []
    scripts = [*TESTS.rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    for path in sorted(scripts):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                    node.value.startswith(p) and len(node.value) > len(p) for p in FOREIGN):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not found, "absolute paths outside the repository (derive them from __file__, or ask):\n" + "\n".join(found)


LONGEST = 80
INDIVISIBLE = "One indivisible step"


def test_no_function_is_over_80_lines_unless_it_says_why():
    import ast
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST and INDIVISIBLE not in (ast.get_docstring(node) or ""):
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, (f"functions over {LONGEST} lines: split them where their steps are, or say in the"
                      f" docstring why one is '{INDIVISIBLE}':\n" + "\n".join(long))
