"""Substring search indexes: one SQLite FTS5 table with the trigram tokenizer per searchable text
column, external content over the entity table (the index stores only trigram postings, the
text stays in the entity row), kept in step by triggers in ``schema.sql``.

The filter compiler (``filters.py``) uses an index only as a pre-filter: a positive ``contains``
or ``icontains`` with a needle of at least 3 characters becomes ``t.rowid IN (rowids whose text
holds every trigram of the needle in a row, case folded)`` AND the plain ``instr`` test. The
index answer is a superset of the plain answer (case folding maps one character to one
character, so a substring stays a substring after folding; diacritics are not removed), and the
plain test then decides, so the semantics are exactly those of the scan.

The needle reaches FTS5 as one bound parameter: a phrase in double quotes, inner quotes doubled,
so FTS5 syntax (``*``, ``^``, ``-``, ``NEAR``, ``AND``, ``:``, parentheses) inside it is text.
"""

from __future__ import annotations

# entity table -> its searchable column (each name is unique per table and the lists' search box)
SEARCH_INDEXES: dict[str, str] = {
    "identities": "name",
    "services": "name",
    "configs": "name",
    "service_policies": "name",
    "edge_router_policies": "name",
    "service_edge_router_policies": "name",
    "routers": "name",
    "posture_checks": "name",
}

MIN_NEEDLE = 3      # the trigram tokenizer matches nothing for a shorter phrase


def index_name(table: str) -> str:
    return f"{table}_search"


def ddl(table: str, column: str) -> str:
    """The FTS5 table and its three triggers, exactly as written in schema.sql."""
    fts = index_name(table)
    return (
        f"CREATE VIRTUAL TABLE {fts} USING fts5({column}, content='{table}', content_rowid='rowid',"
        f" tokenize='trigram case_sensitive 0 remove_diacritics 0');\n"
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} BEGIN\n"
        f"    INSERT INTO {fts}(rowid, {column}) VALUES (new.rowid, new.{column});\n"
        f"END;\n"
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN\n"
        f"    INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.rowid, old.{column});\n"
        f"END;\n"
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF {column} ON {table} BEGIN\n"
        f"    INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.rowid, old.{column});\n"
        f"    INSERT INTO {fts}(rowid, {column}) VALUES (new.rowid, new.{column});\n"
        f"END;\n"
    )


def all_ddl() -> str:
    return "".join(ddl(t, c) for t, c in SEARCH_INDEXES.items())


def usable(needle: str) -> bool:
    """Whether the index can pre-filter for this needle (NUL never reaches the tokenizer whole)."""
    return len(needle) >= MIN_NEEDLE and "\x00" not in needle


def phrase(needle: str) -> str:
    """The FTS5 query for a needle: one quoted phrase, every character literal."""
    return '"' + needle.replace('"', '""') + '"'


def condition(table: str) -> str:
    """SQL over the entity alias ``t`` with one ``?`` for ``phrase(needle)``."""
    fts = index_name(table)
    return f"t.rowid IN (SELECT rowid FROM {fts} WHERE {fts} MATCH ?)"


def rebuild(conn, table: str) -> None:
    """Re-index every row of ``table`` (after a migration, or to repair the index)."""
    fts = index_name(table)
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")


def optimize(conn, table: str) -> None:
    """Merge the index's segments into one (after a bulk load: a phrase query reads each segment)."""
    fts = index_name(table)
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
