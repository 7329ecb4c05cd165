"""The error catalogue (ziti_lite/errors.py): every code raised anywhere is in it, and answers carry
its status and message.

The source scan reads every ``ApiError(...)`` construction and every ``code = "..."`` of an ApiError
subclass with ``ast``, so a raise site with a code the catalogue lacks, a computed code, or a status
at the site fails here rather than at run time (where an unknown code is a KeyError, answered 500).
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re

import pytest

import ziti_lite
from tests.conftest import CLIENT, assert_error
from ziti_lite.errors import CATALOGUE, ApiError, Code

PACKAGE = pathlib.Path(ziti_lite.__file__).parent


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


@functools.cache
def _scan() -> tuple[dict[str, list[str]], list[str]]:
    """(code -> where it is raised, problems) over every module of the package (once a run; read-only)."""
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}
    # the ApiError family: ApiError and every class deriving from it, anywhere in the package
    family = {"ApiError"}
    classes = [n for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for c in classes:
            if c.name not in family and any(_name(b) in family for b in c.bases):
                family.add(c.name)
                grew = True
    raised: dict[str, list[str]] = {}
    problems: list[str] = []
    for path, tree in trees.items():
        rel = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ClassDef) and node.name in family:
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and any(_name(t) == "code" for t in stmt.targets)
                            and isinstance(stmt.value, ast.Constant)):
                        raised.setdefault(stmt.value.value, []).append(where)
            elif isinstance(node, ast.Call) and _name(node.func) == "ApiError":
                if not node.args:
                    raised.setdefault("UNHANDLED", []).append(where)
                    continue
                code = node.args[0]
                if not (isinstance(code, ast.Constant) and isinstance(code.value, str)):
                    problems.append(f"{where}: the code is computed, not a literal")
                    continue
                raised.setdefault(code.value, []).append(where)
                if len(node.args) > 1:
                    problems.append(f"{where}: {code.value} with more than the code positional (a status?)")
                extra = {k.arg for k in node.keywords} - {"cause", "message"}
                if extra:
                    problems.append(f"{where}: {code.value} with {sorted(extra)}")
    return raised, problems


@pytest.mark.slow
def test_every_raised_code_is_in_the_catalogue():
    raised, problems = _scan()
    assert not problems, problems
    unknown = {code: where for code, where in raised.items() if code not in CATALOGUE}
    assert not unknown, f"codes raised but not in errors.CATALOGUE: {unknown}"


@pytest.mark.slow
def test_every_catalogue_code_is_raised_somewhere():
    raised, _ = _scan()
    assert set(CATALOGUE) - set(raised) == set(), "catalogue entries nothing raises"


@pytest.mark.slow
def test_the_scan_sees_the_raise_sites():
    raised, _ = _scan()
    assert "ziti_lite/errors.py" in " ".join(raised["NOT_FOUND"])  # the NotFound class
    assert any(w.startswith("ziti_lite/enroll/") for w in raised["INVALID_ENROLLMENT_TOKEN"])
    assert len(raised) >= 40


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_catalogue_entries_are_well_formed(code):
    entry = CATALOGUE[code]
    assert isinstance(entry, Code)
    assert re.fullmatch(r"[A-Z][A-Z0-9_]*", code)
    assert 400 <= entry.status <= 599
    assert isinstance(entry.message, str) and entry.message.strip()


def test_api_error_takes_status_and_message_from_the_catalogue():
    e = ApiError("CERT_IN_USE", cause={"fingerprint": "ab"})
    assert (e.status, e.message, e.cause) == (409, CATALOGUE["CERT_IN_USE"].message, {"fingerprint": "ab"})
    assert ApiError("RATE_LIMITED", message="slow down").message == "slow down"
    assert (ApiError().code, ApiError().status) == ("UNHANDLED", 500)
    with pytest.raises(KeyError):
        ApiError("NO_SUCH_CODE")
    with pytest.raises(TypeError):
        ApiError("NOT_FOUND", 404)  # type: ignore[misc]


# ------------------------------------------------------------------ answers through the HTTP API
def catalogued(r, code: str) -> dict:
    entry = CATALOGUE[code]
    err = assert_error(r, entry.status, code)
    assert err["message"] == entry.message, err
    return err


def test_not_found(admin):
    err = catalogued(admin.get("/identities/nope"), "NOT_FOUND")
    assert err["cause"] == {"code": "UNHANDLED", "message": "identity with id nope not found"}


def test_unauthorized(anon):
    catalogued(anon.get("/identities"), "UNAUTHORIZED")


def test_method_not_allowed(admin):
    catalogued(admin.delete("/version"), "METHOD_NOT_ALLOWED")


def test_could_not_parse_body(admin):
    catalogued(admin.post("/identities", content=b'{"name": ', headers={"content-type": "application/json"}),
               "COULD_NOT_PARSE_BODY")


def test_could_not_validate(admin):
    err = catalogued(admin.post("/identities", json={"type": "User", "isAdmin": False}), "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"


def test_invalid_filter(admin):
    catalogued(admin.get("/identities?filter=name ="), "INVALID_FILTER")


def test_invalid_auth(anon):
    r = anon.client.post(CLIENT + "/authenticate?method=password", json={"username": "admin", "password": "wrong-one"})
    catalogued(r, "INVALID_AUTH")


def test_entity_can_not_be_deleted(admin):
    me = admin.get("/current-identity").json()["data"]["id"]
    catalogued(admin.delete(f"/identities/{me}"), "ENTITY_CAN_NOT_BE_DELETED")


def test_mfa_not_enrolled(admin):
    catalogued(admin.post("/authenticate/mfa", json={"code": "123456"}), "MFA_NOT_ENROLLED")


def test_invalid_enrollment_token(anon):
    r = anon.client.post("/enroll?method=ott&token=00000000-0000-4000-8000-000000000000", content=b"csr",
                         headers={"content-type": "text/plain"})
    catalogued(r, "INVALID_ENROLLMENT_TOKEN")


def test_rate_limited(admin):
    assert admin.post("/database/snapshot").status_code == 200
    catalogued(admin.post("/database/snapshot"), "RATE_LIMITED")


def test_unhandled_is_written_only_in_the_catalogue():
    """A generic cause is ``generic_cause(message)`` and a bare 500 is ``ApiError()``: the code
    ``UNHANDLED`` is spelled once, in errors.py, never as a literal at a raise site."""
    literals = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                for path in sorted(PACKAGE.rglob("*.py")) if path.name != "errors.py" or path.parent != PACKAGE
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "UNHANDLED" in node.value]
    assert not literals, f"literal UNHANDLED outside errors.py (use errors.generic_cause): {literals}"
