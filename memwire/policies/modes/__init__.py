"""The modes: where memory goes in a request, what is memoized, how earlier blocks are kept.

Each mode is one class behind one protocol (:class:`Mode`): ``plan(turn)`` says what a request
needs (the memo its block is kept in and how to compute the block) or why it is left unchanged;
``place(turn, plan, block)`` returns the body with the block in it. The middleware only
orchestrates: it views the request, runs the gate, asks the mode, retrieves, and places.

To add a mode: write its class in a new module of this package, add one line to ``MODES`` and its
name to ``memwire._mode_names.MODES`` (a config names the mode and imports none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._errors import ConfigError
from ..._mode_names import MODES as NAMES
from ..._mode_names import use_registry
from ._base import Mode, Placed, Plan, Skip, Turn, TurnMemo
from ._context import ContextPerTurn
from ._render import Block
from ._startup import Startup
from ._system_prompt import SystemPromptPerTurn

if TYPE_CHECKING:  # start-up time: the config model is pydantic's, loaded on the first config built
    from ..._config_model import Config

__all__ = [
    "MODES",
    "Block",
    "ContextPerTurn",
    "Mode",
    "Placed",
    "Plan",
    "Skip",
    "Startup",
    "SystemPromptPerTurn",
    "Turn",
    "TurnMemo",
    "mode_from_config",
]

# The registry: mode name -> class.
MODES: dict[str, type[Mode]] = {
    "startup": Startup,
    "systemPromptPerTurn": SystemPromptPerTurn,
    "contextPerTurn": ContextPerTurn,
}
if tuple(MODES) != NAMES:  # a config names a mode by name (``_mode_names``), and imports none
    raise ConfigError(f"memwire._mode_names.MODES {NAMES} does not list the registry's modes {tuple(MODES)}")
use_registry(MODES)  # a config's mode is one of these names, a mode registered later too


def mode_from_config(name: str, config: Config) -> Mode:
    """The mode ``name`` (as normalized by the config) with the settings of ``config``."""
    return MODES[name].from_config(config)
