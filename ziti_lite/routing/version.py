"""The version a router of ziti-lite's names in its hello and in the API: one string for both.

The embedded router says it in its hello to SDKs and shows it as its ``versionInfo``; the
control channel says it in the hello answer and ServerHello to real routers. Both are the
upstream release ziti-lite serves (``ziti_lite.UPSTREAM_VERSION``, the one place it is set),
so an SDK or a router gates its features on the same version the API's ``/version`` names.
"""

from __future__ import annotations

import platform

from .. import UPSTREAM_VERSION, __version__

VERSION = f"v{UPSTREAM_VERSION}"     # as Go's build info writes it: with the v
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def version_info() -> dict:
    """A router's ``versionInfo`` (the API's edge router detail)."""
    return {"version": VERSION, "revision": f"ziti-lite-{__version__}", "buildDate": "",
            "os": platform.system().lower(), "arch": _ARCH.get(platform.machine(), platform.machine())}


def hello_version() -> str:
    """The hello's version header: version|revision|buildDate|os|arch."""
    v = version_info()
    return "|".join((v["version"], v["revision"], v["buildDate"], v["os"], v["arch"]))


def parse(text: str) -> dict:
    """The ``versionInfo`` of a peer's hello version header (the inverse of ``hello_version``)."""
    parts = (text.split("|") + [""] * 5)[:5]
    return {"version": parts[0], "revision": parts[1], "buildDate": parts[2], "os": parts[3], "arch": parts[4]}
