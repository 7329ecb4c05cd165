"""The real ``ziti fabric stream events`` (CLI v1.3.3) against ziti-lite's ``/fabric/v1/ws-api``:
it prints an entityChange for a service created while it runs and an edge.apiSessions event for
a login; ``--entity-change`` alone prints only entity changes. Marked ``interop``."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time

import pytest

from tests.interop.test_ziti_cli import ANSI, Cli, network  # noqa: F401 - a fixture

pytestmark = pytest.mark.interop


class Streaming:
    """``ziti fabric stream events ARGS`` in the background: its JSON lines on a queue."""

    def __init__(self, cli: Cli, *args: str):
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_")}, "HOME": cli.home,
               "NO_COLOR": "1"}
        self.proc = subprocess.Popen([cli.binary, "fabric", "stream", "events", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, stdin=subprocess.DEVNULL)
        self.lines: queue.Queue = queue.Queue()
        self.other: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = ANSI.sub("", line).strip()
            if line.startswith("{"):
                self.lines.put(json.loads(line))
            elif line:
                self.other.append(line)
        self.lines.put(None)

    def until(self, test, timeout: float = 20) -> dict:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                e = self.lines.get(timeout=left)
            except queue.Empty:
                break
            assert e is not None, f"the stream ended: {self.other}"
            if test(e):
                return e
        raise AssertionError(f"no such event in {timeout} s; other output: {self.other}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def _subscribed(cli: Cli, ctl, stream: Streaming) -> None:
    """Wait until the stream's subscription is live: a probe write it must see comes through
    (the CLI connects in the background, so the first probes may come before it)."""
    for n in range(15):
        cli.run("edge", "create", "config-type", f"stream-probe-{n}")
        try:
            stream.until(lambda e: e.get("namespace") == "entityChange" and e.get("entityType") == "configTypes",
                         timeout=2)
            return
        except AssertionError:
            continue
    raise AssertionError(f"the stream never subscribed; its output: {stream.other}")


def test_stream_events_all_prints_entity_changes_and_logins(ziti_bin, network, tmp_path):  # noqa: F811
    cli = Cli(ziti_bin, str(tmp_path / "home"))
    cli.login(network)
    stream = Streaming(cli, "--all")
    try:
        _subscribed(cli, network, stream)
        cli.run("edge", "create", "service", "streamed")
        e = stream.until(lambda e: e.get("namespace") == "entityChange" and e.get("eventType") == "created"
                         and e.get("entityType") == "services")
        assert e["finalState"]["name"] == "streamed" and e["metadata"]["authorName"] == "Default Admin"
        cli.login(network)   # a second login: a new API session
        s = stream.until(lambda e: e.get("namespace") == "edge.apiSessions" and e.get("event_type") == "created")
        assert set(s) == {"namespace", "event_type", "event_src_id", "id", "type", "timestamp", "token",
                          "identity_id", "ip_address"}
        assert s["token"] == s["id"]
    finally:
        stream.stop()


def test_stream_events_per_type_flag(ziti_bin, network, tmp_path):  # noqa: F811
    cli = Cli(ziti_bin, str(tmp_path / "home"))
    cli.login(network)
    stream = Streaming(cli, "--entity-change")
    try:
        _subscribed(cli, network, stream)
        cli.login(network)                       # not subscribed: no apiSessions event
        cli.run("edge", "create", "service", "only-changes")
        e = stream.until(lambda e: e.get("entityType") == "services")
        assert e["namespace"] == "entityChange"
    finally:
        stream.stop()
    seen = []
    while not stream.lines.empty():
        item = stream.lines.get()
        if item is not None:
            seen.append(item["namespace"])
    assert "edge.apiSessions" not in seen


def test_stream_refused_without_admin_session(ziti_bin, network, tmp_path):  # noqa: F811
    cli = Cli(ziti_bin, str(tmp_path / "home"))
    cli.login(network)
    cli.run("edge", "logout", ok=False)
    out = subprocess.run([cli.binary, "fabric", "stream", "events", "--all"], capture_output=True, text=True,
                         env={"HOME": cli.home, "PATH": os.environ.get("PATH", "")}, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode != 0
