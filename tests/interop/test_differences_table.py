"""The table of documented differences from OpenZiti v1.3.3 (``differences.tsv``, read by the
differential test under ``make interop``) is well-formed and shown row for row in the README.

Not marked ``interop``: it needs no real controller and runs with ``make test``."""

from __future__ import annotations

from pathlib import Path

from tests.interop.test_differential import TABLE, read_table

README = Path(__file__).parents[2] / "README.md"


def test_every_documented_difference_has_a_reason_and_is_in_the_readme():
    rows = read_table(TABLE)
    assert rows, "the table has rows"
    section = README.read_text().split("## Documented differences", 1)[1].split("\n## ", 1)[0]
    for row in rows:
        assert row.step and row.kind and row.path, row
        what, sep, why = row.reason.partition(": ")
        assert sep and what and why, f"reason is 'what: why': {row.reason!r}"
        assert f"| {what} | {why} |" in section, f"README's documented differences lack: {row.reason}"
