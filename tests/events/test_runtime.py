"""What runs beside a serving controller: edge.entityCounts on its interval, the audit
retention at start and every minute, the events file closed (flushed) at shutdown."""

from __future__ import annotations

import json
import time

from starlette.testclient import TestClient

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, Api
from ziti_lite import clock
from ziti_lite.app import create_app
from ziti_lite.config import Settings


def _app(db_path, **kw):
    return create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                               checkpointer=False, **kw))


def test_entity_counts_on_an_interval(db_path, tmp_path):
    path = tmp_path / "ev.jsonl"
    app = _app(db_path, events=str(path), events_types=["edge.entityCounts"], events_counts_interval=0.2)
    try:
        with TestClient(app):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not (path.exists() and path.read_text().strip()):
                time.sleep(0.1)   # the writer thread's file: polled until the interval's event is in it
        counts = [json.loads(line) for line in path.read_text().splitlines()]
        assert counts and {e["namespace"] for e in counts} == {"edge.entityCounts"}   # the type filter holds
        event = counts[0]
        assert event["error"] == "" and event["counts"]["identities"] >= 1 and event["counts"]["services"] == 0
        assert {"apiSessions", "identities", "services", "servicePolicies", "terminators"} <= set(event["counts"])
    finally:
        app.state.controller.store.close()


def test_audit_retention_runs_while_serving(db_path, admin_template):
    app = _app(db_path, audit_days=1)
    ctl = app.state.controller
    try:
        with TestClient(app) as c:
            admin = Api(c, token=admin_template[1])
            with ctl.store.write():
                ctl.store.execute("UPDATE api_sessions SET last_activity_at = ? WHERE token = ?",
                                  (clock.stamp(), admin.token))
            clock.advance(-3 * 86400)   # a change three days ago...
            try:
                admin.create("services", {"name": "old", "encryptionRequired": True})
            finally:
                clock.reset()
            admin.create("services", {"name": "new", "encryptionRequired": True})
            assert ctl.store.value("SELECT count(*) FROM audit_log WHERE entity_type = 'services'") == 2
        with TestClient(app):   # ...is gone at the next start's housekeeping
            pass
        names = ctl.store.column("SELECT entity_name FROM audit_log WHERE entity_type = 'services'")
        assert names == ["new"]
    finally:
        ctl.store.close()
