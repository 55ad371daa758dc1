"""How ``memwire proxy`` logs: one setup for the command and each of its worker processes.

``text`` (the default) is one line per event for a terminal; ``json`` is one JSON object per line
for a log pipeline: ``at`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, and ``error`` with the
exception when there is one. Nothing here adds message text or credentials: memwire's log lines
carry ids, kinds, counts, sizes, paths and times (the access log: method, path, status, memories
injected, time added), and httpcore's debug lines, which hold response headers, are kept off.

No memory text, message text or header value is logged, at any level. An exception's message may
hold them (a refused memory quoting its text, a parser quoting a line, an upstream's error body), so
what a log line says of an exception is :func:`describe`: its type, and a detail only where the
detail is known to hold none of it (an OS error's code and file, an HTTP status, a parser's
position, a memory file's path and line). :class:`Redact` applies it to every record of memwire's
loggers (and, under ``configure_logging``, of every logger: uvicorn's tracebacks too): an exception
passed as an argument is logged as ``describe(exc)``, a traceback keeps its frames and loses its
messages.
"""

from __future__ import annotations

import errno as _errno
import json
import logging
import os
import sys
import time
import traceback
from typing import Any

__all__ = ["LOG_FORMATS", "REDACT", "Redact", "configure_logging", "describe"]

LOG_FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


# memwire's own errors whose messages are memwire's phrases about paths, databases and packages
_SAFE_MESSAGES = ("StoreUnavailableError", "StoreBusyError", "MissingDependencyError", "MemoryFileError", "ConfigError")


def describe(exc: BaseException) -> str:
    """What a log line may say of ``exc``: ``Type``, or ``Type: detail`` where the detail holds no
    memory, message or header text (see the module)."""
    name = type(exc).__name__
    detail = _detail(exc)
    return f"{name}: {detail}" if detail else name


def _detail(exc: BaseException) -> str:
    if isinstance(exc, OSError) and isinstance(exc.errno, int):
        code = _errno.errorcode.get(exc.errno, str(exc.errno))
        # a bytes path as the path it names (not "b'...'")
        where = "".join(f" {os.fsdecode(f)}" for f in (exc.filename, exc.filename2)
                        if isinstance(f, (str, bytes, os.PathLike)))
        return f"{code} ({os.strerror(exc.errno)}){where}"
    if isinstance(exc, json.JSONDecodeError):  # the parser's phrase and where: never the document
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return f"{exc.encoding} at byte {exc.start}: {exc.reason}"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):  # httpx.HTTPStatusError: the status, never the body or the URL's query
        return f"status {status}"
    if any(c.__name__ in _SAFE_MESSAGES and c.__module__.startswith("memwire") for c in type(exc).__mro__):
        return str(exc)
    return ""


def _traceback(exc: BaseException) -> str:
    """``exc``'s traceback, and its causes', with each exception as :func:`describe` says it."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ if e.__cause__ is not None else (None if e.__suppress_context__ else e.__context__)
    parts = []
    for e in reversed(chain):
        frames = "".join(traceback.format_list(traceback.extract_tb(e.__traceback__))) if e.__traceback__ else ""
        parts.append(f"Traceback (most recent call last):\n{frames}{describe(e)}")
    return "\n\nwhich led to:\n\n".join(parts)


class Redact(logging.Filter):
    """Exceptions in a record's arguments become ``describe(exc)``; its traceback is
    ``_traceback`` (set as ``exc_text``, which formatters print instead of formatting their own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            if any(isinstance(a, BaseException) for a in args):
                record.args = tuple(_said(args, i) for i in range(len(args)))
        elif isinstance(args, dict) and any(isinstance(a, BaseException) for a in args.values()):
            record.args = {k: describe(a) if isinstance(a, BaseException) else a for k, a in args.items()}
        if record.exc_info and record.exc_info[1] is not None and not getattr(record, "memwire_redacted", False):
            record.exc_text = _traceback(record.exc_info[1])
            record.memwire_redacted = True
        return True


def _said(args: tuple[Any, ...], i: int) -> Any:
    """Argument ``i`` as logged: an exception as ``describe`` says it, or only its detail after its
    own type name (the common ``"(%s: %s)", type(exc).__name__, exc``)."""
    a = args[i]
    if not isinstance(a, BaseException):
        return a
    if i and args[i - 1] == type(a).__name__:
        return _detail(a) or "details not logged"
    return describe(a)


REDACT = Redact()
for _name in ("memwire", "memwire.proxy"):  # a logger's filters see only its own records, not its children's
    logging.getLogger(_name).addFilter(REDACT)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
               "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        if record.exc_info or record.exc_text:
            out["error"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(out, ensure_ascii=False)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a test's capture, then the real one)."""

    memwire = True  # ours: a later configure_logging replaces it

    @property
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
    handler.addFilter(REDACT)  # every logger's records: uvicorn's and the libraries' tracebacks too
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))  # one line per request is ours
    logging.getLogger("httpcore").setLevel(logging.INFO)  # its debug lines carry response headers (cookies, keys)
    for name in ("uvicorn", "uvicorn.error"):  # uvicorn's own lines in the same format
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
