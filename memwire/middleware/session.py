"""Session keys and the bounded memo that makes every request of one turn get identical bytes."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["session_key", "turn_key", "LRU"]

K = TypeVar("K")
V = TypeVar("V")


def _h(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def session_key(given: str | None, system_text: str, first_user_text: str) -> str:
    """The caller's session id, or a hash of the system prompt and the first user message."""
    if given:
        return str(given)
    return "auto:" + _h(system_text, first_user_text)


def turn_key(index: int, user_text: str) -> str:
    """A turn is identified by its latest user message and its position in the conversation."""
    return f"{index}:{_h(user_text)}"


class LRU(Generic[K, V]):
    """A small thread-safe LRU map."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def setdefault(self, key: K, value: V) -> V:
        """Store ``value`` unless a value is already there; return the stored one (first writer wins)."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
            self._data[key] = value
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
            return value

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
