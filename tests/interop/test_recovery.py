"""Disaster recovery with the real tools: ziti-lite under ``litestream replicate -exec`` (v0.3.13),
steady writes, ``kill -9``, the database files deleted, ``litestream restore``, serve again: every
write acknowledged more than the sync interval plus one second before the kill is there, the
integrity check is clean, the admin logs in. And a move to a new box: a snapshot restored with
``ziti-lite restore`` in another directory and served on another address (the name the routers
know moved to it, as DNS would be), where a real v2.0.3 router and Go SDK identities enrolled
before come back and dial without enrolling again.

Skipped, saying why, without the litestream binary (``tests/interop/recovery.py`` installs it
with ``go install`` from the Go module proxy), the ziti v2.0.3 binary or the Go SDK peer.
Marked ``interop``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.edge.test_go_sdk import GoPeer
from tests.interop import recovery
from tests.interop.real_router import RealRouter, wait_online
from ziti_lite import testing

pytestmark = pytest.mark.interop


@pytest.fixture(scope="session")
def litestream() -> str:
    path, why = recovery.litestream_binary()
    if path is None:
        pytest.skip(why)
    return path


def box(template_db, folder: Path) -> tuple[Path, str]:
    """A copy of the template database in ``folder`` and the CA bundle file of its controller."""
    folder.mkdir(parents=True)
    db = folder / "net.db"
    shutil.copy(template_db, db)
    ca = folder / "ca.pem"
    ca.write_text(testing.ca_bundle(db))
    return db, str(ca)


def test_litestream_replica_restores_every_write_older_than_two_seconds(litestream, template_db, tmp_path):
    db, ca = box(template_db, tmp_path / "box")
    replica = tmp_path / "replica"
    config = recovery.write_config(tmp_path / "litestream.yml", db, replica)
    port = testing.free_port()
    url = f"https://127.0.0.1:{port}"
    proc = recovery.replicate(litestream, config, recovery.serve_args(db, port), tmp_path / "replicate.log")
    try:
        recovery.wait_ready(url, ca, proc)
        writer = recovery.Writer(testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(tmp_path)))
        writer.start()
        time.sleep(8)
        killed_at = time.monotonic()
        proc.kill9()
        writer.stop()
    finally:
        proc.stop()
    assert len(writer.acked) > 200, (len(writer.acked), writer.errors, proc.tail())
    for f in db.parent.glob("net.db*"):          # the machine's disk is gone
        f.unlink()
    shutil.rmtree(db.parent / ".net.db-litestream", ignore_errors=True)
    r = recovery.restore(litestream, config, db)
    assert r.returncode == 0 and db.exists(), r.stdout + r.stderr
    check = subprocess.run([sys.executable, "-m", "ziti_lite", "check", "--db", str(db)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0 and "0 problem(s) found" in check.stdout, check.stdout + check.stderr
    served = recovery.start(recovery.serve_args(db, port), tmp_path / "restored.log")
    try:
        recovery.wait_ready(url, ca, served)
        admin = testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(tmp_path))
        admin.login()
        present = recovery.names(admin, "w")
    finally:
        served.stop()
    missing = recovery.lost(writer.acked, present, killed_at)
    bound = recovery.SYNC_INTERVAL + 1.0
    print(f"\nlitestream: {len(writer.acked)} writes acknowledged at ~{writer.rate:.0f}/s, {len(missing)} lost after"
          f" kill -9 and restore (the oldest acknowledged {max((s for _, s in missing), default=0):.2f} s before"
          f" the kill; sync interval {recovery.SYNC_INTERVAL:g} s)")
    assert [m for m in missing if m[1] > bound] == [], f"writes older than {bound} s were lost"
    assert present <= {n for n, _ in writer.acked} | {f"w-{len(writer.acked):06d}"}   # nothing invented


def test_a_stop_under_litestream_keeps_every_write(litestream, template_db, tmp_path):
    """SIGTERM to litestream: it stops ziti-lite (which leaves the log to Litestream: no TRUNCATE
    that would wait for its read lock), syncs the rest and exits; the replica has every write."""
    db, ca = box(template_db, tmp_path / "box")
    config = recovery.write_config(tmp_path / "litestream.yml", db, tmp_path / "replica")
    port = testing.free_port()
    url = f"https://127.0.0.1:{port}"
    proc = recovery.replicate(litestream, config, recovery.serve_args(db, port), tmp_path / "replicate.log")
    try:
        recovery.wait_ready(url, ca, proc)
        recovery.wait_replicated(tmp_path / "replica")
        admin = testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(tmp_path))
        made = {f"s-{i}" for i in range(40)}
        for name in sorted(made):
            admin.create("identities", {"name": name, "type": "User", "isAdmin": False})
        proc.proc.send_signal(15)
        assert proc.proc.wait(30) == 0, proc.tail()
    finally:
        proc.stop()
    assert "database busy" not in proc.tail() and "litestream shut down" in proc.tail()
    for f in db.parent.glob("net.db*"):
        f.unlink()
    shutil.rmtree(db.parent / ".net.db-litestream", ignore_errors=True)
    r = recovery.restore(litestream, config, db)
    assert r.returncode == 0, r.stdout + r.stderr
    served = recovery.start(recovery.serve_args(db, port), tmp_path / "restored.log")
    try:
        recovery.wait_ready(url, ca, served)
        assert recovery.names(testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(tmp_path)), "s") == made
    finally:
        served.stop()


# ---------------------------------------------------------------------- a move to a new box
NAME = "localhost"          # the controller's advertised name: what the routers and SDK identities know


class Admin:
    """The calls ``RealRouter`` makes, on a ``testing.Management``."""

    def __init__(self, api: testing.Management):
        self.api = api

    def create(self, collection: str, body: dict) -> str:
        return self.api.create(collection, body)

    def get(self, path: str):
        reply = self.api.get(path)
        return type("Reply", (), {"json": lambda _self: reply.body})()


def go_identity(admin: testing.Management, name: str, roles: list[str], folder: Path) -> str:
    """An identity enrolled on the old box, in the Go SDK's file format."""
    iid = admin.create_identity(name, roles)
    cfg = json.loads(Path(admin.enroll(iid, folder / f"{name}.json")).read_text())
    out = folder / f"{name}.go.json"
    out.write_text(json.dumps({"ztAPI": cfg["ztAPI"] + "/edge/client/v1", "id": cfg["id"]}))
    return str(out)


