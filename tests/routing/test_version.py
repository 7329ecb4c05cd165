"""The version a router names (``routing/version.py``): one UPSTREAM_VERSION for the API and both routers."""

from __future__ import annotations

import ziti_lite
from ziti_lite.routing import version


def test_the_hello_version_is_the_upstream_version_and_parses_back():
    assert version.VERSION == f"v{ziti_lite.UPSTREAM_VERSION}"
    text = version.hello_version()
    assert text.split("|")[0] == version.VERSION
    assert version.parse(text) == version.version_info()
    assert version.parse("v2.0.3") == {"version": "v2.0.3", "revision": "", "buildDate": "", "os": "", "arch": ""}
