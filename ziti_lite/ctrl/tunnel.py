"""Tunneler-enabled real routers (``isTunnelerEnabled``): the router hosts services itself.

A router whose configuration has a ``tunnel`` listener asks for an API session of its own
(``CreateApiSession``). Only a router the API marked tunneler-enabled has one: its identity of
type Router, made by ``policy/tunneler.py``; any other router is answered upstream's
``tunneling not enabled`` (code 7), and its tunnel listener stays idle.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..edge.wire import Message
from .messages import C, H

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

TUNNELING_NOT_ENABLED = 7


class Tunnel:
    def __init__(self, server: CtrlServer):
        self.server = server

    def handlers(self) -> dict:
        return {C.CREATE_API_SESSION: self._create_api_session}

    def _create_api_session(self, ch: RouterChannel, m: Message) -> None:
        log.info("router %s: tunneling not enabled", ch.label)
        ch.reply(m, C.ERROR, {H.ERROR_CODE: TUNNELING_NOT_ENABLED.to_bytes(4, "little")}, b"tunneling not enabled")
