"""Substring search indexes: one SQLite FTS5 table with the case-sensitive trigram tokenizer per
searchable text column, over the text itself, SQLite's ``upper()`` of it and a flag for text
holding a NUL character; external content over a view of the entity table (the index stores
only trigram postings, the text stays in the entity row), kept in step by triggers in
``schema.sql``.

The filter compiler (``filters.py``) answers a positive ``contains`` with a needle of at least 3
characters from the index: a phrase of overlapping trigrams at consecutive positions is exactly
a substring, and the tokenizer folds nothing, so ``name : "needle"`` holds exactly the rows of
``instr(name, needle) > 0``, and ``name_upper : "NEEDLE"`` with ``upper(needle)`` those of
``instr(upper(name), upper(needle)) > 0`` (``icontains``), without reading the rows. The one
exception: the tokenizer skips NUL characters, so a text with a NUL could match across it; such
rows carry the ``nul`` flag, are left out of the index answer and checked with the plain test
instead. An oracle test holds the index answers equal to the plain scan's. Shorter needles, and
negated ones, stay plain scans.

The needle reaches FTS5 as one bound parameter, made a phrase in SQL (``'"' || replace(?, '"',
'""') || '"'``), so FTS5 syntax in it (``*``, ``^``, ``-``, ``NEAR``, ``AND``, ``:``) is text.
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


def _values(prefix: str, column: str) -> str:
    c = f"{prefix}.{column}"
    return f"{c}, upper({c}), CASE WHEN instr(CAST({c} AS BLOB), X'00') > 0 THEN 'nul' ELSE '' END"


def ddl(table: str, column: str) -> str:
    """The view, the FTS5 table and its three triggers, exactly as written in schema.sql."""
    fts = index_name(table)
    cols = f"{column}, {column}_upper, nul"
    old = f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.rowid, {_values('old', column)});\n"
    new = f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.rowid, {_values('new', column)});\n"
    return (
        f"CREATE VIEW {fts}_source (rid, {cols}) AS SELECT t.rowid, {_values('t', column)} FROM {table} t;\n"
        f"CREATE VIRTUAL TABLE {fts} USING fts5({cols}, content='{fts}_source', content_rowid='rid',"
        f" tokenize='trigram case_sensitive 1');\n"
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} BEGIN\n    {new}END;\n"
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN\n    {old}END;\n"
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF {column} ON {table} BEGIN\n    {old}    {new}END;\n"
    )


def all_ddl() -> str:
    return "".join(ddl(t, c) for t, c in SEARCH_INDEXES.items())


def usable(needle: str) -> bool:
    """Whether the index answers this needle (ZitiQL strings hold no NUL; checked anyway)."""
    return len(needle) >= MIN_NEEDLE and "\x00" not in needle


def phrase(needle: str) -> str:
    """The FTS5 query for a needle: one quoted phrase, every character literal."""
    return '"' + needle.replace('"', '""') + '"'


def _query(table: str, folded: bool) -> tuple[str, str]:
    fts = index_name(table)
    column = SEARCH_INDEXES[table] + ("_upper" if folded else "")
    needle = "upper(?)" if folded else "?"
    return fts, f"'{column} : \"' || replace({needle}, '\"', '\"\"') || '\" NOT nul : \"nul\"'"


def condition(table: str, folded: bool, plain: str) -> str:
    """SQL over the entity alias ``t`` with two ``?`` for the needle: the rows whose text
    (``upper()`` of it when ``folded``) contains it; ``plain`` (the plain test, with the second
    ``?``) decides for the few rows whose text holds a NUL."""
    fts, query = _query(table, folded)
    return (f"(t.rowid IN (SELECT rowid FROM {fts} WHERE {fts} MATCH ({query}))"
            f" OR (t.rowid IN (SELECT rowid FROM {fts} WHERE nul MATCH '\"nul\"') AND {plain}))")


def count_sql(table: str, folded: bool, plain: str) -> str:
    """How many rows ``condition`` holds, counted in the index (two ``?`` as there)."""
    fts, query = _query(table, folded)
    return (f"SELECT (SELECT count(*) FROM {fts} WHERE {fts} MATCH ({query})) + (SELECT count(*) FROM {table} t"
            f" WHERE t.rowid IN (SELECT rowid FROM {fts} WHERE nul MATCH '\"nul\"') AND {plain})")


_DRIVE = "(t.rowid IN (SELECT rowid FROM "


def probe_variant(where: str) -> str:
    """The same condition with the index answers as a membership test (``+t.rowid``) rather
    than the rows to start from: for a page of a search that matches many rows, walking the sort
    order and stopping after the page beats sorting every match. The SQL is ours alone (values
    are parameters), so this is a plain text substitution."""
    return where.replace(_DRIVE, "(+t.rowid IN (SELECT rowid FROM ")


def rebuild(conn, table: str) -> None:
    """Re-index every row of ``table`` (after a migration, or to repair the index)."""
    fts = index_name(table)
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")


def optimize(conn, table: str) -> None:
    """Merge the index's segments into one (after a bulk load: a phrase query reads each segment)."""
    fts = index_name(table)
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
