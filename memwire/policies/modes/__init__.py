"""The modes: where memory goes in a request, what is memoized, how earlier blocks are kept.

Each mode is one class behind one protocol (:class:`Mode`): ``plan(turn)`` says what a request
needs (the memo its block is kept in and how to compute the block) or why it is left unchanged;
``place(turn, plan, block)`` returns the body with the block in it. The middleware only
orchestrates: it views the request, runs the gate, asks the mode, retrieves, and places.

To add a mode: write its class in a new module of this package and add one line to ``MODES``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._render import Block
from ._base import Mode, Placed, Plan, Skip, Turn, TurnMemo
from ._context import ContextPerTurn
from ._startup import Startup
from ._system_prompt import SystemPromptPerTurn

if TYPE_CHECKING:
    from ..._config import Config

__all__ = ["Mode", "Turn", "Plan", "Skip", "Placed", "TurnMemo", "Block", "Startup", "SystemPromptPerTurn",
           "ContextPerTurn", "MODES", "mode_from_config"]

# The registry: mode name -> class.
MODES: dict[str, type[Mode]] = {
    "startup": Startup,
    "systemPromptPerTurn": SystemPromptPerTurn,
    "contextPerTurn": ContextPerTurn,
}


def mode_from_config(name: str, config: "Config") -> Mode:
    """The mode ``name`` (as normalized by the config) with the settings of ``config``."""
    return MODES[name].from_config(config)
