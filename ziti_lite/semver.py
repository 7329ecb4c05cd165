"""Semantic versions and version ranges, as OS posture checks compare them.

A version is strict ``MAJOR.MINOR.PATCH`` with optional ``-prerelease`` and ``+build``. A range
is alternatives separated by ``||``, each a space-separated conjunction of comparators
(``>=10.0.0 <11.0.0``); an operator may be separated from its version by spaces. Comparators
without an operator mean equality; ``x`` wildcards (``1.2.x``, ``1.x``) stand for the interval
they cover, so ``<=1.2.x`` is ``<1.3.0`` and ``!=1.x`` excludes all of ``1.*``.

The one grammar of both: OS posture checks are validated (``valid_range``) and evaluated
(``satisfies``) with it, so only what evaluates is stored. Only a lower-case ``x`` is a wildcard,
as upstream's validation accepts (``X`` and ``*`` used to be understood by evaluation alone).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

_VERSION = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")
_WILDCARD = re.compile(r"(\d+)(?:\.(\d+))?\.x")
_OPS = ("!=", ">=", "<=", "==", "!", ">", "<", "=", "")

Version = tuple  # (major, minor, patch, prerelease parts or None)


def parse(text: str) -> Version | None:
    """A strict semantic version, or None."""
    m = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else None
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _pre_key(pre: tuple | None) -> tuple:
    # a release sorts after its prereleases; numeric identifiers sort before alphanumeric ones
    if pre is None:
        return (1,)
    return (0, *[(0, p, "") if isinstance(p, int) else (1, 0, p) for p in pre], (-1, 0, ""))


def key(v: Version) -> tuple:
    return v[0], v[1], v[2], _pre_key(v[3])


def _interval(text: str) -> tuple[tuple, tuple | None] | None:
    """[low, high) of a version or wildcard; high None means the single version ``low``."""
    m = _WILDCARD.fullmatch(text)
    if m:
        major = int(m.group(1))
        if m.group(2) is None:
            return key((major, 0, 0, None)), key((major + 1, 0, 0, None))
        minor = int(m.group(2))
        return key((major, minor, 0, None)), key((major, minor + 1, 0, None))
    v = parse(text)
    if v is None:
        return None
    return key(v), None


def _comparator(token: str) -> Callable[[tuple], bool] | None:
    op = next(o for o in _OPS if token.startswith(o))
    bounds = _interval(token[len(op):])
    if bounds is None:
        return None
    low, high = bounds
    if high is None:
        return {
            "": lambda k: k == low, "=": lambda k: k == low, "==": lambda k: k == low,
            "!=": lambda k: k != low, "!": lambda k: k != low,
            ">": lambda k: k > low, ">=": lambda k: k >= low,
            "<": lambda k: k < low, "<=": lambda k: k <= low,
        }[op]
    def inside(k):
        return (low <= k < high)
    return {
        "": inside, "=": inside, "==": inside,
        "!=": lambda k: not inside(k), "!": lambda k: not inside(k),
        ">": lambda k: k >= high, ">=": lambda k: k >= low,
        "<": lambda k: k < low, "<=": lambda k: k < high,
    }[op]


@functools.lru_cache(maxsize=512)
def compile_range(text: str) -> Callable[[tuple], bool] | None:
    """A predicate over version keys for a range expression, or None when it does not parse."""
    tokens = re.sub(r"([<>=!]+)\s+", r"\1", text.strip()).split()
    groups: list[list[Callable]] = [[]]
    for tok in tokens:
        if tok == "||":
            if not groups[-1]:
                return None
            groups.append([])
            continue
        c = _comparator(tok)
        if c is None:
            return None
        groups[-1].append(c)
    if not groups[-1]:
        return None
    return lambda k: any(all(c(k) for c in g) for g in groups)


def satisfies(version: str, range_text: str) -> bool:
    v = parse(version)
    pred = compile_range(range_text)
    return v is not None and pred is not None and pred(key(v))


def valid_range(text: str) -> bool:
    """Whether ``text`` is a range of this grammar (what an OS posture check may store)."""
    return compile_range(text) is not None
