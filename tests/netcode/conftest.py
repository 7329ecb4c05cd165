"""Helpers of the netcode tests: the CLI as a user runs it, and a database's export (the
network, compared before and after to show that nothing changed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ziti_lite import exchange
from ziti_lite.cli import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "network.yaml"


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def export_of(db) -> dict:
    api = exchange.LocalApi(str(db))
    try:
        return exchange.export(api)
    finally:
        api.close()


def write(path: Path, doc) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.fixture
def fresh_db(template_db, tmp_path) -> Path:
    """A new network's database (nothing but what a first start seeds)."""
    path = tmp_path / "net.db"
    shutil.copy(template_db, path)
    return path
