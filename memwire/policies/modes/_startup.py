"""``startup``: one block for the whole session, right after the leading system message(s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lru import LRU
from ._base import Mode, Placed, Plan, Skip, Turn, check_int
from ._memo import Memo
from ._render import Block

if TYPE_CHECKING:  # start-up time: the config model is pydantic's, loaded on the first config built
    from ..._config_model import Config


class Startup(Mode):
    """The session's profile block (pinned first, then by category and score; see ``_profile``),
    computed once per session with no query, the same bytes on every request of the session: the
    whole prefix stays cacheable."""

    name = "startup"

    def __init__(self, max_tokens: int = 1200, memo_size: int = 1024, shared_memos: bool = False) -> None:
        self.max_tokens = check_int(self.name, "max_tokens", max_tokens, 16, 100_000)
        self.shared = bool(shared_memos)  # the session block in the session's ledger file (``Memo``)
        self._sessions: LRU[tuple[str, ...], Block] = LRU(check_int(self.name, "memo_size", memo_size, 1, 10**9))

    @classmethod
    def from_config(cls, config: Config) -> Startup:
        return cls(config.startup_max_tokens, config.memo_size, config.shared_memos)

    def plan(self, turn: Turn) -> Plan | Skip:
        if turn.view.stateful:  # the provider keeps the history: the block went in with the first call
            return Skip("stateful")
        memo = Memo(self._sessions, (turn.namespace, turn.session), turn.store, "startup" if self.shared else None)
        return Plan(memo, lambda fresh: turn.profile(fresh, self.max_tokens))

    def place(self, turn: Turn, plan: Plan, block: Block) -> Placed:
        if block.skipped or not block.ids:
            return Placed(dict(turn.body))
        position = turn.view.leading_system
        return Placed(turn.fmt.insert(turn.body, position, block.text, turn.role), position, "message")
