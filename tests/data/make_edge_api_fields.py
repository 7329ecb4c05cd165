"""Writes ``edge_api_fields.json`` beside this script: the upstream facts the CRUD contract test
(tests/api/test_crud_contract.py) checks detail responses against, so the suite needs nothing
from outside the repository.

Source: ``openziti-edge-api.md``, our reference notes on the OpenZiti edge management API
(openziti/edge-api v0.26.38): per operation a table row ``| METHOD | `path` | ... | status |
response |`` and per definition a ``### name`` heading (``### fooList: [fooDetail]`` for a list of
items) followed by ``- field*: type`` lines (``*``: required; ``(nullable)`` in the type).

Kept, and nothing else (no prose):

* ``listItems``: management list path (``identities``) -> the definition of one listed item
  (``identityDetail``), from the path's ``GET`` row, its list envelope and the envelope's
  ``data`` list type;
* ``definitions``: for each of those item definitions, field -> ``[type, required, nullable]``.

Run it again when the reference moves to a new upstream version::

    python tests/data/make_edge_api_fields.py PATH/TO/openziti-edge-api.md
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).with_name("edge_api_fields.json")


def extract(text: str) -> dict:
    mgmt_ops, rest = text.split("## Client API operations", 1)
    mgmt_defs = rest.split("## Management API definitions", 1)[1].split("## Client API definitions", 1)[0]
    fields: dict[str, dict[str, list]] = {}
    aliases: dict[str, str] = {}      # list definition -> item definition
    current = None
    for line in mgmt_defs.splitlines():
        m = re.match(r"^### (\w+)(?:: \[(\w+)\])?", line)
        if m:
            current = m.group(1)
            fields[current] = {}
            if m.group(2):
                aliases[current] = m.group(2)
            continue
        m = re.match(r"^- (\S+?)(\*)?: (.*)$", line)
        if m and current:
            kind = m.group(3).strip()
            fields[current][m.group(1)] = [kind.replace("(nullable)", "").strip(), bool(m.group(2)),
                                           "nullable" in kind]
    items: dict[str, str] = {}
    for line in mgmt_ops.splitlines():
        m = re.match(r"^\| GET \| `/([a-z-]+)` \|.*\| (\w+Envelope)", line)
        if not m or "data" not in fields.get(m.group(2), {}):
            continue
        data_type = fields[m.group(2)]["data"][0]
        if data_type in aliases:
            items[m.group(1)] = aliases[data_type]
    return {
        "source": "openziti-edge-api.md (openziti/edge-api v0.26.38), by tests/data/make_edge_api_fields.py",
        "listItems": dict(sorted(items.items())),
        "definitions": {name: fields[name] for name in sorted(set(items.values())) if name in fields},
    }


def dump(data: dict) -> str:
    """JSON with one field a line: small diffs when the reference changes."""
    defs = ",\n".join(
        f" {json.dumps(name)}: {{\n" + ",\n".join(f"  {json.dumps(f)}: {json.dumps(v)}" for f, v in fields.items())
        + "\n }" for name, fields in data["definitions"].items())
    return (f'{{"source": {json.dumps(data["source"])},\n"listItems": {json.dumps(data["listItems"], indent=1)},\n'
            f'"definitions": {{\n{defs}\n}}}}\n')


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/data/make_edge_api_fields.py PATH/TO/openziti-edge-api.md")
    source = Path(sys.argv[1])
    OUT.write_text(dump(extract(source.read_text())))
    print(f"wrote {OUT}")
