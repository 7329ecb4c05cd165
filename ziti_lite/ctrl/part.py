"""The one shape of a control-channel part: what the server tells every part, and when.

``CtrlServer`` (``server.py``) owns the channels, the hello and the router's coming and going;
everything else a router does (API-session sync, terminators, circuits, tunneling, links, the
router data model) is a ``Part``: an object built with the server, which answers content types
(``handlers``) and hears of routers at fixed points. A part overrides only the points it needs
(the defaults do nothing); the server calls each point on every part in the order of their
declaration in ``CtrlServer``, its one list of parts. Adding one is a new module with a ``Part``
subclass and one annotation line in that list (ARCHITECTURE.md, "Adding things").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..channel.wire import Message
    from .channel import RouterChannel
    from .hello import Hello
    from .server import CtrlServer

Handler = Callable[["RouterChannel", "Message"], None]


class Part:
    def __init__(self, server: CtrlServer) -> None:
        self.server = server

    def handlers(self) -> dict[int, Handler]:
        """The content types this part answers (each has one handler among all parts)."""
        return {}

    def hello(self, ch: RouterChannel, said: Hello) -> None:
        """A router's first underlay said an acceptable hello (before the hello's answer)."""

    def router_ready(self, ch: RouterChannel) -> None:
        """The router sent its ClientHello: it is online."""

    def channel_lost(self, ch: RouterChannel) -> None:
        """A router's logical channel closed (accepted or not, replaced or not)."""

    def router_lost(self, router_id: str, removed: bool) -> None:
        """The router's accepted channel closed: it is offline (``removed``: it was deleted)."""

    def tick(self) -> None:
        """Five times a second while any router is connected."""
