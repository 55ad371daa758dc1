"""The public surface (DESIGN.md "Public surface"): what each public module exports, and nothing
else; implementation modules are private (a leading underscore)."""

from __future__ import annotations

import importlib
import pkgutil

import memwire

PUBLIC = {
    "memwire": {"Middleware", "MemoryStore", "Memory", "Hit", "Injection", "Prepared", "Config", "MemwireError",
                "ConfigError", "UsageError", "RequestFormatError", "MemoryFileError", "MemoryNotFoundError",
                "NamespaceError", "InvalidMemoryError", "StoreBusyError", "StoreUnavailableError",
                "MissingDependencyError",
                "__version__"},
    "memwire.adapters.openai": {"wrap"},
    "memwire.adapters.anthropic": {"wrap"},
    "memwire.adapters.anthropic_memory": {"MemoryTool", "AsyncMemoryTool"},
    "memwire.adapters.litellm": {"wrap", "MemwireCallback"},
    "memwire.adapters.proxy": {"create_app", "default_client"},
    "memwire.adapters.mcp": {"build_server", "run_stdio"},
    "memwire.policies.modes": {"Mode", "Turn", "Plan", "Skip", "Placed", "TurnMemo", "Block", "Startup",
                               "SystemPromptPerTurn", "ContextPerTurn", "MODES", "mode_from_config"},
    "memwire.testing": {"FakeProvider", "Reply", "ToolCall", "ErrorReply", "RecordedRequest", "ServerThread",
                        "serve_in_thread"},
}


def test_each_public_module_exports_what_design_lists() -> None:
    for name, expected in PUBLIC.items():
        module = importlib.import_module(name)
        assert set(module.__all__) == expected, name
        assert all(hasattr(module, attr) for attr in module.__all__), name


def test_every_other_module_is_private() -> None:
    public = set(PUBLIC) | {"memwire.cli", "memwire.adapters", "memwire.adapters.server", "memwire.policies", "memwire.memory",
                            "memwire.memory.postgres", "memwire.middleware",
                            # one module per wire API and their registry (docs/architecture.md: "A wire format")
                            "memwire.middleware.formats", "memwire.middleware.formats.openai_chat",
                            "memwire.middleware.formats.anthropic_messages", "memwire.middleware.formats.openai_responses"}
    for info in pkgutil.walk_packages(memwire.__path__, "memwire."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        assert info.name in public, f"{info.name} is neither private nor listed as public"


def test_every_error_is_a_memwire_error() -> None:
    errors = [getattr(memwire, n) for n in memwire.__all__ if n.endswith("Error")]
    assert errors and all(issubclass(e, memwire.MemwireError) for e in errors)


def test_every_error_memwire_raises_is_exported() -> None:
    """A caller catches what memwire raises by the name ``memwire`` exports (a PgStore write raises
    ``StoreUnavailableError``): every class of the error tree is exported, with the same object."""
    from memwire import _errors

    assert set(_errors.__all__) <= set(memwire.__all__)
    assert all(getattr(memwire, name) is getattr(_errors, name) for name in _errors.__all__)
