"""``systemPromptPerTurn``: the turn's block appended to the system prompt (the cache-breaking baseline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lru import LRU
from ._base import Mode, Placed, Plan, Skip, Turn, check_int
from ._memo import Memo
from ._render import Block

if TYPE_CHECKING:  # start-up time: the config model is pydantic's, loaded on the first config built
    from ..._config_model import Config


class SystemPromptPerTurn(Mode):
    """Retrieved every turn; the system prompt changes each turn, so the provider's cache is lost.
    Kept for setups that require memory in the system prompt, and as the baseline."""

    name = "systemPromptPerTurn"

    def __init__(self, max_tokens: int = 600, memo_size: int = 1024, shared_memos: bool = False) -> None:
        self.max_tokens = check_int(self.name, "max_tokens", max_tokens, 16, 100_000)
        self.shared = bool(shared_memos)  # the turn memo in the session's ledger file (``Memo``)
        self._turns: LRU[tuple[str, ...], Block] = LRU(check_int(self.name, "memo_size", memo_size, 1, 10**9))

    @classmethod
    def from_config(cls, config: Config) -> SystemPromptPerTurn:
        return cls(config.max_tokens, config.memo_size, config.shared_memos)

    def plan(self, turn: Turn) -> Plan | Skip:
        if turn.gate.skip:
            return Skip("gate")
        # a stateful call's memo stays in this process: each such call would be a session of its own
        shared = self.shared and not turn.view.stateful
        memo = Memo(self._turns, turn.turn_key(), turn.store, "system" if shared else None)
        return Plan(memo, lambda fresh: turn.search(fresh, self.max_tokens))

    def place(self, turn: Turn, plan: Plan, block: Block) -> Placed:
        if block.skipped or not block.ids:
            return Placed(dict(turn.body))
        return Placed(turn.fmt.append_system(turn.body, block.text), None, "system")
