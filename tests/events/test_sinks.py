"""The events file: JSON lines, rotation by size, and a bounded queue that drops (and counts)
instead of blocking when the file cannot be written."""

from __future__ import annotations

import json
import os

from ziti_lite.events.bus import Bus
from ziti_lite.events.sinks import FileSink


def _emit(bus: Bus, n: int, size: int = 100) -> None:
    for i in range(n):
        bus.emit({"namespace": "sdk", "event_type": "sdk-online", "identity_id": f"{i:06d}" + "x" * size})


def test_lines_rotation_and_kept_files(tmp_path):
    path = tmp_path / "events.jsonl"
    bus = Bus("ctrl")
    sink = FileSink(str(path), max_bytes=1000, keep=2)
    sink.start()
    bus.subscribe(sink)
    _emit(bus, 40)
    sink.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size <= 1000
        for line in p.read_text().splitlines():
            assert json.loads(line)["namespace"] == "sdk"
    newest = [json.loads(line)["identity_id"][:6] for line in path.read_text().splitlines()]
    assert newest[-1] == "000039"   # the newest events are in the file itself
    assert bus.dropped == {}


def test_types_filter(tmp_path):
    path = tmp_path / "events.jsonl"
    bus = Bus("ctrl")
    sink = FileSink(str(path), types=frozenset({"fabric.routers"}))
    sink.start()
    bus.subscribe(sink)
    _emit(bus, 3)
    bus.emit({"namespace": "fabric.routers", "event_type": "router-online"})
    sink.close()
    assert [json.loads(line)["namespace"] for line in path.read_text().splitlines()] == ["fabric.routers"]


def test_a_blocked_file_drops_and_counts_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)   # nobody reads it: the writer thread blocks opening it
    bus = Bus("ctrl")
    sink = FileSink(str(fifo), limit=50)
    sink.start()
    bus.subscribe(sink)
    _emit(bus, 500)   # returns: emit never waits for the file
    assert bus.dropped == {"file": 450}
    assert len(sink.queue) == 50
    assert bus.report_drops(every=0.0) is True and bus.report_drops(every=60.0) is False
    # let the writer go: open the FIFO for reading, and it drains what it held
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(reader, True)
    try:
        sink.close(timeout=5)
        data = b""
        while chunk := os.read(reader, 1 << 16):
            data += chunk
    finally:
        os.close(reader)
    assert len(data.splitlines()) == 50


def test_dash_is_standard_output(capfd):
    bus = Bus("ctrl")
    sink = FileSink("-")
    sink.start()
    bus.subscribe(sink)
    bus.emit({"namespace": "fabric.routers", "event_type": "router-online", "router_id": "r1"})
    sink.close()
    out = capfd.readouterr().out
    assert json.loads(out.strip()) == {"namespace": "fabric.routers", "event_type": "router-online", "router_id": "r1"}


def test_a_failing_disk_loses_lines_counted_not_raised(tmp_path):
    if not os.path.exists("/dev/full"):
        return   # no device that fails every write here
    bus = Bus("ctrl")
    sink = FileSink("/dev/full")   # every write: ENOSPC
    sink.start()
    bus.subscribe(sink)
    _emit(bus, 5)
    sink.close()
    assert sink.lost == 5 and sink.written == 0
