"""The mode protocol: what a mode is handed (``Turn``), what it answers (``Plan`` or ``Skip``), and
what it hands back once the block is known (``Placed``)."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..._errors import ConfigError
from ...memory._protocol import Store
from ...memory._supersede import injected
from .._gate import GateDecision
from .._query import Query
from ._profile import profile_block
from ._render import Block, render

if TYPE_CHECKING:  # start-up time: the config model is pydantic's, loaded on the first config built
    from ..._config_model import Config

__all__ = [
    "Mode",
    "Placed",
    "Plan",
    "RequestFormat",
    "RequestView",
    "Skip",
    "Turn",
    "TurnMemo",
    "check_choice",
    "check_int",
    "turn_key",
]


class RequestView(Protocol):
    """What a mode reads of a request: the middleware's ``View`` of it (``middleware/_formats``)."""

    items: list[Any]                # the message list
    latest_user: int | None         # index of the latest user message
    latest_identity: str | None     # its identity once read (``RequestFormat.identity``)
    system_text: str
    user_text: str                  # the latest user message's human text (capture reads it)
    leading_system: int             # how many leading system-role items
    user_indices: list[int]         # every human user message, in order
    stateful: bool                  # a Responses call continuing a provider-side history
    scan: Any                       # the per-item facts the view was read from (replay keeps its keys' state there)


class RequestFormat(Protocol):
    """What a mode asks of the request's wire format: the middleware's ``Format``
    (``middleware/_formats``), one per API."""

    api: str  # the name of the wire API it reads

    def items(self, body: Mapping[str, Any]) -> list[Any]: ...

    def identity(self, item: Any, system_text: str = "") -> str: ...

    def adds_item(self, items: list[Any], index: int) -> bool: ...

    def insert(self, body: Mapping[str, Any], index: int, text: str, role: str) -> dict[str, Any]: ...

    def insert_blocks(self, body: Mapping[str, Any], blocks: Mapping[int, str], role: str,
                      merge: bool = False) -> dict[str, Any]: ...

    def added_before(self, items: list[Any], blocks: Mapping[int, str], index: int, merge: bool = False) -> int: ...

    def append_system(self, body: Mapping[str, Any], text: str, role: str = "system") -> dict[str, Any]: ...


def turn_key(index: int, identity: str) -> str:
    """A turn is identified by its latest user message (its identity, see ``RequestFormat.identity``)
    and its position in the conversation."""
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass") + b"\x00").hexdigest()[:16]
    return f"{index}:{digest}"


@dataclass(frozen=True)
class Turn:
    """One request as the middleware read it: the body and its view, whose conversation it is, where
    its memory lives, and what the gate and the query said of the latest user message."""

    fmt: RequestFormat
    body: Mapping[str, Any]
    view: RequestView
    session: str
    namespace: str
    store: Store
    model: str | None           # picks the token encoding of the budget
    role: str                   # of a memory message (OpenAI chat / Responses)
    gate: GateDecision
    query: Query
    top_k: int
    min_score: float | None

    def turn_key(self) -> tuple[str, ...]:
        """The memo key of this turn: the session and the latest user message (by identity)."""
        view = self.view
        assert view.latest_user is not None
        identity = view.latest_identity
        if identity is None:
            identity = view.latest_identity = self.fmt.identity(view.items[view.latest_user], view.system_text)
        return (self.namespace, self.session, turn_key(view.latest_user, identity))

    def search(self, fresh: bool, max_tokens: int, exclude: frozenset[str] = frozenset()) -> Block:
        """Per-turn retrieval from the latest user message, rendered within ``max_tokens``.
        ``fresh=False``: read the store as loaded and never wait for its lock (see ``Middleware``)."""
        if self.gate.skip:
            return Block(skipped="gate")
        version = self.store.version
        hits = self.store.search(self.query.text, self.top_k, min_score=self.min_score, context=self.query.context,
                                 exclude=exclude, refresh=fresh, wait=fresh)
        if not hits:
            return Block(skipped="nothing_relevant", looked_at=self.store.version if fresh else version)
        return render(injected(self.store, [h.memory for h in hits]), max_tokens, self.model)

    def profile(self, fresh: bool, max_tokens: int) -> Block:
        """The session's profile block (see ``_profile``), with no query: computed once per session
        by the mode that shows it. ``fresh`` as for ``search``."""
        memories = injected(self.store, self.store.memories(refresh=fresh, wait=fresh))  # a conflict: the newer
        return profile_block(self.store, memories, max_tokens, self.model)


class TurnMemo(Protocol):
    """Where a mode keeps a turn's (or a session's) block: the first block settled is what every
    later request of that turn gets."""

    def get(self) -> Block | None: ...

    def settle(self, block: Block) -> Block: ...


@dataclass(frozen=True)
class Plan:
    """What a request needs: the memo its block is kept in, and how to compute the block when the
    memo has none (``fresh=False``: inline, from the store as loaded). ``context`` is the mode's own,
    handed back to ``place`` (replay: the ledger key of each user message)."""

    memo: TurnMemo
    compute: Callable[[bool], Block]
    context: Any = None


@dataclass(frozen=True)
class Skip:
    """Leave the request unchanged, for this reason (gate, stateful)."""

    reason: str


@dataclass(frozen=True)
class Placed:
    """The new body; ``position`` and ``placement`` of the new block when one was placed;
    ``replayed``: earlier blocks put back."""

    body: dict[str, Any]
    position: int | None = None
    placement: str | None = None  # message | merge | system
    replayed: int = 0


class Mode(ABC):
    """One way of putting memory into a request. A mode does no I/O of its own outside ``compute``."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_config(cls, config: Config) -> Mode:
        """The mode with the settings of ``config``."""

    @abstractmethod
    def plan(self, turn: Turn) -> Plan | Skip:
        """What is memoized for this request and how its block is computed, or why nothing is done."""

    @abstractmethod
    def place(self, turn: Turn, plan: Plan, block: Block) -> Placed:
        """The body with the block placed (and earlier blocks kept, where the mode keeps them).
        ``block`` may hold nothing (skipped, nothing relevant)."""


def check_int(owner: str, name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{owner}: {name} must be an integer from {lo} to {hi}, got {value!r}")
    return value


def check_choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{owner}: {name} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)
