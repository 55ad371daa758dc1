"""memwire: per-turn memory for any LLM call, without breaking the provider's prompt cache.

    from memwire import Middleware, MemoryStore
    mw = Middleware(store=MemoryStore(".memwire"), mode="contextPerTurn")
    p = mw.prepare(messages)      # p.messages for the provider, p.injection says what was added

The ways in: ``memwire.adapters.openai`` / ``.anthropic`` / ``.litellm`` (``wrap``), and
``memwire.adapters.proxy`` (``create_app``, or the ``memwire proxy`` command). The modes, as
objects: ``memwire.policies.modes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import (
    ConfigError,
    InvalidMemoryError,
    MemoryFileError,
    MemoryNotFoundError,
    MemwireError,
    NamespaceError,
    RequestFormatError,
    UsageError,
)
from .memory._model import Hit, Memory
from .memory._store import MemoryStore
from .middleware._core import Injection, Middleware, Prepared

if TYPE_CHECKING:
    from ._config_model import Config

__version__ = "0.1.0"

__all__ = [
    "Middleware",
    "MemoryStore",
    "Memory",
    "Hit",
    "Injection",
    "Prepared",
    "Config",
    "MemwireError",
    "ConfigError",
    "UsageError",
    "RequestFormatError",
    "MemoryFileError",
    "MemoryNotFoundError",
    "NamespaceError",
    "InvalidMemoryError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # Config is a pydantic model: loaded on first use, so that `import memwire` stays light
    if name == "Config":
        from ._config_model import Config

        return Config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
