"""The modes by name: what a config's ``mode`` may say.

Config is plain data that names a mode and imports none. The built-in names are here; the mode
registry (``policies.modes.MODES``) checks when it loads that it holds these names, in this order,
and hands its own keys over (:func:`use_registry`): a mode registered there later is then valid too.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import ConfigError

__all__ = ["MODES", "normalize_mode", "use_registry"]

MODES: tuple[str, ...] = ("startup", "systemPromptPerTurn", "contextPerTurn")  # the built-in modes (help texts)

_registry: Mapping[str, object] = dict.fromkeys(MODES)  # the valid names: the registry's keys once it is loaded


def use_registry(registry: Mapping[str, object]) -> None:
    """Validate mode names against ``registry`` (the mode registry, as it changes) from now on."""
    global _registry
    _registry = registry


def normalize_mode(value: str) -> str:
    """A registered mode's name (``policies/modes``), given as written or in snake_case; anything
    else names the valid ones."""
    key = str(value).strip().replace("-", "").replace("_", "").lower()
    for name in _registry:
        if name.lower() == key:
            return name
    raise ConfigError(f"unknown mode {value!r}; valid modes: {', '.join(_registry)}")
