"""Logging of a serving controller: text (uvicorn's default look) or one JSON object a line.

With ``--log-format json`` every record is a JSON line (``time``, ``level``, ``logger``,
``message``, and ``requestId`` when it happened inside a request), uvicorn's own records
included, and every request adds an access record (logger ``ziti_lite.access``: method, path
without its query string, status, duration, client address). A request's id is the
``requestId`` of its error envelope too, so a client's error report finds its log lines.
Nothing secret is logged: no headers (session tokens), no query strings (enrollment tokens),
no bodies.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import sys

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("ziti_lite_request_id", default=None)

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = REQUEST_ID.get()
        if rid:
            out["requestId"] = rid
        for k, v in vars(record).items():   # extra={...} fields
            if k not in _STANDARD and not k.startswith("_") and k not in out:
                out[k] = v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure(log_format: str, level: str) -> None:
    """Install the JSON handler on the root logger (uvicorn's loggers propagate to it)."""
    if log_format != "json":
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "ziti_lite"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
        lg.setLevel(level.upper())


access = logging.getLogger("ziti_lite.access")
