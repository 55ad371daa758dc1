"""memwire: per-turn memory for any LLM call, without breaking the provider's prompt cache.

    from memwire import Middleware, MemoryStore
    mw = Middleware(store=MemoryStore(".memwire"), mode="contextPerTurn")
    p = mw.prepare(messages)      # p.messages for the provider, p.injection says what was added

The ways in: ``memwire.adapters.openai`` / ``.anthropic`` / ``.litellm`` (``wrap``), and
``memwire.adapters.proxy`` (``create_app``, or the ``memwire proxy`` command). The modes, as
objects: ``memwire.policies.modes``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import (
    ConfigError,
    InvalidMemoryError,
    MemoryFileError,
    MemoryNotFoundError,
    MemwireError,
    MissingDependencyError,
    NamespaceError,
    RequestFormatError,
    StoreBusyError,
    StoreUnavailableError,
    UsageError,
)

if TYPE_CHECKING:  # start-up time: these load on first use (``_LAZY`` below)
    from ._config_model import Config
    from .memory._model import Hit, Memory
    from .memory._store import MemoryStore
    from .middleware._core import Injection, Middleware, Prepared

# Loaded on first use (PEP 562), so that `import memwire` and `memwire --help` stay light: the
# middleware, the store and the pydantic Config model load only for the program that uses them.
_LAZY = {
    "Middleware": "middleware._core",
    "Injection": "middleware._core",
    "Prepared": "middleware._core",
    "MemoryStore": "memory._store",
    "Memory": "memory._model",
    "Hit": "memory._model",
    "Config": "_config_model",
}

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Hit",
    "Injection",
    "InvalidMemoryError",
    "Memory",
    "MemoryFileError",
    "MemoryNotFoundError",
    "MemoryStore",
    "MemwireError",
    "Middleware",
    "MissingDependencyError",
    "NamespaceError",
    "Prepared",
    "RequestFormatError",
    "StoreBusyError",
    "StoreUnavailableError",
    "UsageError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
