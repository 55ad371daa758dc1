"""A small thread-safe LRU map: the bounded memos, views and ledgers of a long-running process."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LRU"]

K = TypeVar("K")
V = TypeVar("V")


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

    def setdefault(self, key: K, value: V, replace: Callable[[V], bool] | None = None) -> V:
        """Store ``value`` unless a value is already there (that ``replace`` does not accept);
        return the stored one (first writer wins)."""
        with self._lock:
            if key in self._data and not (replace is not None and replace(self._data[key])):
                self._data.move_to_end(key)
                return self._data[key]
            self._data[key] = value
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
            return value

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)

    def values(self) -> list[V]:
        with self._lock:
            return list(self._data.values())

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
