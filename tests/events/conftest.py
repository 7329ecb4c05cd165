"""A controller that writes its events to a file (``--events``), and a reader of that file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, MGMT, Api
from tests.fastclient import FastClient
from ziti_lite import clock
from ziti_lite.app import create_app
from ziti_lite.config import Settings


class Events:
    """The events file of a controller: read it after the controller stopped (its writer has
    written everything queued by then), or ``lines()`` at any time for what is written so far."""

    def __init__(self, path: Path):
        self.path = path

    def lines(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def of(self, namespace: str, **match) -> list[dict]:
        return [e for e in self.lines() if e["namespace"] == namespace
                and all(e.get(k) == v for k, v in match.items())]


@pytest.fixture
def events_app(db_path, tmp_path):
    clock.reset()
    path = tmp_path / "events.jsonl"
    application = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                                      checkpointer=False, events=str(path)))
    yield application, Events(path)
    application.state.controller.store.close()


@pytest.fixture
def served(events_app, admin_token):
    """(client, admin Api, Events) of a controller writing events; leave the ``with`` of the
    client (``served[0]``) to stop it and flush the file."""
    application, events = events_app
    client = FastClient(application)
    client.__enter__()
    try:
        yield client, Api(client, MGMT, admin_token), events
    finally:
        client.__exit__(None, None, None)