def test_a_move_to_a_new_box_keeps_routers_and_sdks(ziti2, gopeer, template_db, tmp_path):
    """Old box: 127.0.0.2, folder old/. New box: 127.0.0.3, folder new/. The name ``localhost``
    (127.0.0.1, where the relay listens) leads to the old box, then to the new one: what
    repointing DNS does. The same ports on both, ``--advertise localhost`` on both."""
    port, ctrl = testing.free_port(), testing.free_port()
    relay = recovery.Relay("127.0.0.1", [port, ctrl], "127.0.0.2")
    url = f"https://{NAME}:{port}"
    old_db, ca = box(template_db, tmp_path / "old")
    extra = ("--advertise", NAME)
    old = recovery.start(recovery.serve_args(old_db, port, "127.0.0.2", ctrl, *extra), tmp_path / "old.log")
    peers: list[GoPeer] = []
    router = None
    try:
        recovery.wait_ready(url, ca, old)
        admin = testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(tmp_path))
        admin.create("services", {"name": "moved", "encryptionRequired": True, "roleAttributes": ["mv"]})
        for kind, role in (("Bind", "#mv-host"), ("Dial", "#mv-client")):
            admin.create("service-policies", {"name": f"mv-{kind}", "type": kind, "semantic": "AnyOf",
                                              "identityRoles": [role], "serviceRoles": ["#mv"]})
        host_file = go_identity(admin, "mv-host", ["mv-host"], tmp_path)
        client_file = go_identity(admin, "mv-client", ["mv-client"], tmp_path)
        router = RealRouter(ziti2, tmp_path, "site-move", ctrl, Admin(admin))
        router.enroll()
        router.start()
        wait_online(Admin(admin), router.id, timeout=20)
        dial(gopeer, peers, host_file, client_file, "before the move")
        snapshot = tmp_path / "snapshot.db"
        assert subprocess.run([sys.executable, "-m", "ziti_lite", "snapshot", "--db", str(old_db), str(snapshot)],
                              capture_output=True, timeout=60).returncode == 0
        for p in peers:
            p.stop()
        peers.clear()
        old.kill9()                                   # the old machine dies
        new_db = tmp_path / "new" / "net.db"
        new_db.parent.mkdir()
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "ziti_lite", "restore", "--db", str(new_db), str(snapshot)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        relay.target = "127.0.0.3"                    # the name now leads to the new box
        new = recovery.start(recovery.serve_args(new_db, port, "127.0.0.3", ctrl, *extra), tmp_path / "new.log")
        try:
            api_s = recovery.wait_ready(url, ca, new) + 0.0
            api_at = time.monotonic() - t0
            admin = testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(tmp_path))
            wait_online(Admin(admin), router.id, timeout=30)
            online_at = time.monotonic() - t0
            print(f"\nmove: API answering {api_at:.2f} s after restore began (serve {api_s:.2f} s), router"
                  f" {router.name} online after {online_at:.2f} s")
            dial(gopeer, peers, host_file, client_file, "after the move")
            assert not admin.get(f"/edge-routers/{router.id}").data.get("enrollmentJwt")   # not enrolled again
        finally:
            for p in peers:
                p.stop()
            new.stop()
    finally:
        if router is not None:
            router.stop()
        old.stop()
        relay.close()


def dial(gopeer: str, peers: list[GoPeer], host_file: str, client_file: str, line: str) -> None:
    h = GoPeer(gopeer, "host", host_file, "moved", "box")
    peers.append(h)
    ev = h.next(timeout=60, kind="bound")
    assert ev["event"] == "bound", ev
    d = GoPeer(gopeer, "dial", client_file, "moved", line)
    peers.append(d)
    ev = d.next(timeout=60, kind="echo")
    assert ev["event"] == "echo" and ev["reply"] == f"box:{line}\n", ev
