"""Version ranges of OS posture checks."""

from __future__ import annotations

import pytest

from ziti_lite.semver import compile_range, satisfies, valid_range


@pytest.mark.parametrize("version, rng, ok", [
    ("10.0.19041", ">=10.0.19041", True),
    ("10.0.19040", ">=10.0.19041", False),
    ("10.5.0", ">=10.0.0 <11.0.0", True),
    ("11.0.0", ">=10.0.0 <11.0.0", False),
    ("12.1.7", ">=10.0.0 <11.0.0 || 12.1.x", True),
    ("1.2.9", "<=1.2.x", True),
    ("1.3.0", "<=1.2.x", False),
    ("1.3.0", ">1.2.x", True),
    ("1.2.9", ">1.2.x", False),
    ("1.5.0", "1.x", True),
    ("2.0.0", "1.x", False),
    ("2.0.0", "!=1.x", True),
    ("1.0.0", ">= 1.0.0", True),
    ("1.0.0-alpha", ">=1.0.0", False),
    ("1.0.0-alpha.2", ">1.0.0-alpha.1", True),
    ("1.0.0", "=1.0.0", True),
    ("10.0", ">=1.0.0", False),        # reported versions must be x.y.z
])
def test_satisfies(version, rng, ok):
    assert satisfies(version, rng) is ok


@pytest.mark.parametrize("rng", ["", "||", ">=1.0", "~1.2.3", ">=1.0.0 ||", "abc"])
def test_bad_ranges_do_not_compile(rng):
    assert compile_range(rng) is None


@pytest.mark.parametrize("rng, ok", [
    (">=10.0.0 <11.0.0 || 12.1.x", True),
    ("1.x", True),
    ("!= 1.2.3", True),
    ("1.2.X", False),      # only a lower-case x is a wildcard (upstream's validation)
    ("1.2.*", False),
    ("=>1.0.0", False),
    ("v1.0.0", False),
    ("", False),
])
def test_valid_range_is_what_compiles(rng, ok):
    assert valid_range(rng) is ok
