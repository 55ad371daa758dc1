"""The error tree. Every error memwire raises on purpose is a `MemwireError`."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "InvalidMemoryError",
    "MemoryFileError",
    "MemoryNotFoundError",
    "MemwireError",
    "MissingDependencyError",
    "NamespaceError",
    "RequestFormatError",
    "StoreBusyError",
    "StoreUnavailableError",
    "UsageError",
]


class MemwireError(Exception):
    """Base class of every error memwire raises on purpose."""


class ConfigError(MemwireError, ValueError):
    """A configuration key or value is invalid; the message names it."""


class UsageError(MemwireError, TypeError):
    """memwire was handed an object it cannot work with (``wrap()`` of something that is not an SDK
    client, a client wrapped twice); the message says what it expected."""


class RequestFormatError(MemwireError, ValueError):
    """A request body or message list is not of the expected shape; the message names the problem."""


class MemoryFileError(MemwireError):
    """A memory file or directory cannot be used as it is on disk; carries the path and, where known,
    the line. Raised when memwire cannot go on (the memory directory is a file, a write would go
    through a symlink); collected, not raised, for problems it can read past (``MemoryStore.problems``:
    bad UTF-8, an empty bullet), so one bad line never hides the rest of the memory."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")


class MemoryNotFoundError(MemwireError, KeyError):
    """No memory has the given id."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "memory not found"


class NamespaceError(MemwireError, ValueError):
    """A namespace name is not allowed (path traversal, absolute path, NUL byte, too long)."""


class InvalidMemoryError(MemwireError, ValueError):
    """A memory's text, tags or topic cannot be stored as given; the message names the problem."""


class StoreBusyError(MemwireError):
    """The store is being re-read or written by another thread and the caller asked not to wait."""


class StoreUnavailableError(MemwireError):
    """The memory store's database cannot be used now (unreachable, timed out, or its schema is
    newer than this memwire); the message names the database. Reads on the LLM call path never
    raise it (they fail open); writes do."""


class MissingDependencyError(MemwireError, ModuleNotFoundError):
    """A part of memwire needs a package that is not installed (an optional extra); the message
    says what to install."""
