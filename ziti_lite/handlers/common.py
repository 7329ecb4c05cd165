"""What the handlers share and that none of them owns: the part of the controller they read.

``HandlersController`` lived in ``informational.py``, which imports ``spec.py``, whose
annotations named it back: a circle of two modules. Here it sits below both (and below
``database.py``, which names it too).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..api.router import Router
from ..auth.sessions import AuthController


class HandlersController(AuthController, Protocol):
    """The controller as the handlers see it (see ``lifecycle.contexts.LifecycleController``)."""
    router: Router
    router_states: dict[str, dict]
    router_lines: dict[str, str]
    jobs: dict[str, Any]

    @property
    def oidc(self) -> object | None: ...    # the OIDC provider (a layer above), None with --no-oidc
