"""``contextPerTurn``: the turn's block in a hidden message right before the latest user message,
and with ``profile`` the session's profile block right after the system prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..._lru import LRU
from ._base import Mode, Placed, Plan, Skip, Turn, TurnMemo, check_choice, check_int
from ._memo import Memo
from ._render import Block
from ._replay import Replay, Search

if TYPE_CHECKING:  # start-up time: the config model is pydantic's, loaded on the first config built
    from ..._config_model import Config

HISTORIES = ("replay", "drop")
PLACEMENTS = ("message", "merge")


class ContextPerTurn(Mode):
    """Retrieved every turn; the system prompt and the history before the insertion point stay
    byte-stable. ``history``: how earlier turns' blocks are kept — ``replay`` puts each back,
    byte-identical, at its place (every request extends the previous one; see ``_replay``),
    ``drop`` leaves them out. ``placement="merge"`` makes the block the leading content part of
    the latest user message instead of a message of its own.

    ``profile``: every request of a session also carries the session's profile block (see
    ``_profile``, ``profile_max_tokens``) right after the leading system message(s), the same bytes
    from the session's first request on, even if the store changes (with replay it is kept in the
    ledger, so a restart keeps it too); a turn's retrieval leaves out what the profile shows. A
    stateful Responses call gets no profile, as in ``startup``: it went in with the first call."""

    name = "contextPerTurn"

    def __init__(self, history: str = "replay", max_tokens: int = 600, replay_max_tokens: int = 4000,
                 placement: str = "message", memo_size: int = 1024, profile: bool = False,
                 profile_max_tokens: int = 1200, shared_memos: bool = False) -> None:
        self.history = check_choice(self.name, "history", history, HISTORIES)
        self.max_tokens = check_int(self.name, "max_tokens", max_tokens, 16, 100_000)
        self.placement = check_choice(self.name, "placement", placement, PLACEMENTS)
        memo_size = check_int(self.name, "memo_size", memo_size, 1, 10**9)
        self._turns: LRU[tuple[str, ...], Block] = LRU(memo_size)
        replay_max_tokens = check_int(self.name, "replay_max_tokens", replay_max_tokens, 0, 1_000_000)
        self.replay = Replay(replay_max_tokens, memo_size) if self.history == "replay" else None
        self.profile = bool(profile)
        self.profile_max_tokens = check_int(self.name, "profile_max_tokens", profile_max_tokens, 16, 100_000)
        self._profiles: LRU[tuple[str, ...], Block] = LRU(memo_size)  # history="drop": the sessions' profiles
        self.shared = bool(shared_memos)  # history="drop": the memos in the session's ledger file (``Memo``)

    @classmethod
    def from_config(cls, config: Config) -> ContextPerTurn:
        return cls(config.history, config.max_tokens, config.replay_max_tokens, config.placement, config.memo_size,
                   config.profile, config.startup_max_tokens, config.shared_memos)

    def plan(self, turn: Turn) -> Plan | Skip:
        def search(fresh: bool, exclude: frozenset[str] = frozenset()) -> Block:
            return turn.search(fresh, self.max_tokens, exclude)

        # a stateful Responses call sends only the new input (the provider keeps the history and the
        # blocks sent with it): nothing to replay, no ledger per call, and no profile (as startup)
        stateful = turn.view.stateful
        replay = None if stateful else self.replay
        profile = self.profile and not stateful
        if replay is None and not profile and turn.gate.skip:
            return Skip("gate")
        # with replay or a profile a closer still gets the earlier blocks back (its own search says "gate")
        keys = replay.keys(turn) if replay else {}

        def turn_block(s: Search) -> Callable[[bool], Block]:
            return replay.compute(turn, keys, s) if replay else lambda fresh: s(fresh, frozenset())

        # a stateful call's memo stays in this process: each such call would be a session of its own
        shared = self.shared and not stateful
        memo: TurnMemo = (replay.memo(turn, keys) if replay
                          else Memo(self._turns, turn.turn_key(), turn.store, "turn" if shared else None))
        context = keys if replay else None
        if not profile:
            return Plan(memo, turn_block(search), context)
        session = (replay.profile_memo(turn) if replay
                   else Memo(self._profiles, (turn.namespace, turn.session), turn.store, "profile" if shared else None))
        return Plan(WithProfile(session, memo), self._with_profile(turn, session, search, turn_block), context)

    def _with_profile(
        self, turn: Turn, memo: TurnMemo, search: Search, compute: Callable[[Search], Callable[[bool], Block]],
    ) -> Callable[[bool], Block]:
        """The turn's block computed after the session's profile (the memoized one, else a new one),
        leaving out what the profile shows; the block carries the profile."""

        def run(fresh: bool) -> Block:
            known = memo.get()
            profile = known or turn.profile(fresh, self.profile_max_tokens)
            shown = frozenset(profile.ids)
            def leaving_out_the_profile(f: bool, exclude: frozenset[str] = frozenset()) -> Block:
                return search(f, exclude | shown)

            block = compute(leaving_out_the_profile)(fresh)
            # a profile that appears in a session already under way (switched on, or lost with a drop
            # memo) changes the start of the prompt: reported like a compaction
            late = known is None and len(turn.view.user_indices) > 1
            return replace(block, profile=profile, compacted=block.compacted or late)

        return run

    def place(self, turn: Turn, plan: Plan, block: Block) -> Placed:
        placed = self._place_turn(turn, plan, block)
        profile = block.profile
        if profile is None or not profile.ids:  # none fits, or the store was empty at the session's start
            return placed
        fmt, at = turn.fmt, turn.view.leading_system
        body = fmt.insert(placed.body, at, profile.text, turn.role)
        position = placed.position
        if position is not None and fmt.adds_item(fmt.items(placed.body), at):
            position += 1
        return replace(placed, body=body, position=position)

    def _place_turn(self, turn: Turn, plan: Plan, block: Block) -> Placed:
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


class WithProfile:
    """The turn's memo together with the session's profile memo: a request's block is known when
    both are; settling keeps the first profile of the session and the first block of the turn."""

    def __init__(self, profile: TurnMemo, turn: TurnMemo) -> None:
        self.profile, self.turn = profile, turn

    def get(self) -> Block | None:
        profile = self.profile.get()
        block = self.turn.get() if profile is not None else None
        return None if block is None else replace(block, profile=profile)

    def settle(self, block: Block) -> Block:
        # a failed or timed-out computation has no profile: the next request computes one
        profile = self.profile.settle(block.profile) if block.profile is not None else None
        return replace(self.turn.settle(replace(block, profile=None)), profile=profile)
