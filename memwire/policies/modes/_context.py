"""``contextPerTurn``: the turn's block in a hidden message right before the latest user message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...middleware._render import Block
from ...middleware._replay import Replay
from ...middleware._session import LRU, Memo
from ._base import Mode, Placed, Plan, Skip, Turn, check_choice, check_int

if TYPE_CHECKING:
    from ..._config import Config

HISTORIES = ("replay", "drop")
PLACEMENTS = ("message", "merge")


class ContextPerTurn(Mode):
    """Retrieved every turn; the system prompt and the history before the insertion point stay
    byte-stable. ``history``: how earlier turns' blocks are kept — ``replay`` puts each back,
    byte-identical, at its place (every request extends the previous one; see ``_replay``),
    ``drop`` leaves them out. ``placement="merge"`` makes the block the leading content part of
    the latest user message instead of a message of its own."""

    name = "contextPerTurn"

    def __init__(self, history: str = "replay", max_tokens: int = 600, replay_max_tokens: int = 4000,
                 placement: str = "message", memo_size: int = 1024) -> None:
        self.history = check_choice(self.name, "history", history, HISTORIES)
        self.max_tokens = check_int(self.name, "max_tokens", max_tokens, 16, 100_000)
        self.placement = check_choice(self.name, "placement", placement, PLACEMENTS)
        memo_size = check_int(self.name, "memo_size", memo_size, 1, 10**9)
        self._turns: LRU[tuple[str, ...], Block] = LRU(memo_size)
        replay_max_tokens = check_int(self.name, "replay_max_tokens", replay_max_tokens, 0, 1_000_000)
        self.replay = Replay(replay_max_tokens, memo_size) if self.history == "replay" else None

    @classmethod
    def from_config(cls, config: "Config") -> "ContextPerTurn":
        return cls(config.history, config.max_tokens, config.replay_max_tokens, config.placement, config.memo_size)

    def plan(self, turn: Turn) -> Plan | Skip:
        def search(fresh: bool, exclude: frozenset[str] = frozenset()) -> Block:
            return turn.search(fresh, self.max_tokens, exclude)

        # a stateful Responses call sends only the new input (the provider keeps the history and the
        # blocks sent with it): nothing to replay, and no ledger per call
        if self.replay is None or turn.view.stateful:
            if turn.gate.skip:
                return Skip("gate")
            return Plan(Memo(self._turns, turn.turn_key(), turn.store), search)
        # with replay a closer still gets the earlier blocks back (its own search says "gate")
        keys = self.replay.keys(turn)
        return Plan(self.replay.memo(turn, keys), self.replay.compute(turn, keys, search), context=keys)

    def place(self, turn: Turn, plan: Plan, block: Block) -> Placed:
        view, fmt = turn.view, turn.fmt
        assert view.latest_user is not None
        earlier = self.replay.earlier(turn, plan.context, block) if self.replay and plan.context is not None else {}
        new = bool(block.ids) and not block.skipped
        blocks = {**earlier, view.latest_user: block.text} if new else earlier
        if not blocks:
            return Placed(dict(turn.body))
        merge = self.placement == "merge"
        body = fmt.insert_blocks(turn.body, blocks, turn.role, merge)
        if not new:
            return Placed(body, replayed=len(earlier))
        position = view.latest_user + fmt.added_before(view.items, earlier, view.latest_user, merge)
        placement = "message" if not merge and fmt.adds_item(view.items, view.latest_user) else "merge"
        return Placed(body, position, placement, len(earlier))
