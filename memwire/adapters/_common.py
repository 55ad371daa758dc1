"""Helpers shared by the adapters: per-call settings (keyword arguments, headers), SDK objects,
fail-open logging."""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from .._json import dump_json
from ..memory._store import fold_namespace

__all__ = [
    "NAMESPACE_HEADER",
    "NAMESPACE_KW",
    "SESSION_HEADER",
    "SESSION_KW",
    "Failures",
    "as_list",
    "dump_json",
    "error_id",
    "fail_open",
    "fold_namespace",
    "public_message",
    "readable",
    "restore",
    "split_kwargs",
]

log = logging.getLogger("memwire")

SESSION_KW = "memwire_session"
NAMESPACE_KW = "memwire_namespace"
# the SDK adapters take them as request headers (the ones the proxy reads): ``extra_headers={SESSION_HEADER: ...}``
SESSION_HEADER = "x-memwire-session"
NAMESPACE_HEADER = "x-memwire-namespace"


def split_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """Take memwire's own keyword arguments out of a call's kwargs (a new dict; the caller's is kept).

    Returns (kwargs for the real call, session, namespace)."""
    call = dict(kwargs)
    session = call.pop(SESSION_KW, None)
    namespace = call.pop(NAMESPACE_KW, None)
    return call, session, namespace


def as_list(call: dict[str, Any], key: str) -> None:
    """SDKs accept any iterable of messages; the middleware reads lists. A one-shot iterator is
    materialized here so the same list serves memwire and, on fail-open, the real call."""
    value = call.get(key)
    if value is not None and not isinstance(value, (list, str, bytes, Mapping)) and isinstance(value, Iterable):
        call[key] = list(value)


def readable(call: dict[str, Any], key: str) -> tuple[dict[str, Any], dict[int, Any]]:
    """``call`` with SDK objects in ``call[key]`` (a litellm ``Message`` passed back, ...) shown as
    dicts for memwire to read, and a map from each such dict back to its object (see :func:`restore`)."""
    items = call.get(key)
    if not isinstance(items, list) or not any(hasattr(m, "model_dump") and not isinstance(m, Mapping) for m in items):
        return call, {}
    back: dict[int, Any] = {}
    shown = []
    for m in items:
        if hasattr(m, "model_dump") and not isinstance(m, Mapping):
            d = m.model_dump(exclude_none=True)
            back[id(d)] = m
            m = d
        shown.append(m)
    return {**call, key: shown}, back


def restore(body: dict[str, Any], key: str, back: dict[int, Any]) -> dict[str, Any]:
    """Put the caller's own objects back where memwire left the dicts it read them as untouched
    (the core shares untouched messages), so the provider layer sees exactly what it was given."""
    items = body.get(key)
    if not back or not isinstance(items, list):
        return body
    return {**body, key: [back.get(id(m), m) for m in items]}


def fail_open(where: str, exc: BaseException) -> None:
    """One warning per failed call; the request then goes out unchanged (DESIGN rule 6)."""
    log.warning("memwire: %s failed (%s: %s); request sent unchanged", where, type(exc).__name__, exc)


WRONG_KEY = "missing or wrong x-memwire-key header"


def error_id() -> str:
    """A short id for one failure: the client gets it in place of the details (paths, database
    URLs), the log line that has them carries it too."""
    return "mw-" + secrets.token_hex(4)




# an absolute path (POSIX, or a Windows drive's) or a URL, where a message names one
_WHERE = re.compile(r"""(?<![\w.~-])(?:[A-Za-z][A-Za-z0-9+.-]*://[^\s'"]+|(?:[A-Za-z]:)?[\\/](?=[^\s'"])[^\s'",;]*)""")

# "... in PATH" up to the end of the clause: a path may hold spaces
_IN_PATH = re.compile(r"""\s+in\s+(?:[A-Za-z]:)?[\\/][^;'"]*?(?=;|$)""")


def public_message(exc: BaseException) -> str:
    """The message of an error that is the client's (an unknown id, a text that cannot be stored),
    without the server's paths or addresses: "no memory with id 'x' in /srv/mem" becomes "no
    memory with id 'x' in this namespace"."""
    text = _IN_PATH.sub(" in this namespace", str(exc))
    return _WHERE.sub("(a server path)", text)


class Failures:
    """A memory store's failures as a server tells its clients (the memory API, the page, the MCP
    server): the client gets an error id, never the details (a path, a database's address); the
    log line that has them carries the id. A failure is logged once: the same one again (its kind:
    the exception's type and errno) before a call succeeds answers with the same id and is not
    logged again, so a database outage or a full disk is one line, not one per write; the first
    success after it logs, once, that it is over."""

    def __init__(self, where: str, logger: logging.Logger = log) -> None:
        self.where, self.log = where, logger
        self._open: tuple[str, str] | None = None  # (kind, id) of the failure going on
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> str:
        """The error id for ``exc``; logged unless it is the failure going on."""
        kind = type(exc).__name__ + (f"/{exc.errno}" if isinstance(exc, OSError) else "")
        with self._lock:
            if self._open is not None and self._open[0] == kind:
                return self._open[1]
            eid = error_id()
            self._open = (kind, eid)
        self.log.warning("memwire: %s: the memory store cannot be used (%s: %s) [error %s]; the same failure is "
                         "not logged again until the store works", self.where, type(exc).__name__, exc, eid)
        return eid

    def ok(self) -> None:
        """A call succeeded: a failure going on is over."""
        if self._open is None:  # the usual case: no lock
            return
        with self._lock:
            over, self._open = self._open, None
        if over is not None:
            self.log.warning("memwire: %s: the memory store works again (error %s is over)", self.where, over[1])
