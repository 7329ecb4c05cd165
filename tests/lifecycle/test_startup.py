"""``serve`` refuses, before it listens, what cannot work: one line naming the problem and the
fix, exit status 1, no traceback (``lifecycle/startup.py`` and ``db/store.py``)."""

from __future__ import annotations

import signal
import subprocess
import sys

import apsw
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.pki.conftest import make_ca
from ziti_lite.cli import cli
from ziti_lite.db.store import SCHEMA_VERSION


@pytest.fixture
def serve(monkeypatch, tmp_path):
    """``ziti-lite serve`` in-process on a database; returns (exit code, output lines)."""
    monkeypatch.setattr(signal, "signal", lambda *a: None)   # serve's handlers stay out of pytest

    def run(db, *extra: str) -> tuple[int, list[str]]:
        r = CliRunner().invoke(cli, ["serve", "--db", str(db), "--port", "0", "--edge-port", "0", *extra])
        assert "Traceback" not in r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        return r.exit_code, [line for line in r.output.splitlines() if line.strip()]
    return run


def _edit(db, key: str, value: str) -> None:
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE controller SET value = ? WHERE key = ?", (value, key))
    conn.close()


def _one_line(result: tuple[int, list[str]], *words: str) -> str:
    code, lines = result
    assert code == 1, lines
    assert len(lines) == 1 and lines[0].startswith("ziti-lite: "), lines
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_a_file_that_is_not_sqlite(serve, tmp_path):
    db = tmp_path / "notes.db"
    db.write_bytes(b"these are my notes, not a database\n" * 200)
    _one_line(serve(db), "is not an SQLite database", "give --db")


def test_an_sqlite_file_of_another_application(serve, tmp_path):
    db = tmp_path / "other.db"
    conn = apsw.Connection(str(db))
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    conn.close()
    _one_line(serve(db), "not a ziti-lite database", "photos")
    conn = apsw.Connection(str(db))     # left as it was
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["photos"]
    conn.close()


def test_a_file_written_by_a_newer_ziti_lite(serve, db_path):
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    _one_line(serve(db_path), "newer ziti-lite", f"schema version {SCHEMA_VERSION + 1}", "upgrade ziti-lite")


def test_a_directory_that_does_not_exist(serve, tmp_path):
    _one_line(serve(tmp_path / "nowhere" / "net.db"), "cannot open", "no directory")


def test_a_server_certificate_that_does_not_match_its_key(serve, db_path):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    _edit(db_path, "server_key", other)
    _one_line(serve(db_path), "does not match its private key", "snapshot")


def test_a_chain_that_does_not_verify_to_the_stored_root(serve, db_path):
    _edit(db_path, "root_cert", make_ca("Someone else's root").cert_pem)
    _one_line(serve(db_path), "does not verify to the stored root CA", "snapshot")


@pytest.mark.slow
def test_the_real_command_exits_1_with_one_line_on_stderr(tmp_path):
    db = tmp_path / "net.db"
    db.write_bytes(b"\x00" * 4096)
    p = subprocess.run([sys.executable, "-m", "ziti_lite", "serve", "--db", str(db), "--edge-port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines() == [f"ziti-lite: {db} is not an SQLite database: give --db a ziti-lite database"
                                     " or a new file"]


def test_other_commands_refuse_the_same_files_in_one_line(tmp_path, db_path):
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    for args in (["check", "--db", str(db_path)], ["snapshot", "--db", str(db_path), str(tmp_path / "s.db")],
                 ["export", "--db", str(db_path), "-"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 1 and "newer ziti-lite" in r.output and "Traceback" not in r.output, (args, r.output)
