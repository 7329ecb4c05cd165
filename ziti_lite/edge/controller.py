"""The controller as the embedded router sees it: one Protocol, so that the router's modules name
what they use of ``app.Controller`` (and of ``thread.RouterSide``, its stand-in on the router's
own thread) without importing the controller (see ``lifecycle.contexts.LifecycleController``)."""

from __future__ import annotations

import socket
import ssl
from typing import TYPE_CHECKING, Protocol

from ..events.runtime import EventsController
from ..routing.checks import RoutingController
from ..routing.presence import StatesController

if TYPE_CHECKING:
    from .router import EdgeRouter


class EdgeController(RoutingController, StatesController, EventsController, Protocol):
    edge_router: EdgeRouter | None
    edge_ssl_context: ssl.SSLContext | None
    edge_sock: socket.socket | None
    instance_id: str
