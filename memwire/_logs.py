"""How ``memwire proxy`` logs: one setup for the command and each of its worker processes.

``text`` (the default) is one line per event for a terminal; ``json`` is one JSON object per line
for a log pipeline: ``at`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, and ``error`` with the
exception when there is one. Nothing here adds message text or credentials: memwire's log lines
carry ids, counts and times (the access log: method, path, status, memories injected, time added),
and httpcore's debug lines, which hold response headers, are kept off.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["configure_logging", "LOG_FORMATS"]

LOG_FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
               "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a test's capture, then the real one)."""

    memwire = True  # ours: a later configure_logging replaces it

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(level: str, fmt: str = "text") -> None:
    """The root logger at ``level`` in ``fmt``; httpx quieter than memwire's own access log."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "memwire", False)]:  # ours from an earlier call only:
        root.removeHandler(old)                                             # other handlers stay (pytest's)
    handler = _Stderr()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))  # one line per request is ours
    logging.getLogger("httpcore").setLevel(logging.INFO)  # its debug lines carry response headers (cookies, keys)
    for name in ("uvicorn", "uvicorn.error"):  # uvicorn's own lines in the same format
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
