"""Tunneler-enabled real routers (``isTunnelerEnabled``): placeholder until the tunnel messages land."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .server import CtrlServer


class Tunnel:
    def __init__(self, server: CtrlServer):
        self.server = server

    def handlers(self) -> dict:
        return {}
