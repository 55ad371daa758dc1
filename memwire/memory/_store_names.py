"""Names a store checks: namespaces (one safe path component, compared case-folded), event logs,
and memory ids given by a unique prefix. Both backends use them (``_store``, ``postgres._store``)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from pathlib import Path

from .. import _paths
from .._errors import MemoryFileError, MemoryNotFoundError, NamespaceError

__all__ = [
    "EVENT_LOGS",
    "MIN_ID_PREFIX",
    "event_log_name",
    "fold_namespace",
    "full_id",
    "namespace_dirs",
    "validate_namespace",
]

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")  # fullmatch: "$" would let a trailing newline in
MIN_ID_PREFIX = 4  # forget/pin/get accept a unique prefix of an id this long or longer
#: the event logs a store keeps (``append_event``): capture events, telemetry
EVENT_LOGS = ("captured", "telemetry", "requests")  # requests: the proxy's per-request records


def validate_namespace(name: str) -> str:
    """A namespace is one safe path component: letters, digits, ``._@-``, at most 128 chars."""
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name) or name in (".", "..") or ".." in name:
        shown = repr(name)[:80]
        raise NamespaceError(
            f"invalid namespace {shown}: use 1-128 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit (no '/', '..', NUL)"
        )
    return name


def fold_namespace(name: str) -> str:
    """How namespaces compare: NFKC case-folded (``tenA``, ``TENA`` and ``ｔｅｎａ`` are one), so
    that no two tenants' directories can be one directory on a case-insensitive filesystem."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def _case_twin(root: Path, name: str) -> str | None:
    """An existing namespace of ``root``'s tree spelt otherwise than ``name`` but equal folded."""
    folded = fold_namespace(name)
    try:
        with _paths.scandir(root, root / "namespaces") as it:
            return next((e.name for e in it if e.name != name and fold_namespace(e.name) == folded), None)
    except (OSError, MemoryFileError):
        return None


def namespace_dirs(root: Path) -> list[str]:
    """The namespaces of ``root``'s tree: the directories of ``root/namespaces`` (none reached
    through a symlink); none when there is none yet or it is not memwire's to read."""
    try:
        with _paths.scandir(root, root / "namespaces") as it:
            return [e.name for e in it if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError, MemoryFileError):
        return []


def event_log_name(log: str) -> str:
    """``log`` if it names one of the store's event logs (``EVENT_LOGS``), else an error."""
    if log not in EVENT_LOGS:
        raise ValueError(f"unknown event log {log!r}; one of {', '.join(EVENT_LOGS)}")
    return log


def full_id(ids: Collection[str], mid: str) -> str:
    """``mid`` itself, or the one id of ``ids`` it is a prefix of (ids of older versions were 10
    characters: prefixes of today's, so they keep working)."""
    if mid in ids or len(mid) < MIN_ID_PREFIX:
        return mid
    found = [k for k in ids if k.startswith(mid)]
    if len(found) > 1:
        raise MemoryNotFoundError(f"id prefix {mid!r} matches {len(found)} memories "
                                  f"({', '.join(sorted(found)[:3])}, ...); give more of the id")
    return found[0] if found else mid
