"""The ``ziti-lite`` command line: version, snapshot of a live database, check and check --fix."""

from __future__ import annotations

import os

import apsw
import pytest
from click.testing import CliRunner

from ziti_lite import __version__
from ziti_lite.cli import cli

HOST = "NH5p4FpGR"


@pytest.fixture
def runner():
    return CliRunner()


def test_version(runner):
    r = runner.invoke(cli, ["version"])
    assert r.exit_code == 0
    assert r.output.strip() == f"ziti-lite {__version__}"


def test_help_lists_the_contract(runner):
    r = runner.invoke(cli, ["--help"])
    assert r.exit_code == 0
    for cmd in ("serve", "snapshot", "check", "version"):
        assert cmd in r.output
    r = runner.invoke(cli, ["serve", "--help"])
    for opt in ("--db", "--host", "--port", "--advertise", "--admin-user", "--admin-password"):
        assert opt in r.output
    assert "1280" in r.output and "127.0.0.1" in r.output


def test_snapshot_of_a_live_database(runner, admin, ctl, db_path, tmp_path):
    for i in range(20):
        admin.create("identities", {"name": f"live-{i}", "type": "User", "isAdmin": False})
    wal = f"{db_path}-wal"
    assert os.path.exists(wal) and os.path.getsize(wal) > 0, "the rows are still in the WAL"
    out = tmp_path / "copy.db"
    r = runner.invoke(cli, ["snapshot", "--db", str(db_path), str(out)])
    assert r.exit_code == 0, r.output
    assert str(out) in r.output
    conn = apsw.Connection(str(out), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("SELECT count(*) FROM identities WHERE name LIKE 'live-%'").fetchone()[0] == 20
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert admin.get("/identities?limit=1").status_code == 200   # the live server is unaffected


def test_snapshot_needs_an_existing_db(runner, tmp_path):
    r = runner.invoke(cli, ["snapshot", "--db", str(tmp_path / "missing.db"), str(tmp_path / "out.db")])
    assert r.exit_code != 0


def test_check_clean_database(runner, ctl, db_path):
    r = runner.invoke(cli, ["check", "--db", str(db_path)])
    assert r.exit_code == 0, r.output
    assert "0 problem(s) found" in r.output


def test_check_and_fix_a_dangling_service_config(runner, admin, ctl, db_path):
    cid = admin.create("configs", {"name": "gone", "configTypeId": HOST,
                                   "data": {"protocol": "tcp", "address": "x", "port": 1}})
    keep = admin.create(
        "configs",
        {
            "name": "kept",
            "configTypeId": "g7cIWbcGg",
            "data": {"protocols": ["tcp"], "addresses": ["a"], "portRanges": [{"low": 1, "high": 2}]},
        },
    )
    sid = admin.create("services", {"name": "svc", "encryptionRequired": True, "configs": [cid, keep]})
    conn = apsw.Connection(str(db_path))
    conn.setbusytimeout(5000)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("DELETE FROM configs WHERE id = ?", (cid,))
    conn.close()

    r = runner.invoke(cli, ["check", "--db", str(db_path)])
    assert r.exit_code == 1, r.output
    assert "fixable:" in r.output and "service_configs" in r.output
    assert "problem(s) found" in r.output and "0 problem(s)" not in r.output

    r = runner.invoke(cli, ["check", "--db", str(db_path), "--fix"])
    assert r.exit_code == 0, r.output
    assert "fixed:" in r.output

    r = runner.invoke(cli, ["check", "--db", str(db_path)])
    assert r.exit_code == 0, r.output
    assert "0 problem(s) found" in r.output
    d = admin.get(f"/services/{sid}").json()["data"]
    assert d["configs"] == [keep]
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("SELECT config_id FROM service_configs WHERE service_id = ?", (sid,)).fetchall() == [(keep,)]
    conn.close()


def test_fix_leaves_an_identity_with_a_missing_auth_policy_alive(runner, admin, ctl, db_path):
    iid = admin.create("identities", {"name": "orphan", "type": "User", "isAdmin": False})
    conn = apsw.Connection(str(db_path))
    conn.setbusytimeout(5000)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("UPDATE identities SET auth_policy_id = 'vanished' WHERE id = ?", (iid,))
    conn.close()
    r = runner.invoke(cli, ["check", "--db", str(db_path), "--fix"])
    assert r.exit_code == 0, r.output
    d = admin.get(f"/identities/{iid}").json()["data"]
    assert d["authPolicyId"] == "default"


def test_serve_refuses_an_unknown_event_type_in_one_line(runner, tmp_path):
    r = runner.invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), "--events", "-", "--events-types",
                            "entityChange,bogus"])
    assert r.exit_code != 0 and "unknown event type 'bogus'" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(("args", "env", "on"), [([], {}, True), (["--no-oidc"], {}, False),
                                                 ([], {"ZITI_LITE_OIDC": "false"}, False)])
def test_serve_oidc_switch(runner, tmp_path, monkeypatch, args, env, on):
    import signal

    from ziti_lite import server
    seen = []
    monkeypatch.setattr(server, "serve", lambda settings, **kw: seen.append(settings))
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:   # serve installs its own signal handlers: the old ones are put back
        r = runner.invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), *args], env=env)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    assert r.exit_code == 0, r.output
    assert seen[0].oidc is on


def test_serve_options_are_declared_once_and_name_settings_fields():
    import dataclasses

    from ziti_lite import cli as cli_module
    from ziti_lite.config import Settings
    fields = {f.name for f in dataclasses.fields(Settings)}
    names = [name for name, *_ in cli_module.SERVE_OPTIONS]
    assert len(names) == len(set(names))
    assert set(names) - fields == {"log_level"}       # serve's own; every other one is a Settings field
    params = {p.name: p for p in cli_module.serve.params}
    assert list(params) == names
    assert all(p.envvar == f"ZITI_LITE_{p.name.upper()}" for p in params.values())


def _served_settings(runner, tmp_path, monkeypatch, args, env):
    import signal

    from ziti_lite import server
    seen: list = []
    monkeypatch.setattr(server, "serve", lambda settings, **kw: seen.append(settings))
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        r = runner.invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), *args], env=env)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return r, seen


CONSOLE = "https://console.example.test/auth/callback"


@pytest.mark.parametrize(("args", "env", "uris"), [
    ([], {}, []),
    (["--oidc-redirect-uri", CONSOLE, "--oidc-redirect-uri", "https://*.example.test/auth/callback"], {},
     [CONSOLE, "https://*.example.test/auth/callback"]),
    ([], {"ZITI_LITE_OIDC_REDIRECT_URI": f"{CONSOLE} https://b.example.test/cb"},
     [CONSOLE, "https://b.example.test/cb"]),
])
def test_serve_oidc_redirect_uris_from_options_or_environment(runner, tmp_path, monkeypatch, args, env, uris):
    r, seen = _served_settings(runner, tmp_path, monkeypatch,
                               [*args, "--oidc-post-logout-uri", "https://console.example.test/"], env)
    assert r.exit_code == 0, r.output
    assert seen[0].oidc_redirect_uri == uris
    assert seen[0].oidc_post_logout_uri == ["https://console.example.test/"]


def test_serve_refuses_a_malformed_redirect_uri_pattern_in_one_line(runner, tmp_path, monkeypatch):
    r, seen = _served_settings(runner, tmp_path, monkeypatch, ["--oidc-redirect-uri", "https://a.test/[cb"], {})
    assert r.exit_code != 0 and "--oidc-redirect-uri" in r.output and "unclosed" in r.output
    assert "Traceback" not in r.output and not seen
