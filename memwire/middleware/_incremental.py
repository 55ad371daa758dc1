"""Reading only what is new: a request costs about the same at message 20 and at message 1,000.

A conversation grows by appending: each request of a session repeats the previous one and adds a
few messages. Per conversation this module keeps a copy of what a view reads of the previous
request's items (their ``role`` and ``content``; Responses also ``type``: nothing else of an item
changes what ``Format.view`` says of it) and their ``Scan`` (the per-item facts: validated roles,
the human user messages, the system texts, and with replay the ledger keys). The next request's
values are taken and compared with that copy in C (``map(dict.get)``, list ``==``: no Python per
item); the facts of the common prefix are reused, only the items after it are read (validated,
classified, hashed). An edited, removed or reordered earlier message ends the common prefix there,
and everything after it is read again: the view is always exactly what reading the whole request
gives (``tests/middleware/test_incremental.py``). Another client, or another worker process that
saw other requests of the conversation, only makes the common prefix shorter.

Values are compared, never object identity: the proxy parses every request afresh, and an SDK
caller may change a message in place between calls (hence the copy). Numbers in the copy compare
by type and by their JSON form too (``1`` and ``True``, ``1.0`` and ``1`` are ``==`` but not the
same identity text).

Memory: per conversation, the previous request's roles and contents (their strings shared with
that request), for the last :data:`CONVERSATIONS` conversations.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import ne
from typing import Any

from .._lru import LRU
from ._formats import Format, Scan, View

__all__ = ["CONVERSATIONS", "Views"]

CONVERSATIONS = 256  # conversations whose previous request is kept


@dataclass(frozen=True)
class _Previous:
    """A conversation's previous request: what a view reads of its items (one column per key of
    ``Format.read_keys``, copied) and their scan. The columns may hold more items than it had (a
    later request appended in place): its own are the first ``length``."""

    columns: list[list[Any]]
    length: int
    scan: Scan


class Views:
    """``Format.view`` that reads only the items not seen in the conversation's previous request."""

    def __init__(self, maxsize: int = CONVERSATIONS) -> None:
        self._previous: LRU[Hashable, _Previous] = LRU(maxsize)
        self._lock = threading.Lock()

    def view(self, fmt: Format, body: Mapping[str, Any], hint: str = "") -> View:
        """The view of ``body`` (raises ``RequestFormatError`` as ``Format.view`` does). ``hint``:
        what the caller says of the session (``session_hint``), to keep conversations apart."""
        items = fmt.items(body)
        key = (fmt.api, hint, _opening(fmt, items))
        columns = _columns(items, fmt.read_keys)
        previous = self._previous.get(key)
        if previous is None:
            scan = fmt.scan(items)
            kept = [[_copy(v) for v in column] for column in columns]
        else:
            same = _common_prefix(columns, previous.columns, previous.length)
            scan = fmt.scan(items, previous.scan.prefix(same))
            kept = self._extend(previous, same, [[_copy(v) for v in column[same:]] for column in columns])
        self._previous.setdefault(key, _Previous(kept, len(items), scan), replace=lambda _: True)
        return fmt.view(body, scan)

    def _extend(self, previous: _Previous, same: int, tails: list[list[Any]]) -> list[list[Any]]:
        """The previous request's first ``same`` column values, then ``tails``: appended in place
        when the previous request was the last to write them (the common case: no copy of the
        whole conversation), else a copy."""
        with self._lock:
            if same == previous.length == len(previous.columns[0]):
                for column, tail in zip(previous.columns, tails, strict=True):  # one column per read key
                    column += tail
                return previous.columns
        return [column[:same] + tail for column, tail in zip(previous.columns, tails, strict=True)]


def _opening(fmt: Format, items: list[Any]) -> tuple[Any, ...]:
    """How a conversation opens (its first two items' roles and texts): conversations of one
    session hint that open differently (a harness's side requests, subagents) keep their own entry."""
    out = []
    for item in items[:2]:
        if isinstance(item, Mapping):
            role = item.get("role")
            out.append((role if isinstance(role, str) else None, fmt.text(item)))
    return tuple(out)


_NOT_AN_OBJECT = object()  # what a column holds for an item that is not a JSON object: equal to nothing


def _columns(items: list[Any], keys: tuple[str, ...]) -> list[list[Any]]:
    """For each key a view reads (``Format.read_keys``), its value in every item: only these decide
    what a view says of an item, and taking them is a loop in C when the items are dicts (a dict
    subclass is read as a dict: ``dict.get``)."""
    try:
        return [list(map(dict.get, items, repeat(key))) for key in keys]
    except TypeError:  # an item that is not a dict
        return [[item.get(key) if isinstance(item, Mapping) else _NOT_AN_OBJECT for item in items] for key in keys]


def _common_prefix(new: list[list[Any]], old: list[list[Any]], length: int) -> int:
    """How many leading items have the same values in the ``new`` columns as in the first
    ``length`` of the ``old`` ones."""
    n = min(len(new[0]), length)
    if all(a[:n] == b[:n] for a, b in zip(new, old, strict=True)):  # the common case, in C: the conversation only grew
        return n
    # else each column's first difference, found in C too (an agent's sliding window drops turns)
    return min(next(compress(count(), map(ne, a[:n], b[:n])), n) for a, b in zip(new, old, strict=True))


class _Exact:
    """A number in a copy: equal only to a number of the same type and JSON form (``==`` alone
    says ``1 == 1.0 == True``; a message's identity text does not)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self.value) and repr(other) == repr(self.value)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


def _copy(value: Any) -> Any:
    """A copy of a JSON-like value to compare a later request with: containers copied (the caller
    may change its own in place), strings shared (short ones interned: roles, types), numbers
    wrapped (``_Exact``)."""
    t = type(value)
    if t is str:
        return sys.intern(value) if len(value) <= 16 else value
    if value is None:
        return value
    if t is dict or isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if t is list:
        return [_copy(v) for v in value]
    if t is tuple:
        return tuple(_copy(v) for v in value)
    if t in (int, float, bool):
        return _Exact(value)
    return value  # another kind of object: compared by its own ==
