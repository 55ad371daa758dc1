"""What ``prepare`` returns: the request to send (:class:`Prepared`) and what memwire did to it
(:class:`Injection`). Read by the records, the replies and the adapters; made by ``_core``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..policies._query import Query

__all__ = ["Injection", "Prepared"]


@dataclass(frozen=True)
class Injection:
    """What memwire did to one request."""

    mode: str
    memory_ids: tuple[str, ...] = ()
    text: str = ""                 # the rendered block ("" when nothing was injected)
    tokens: int = 0                # its size in the target model's encoding
    skipped: str | None = None     # gate | nothing_relevant | over_budget | error | timeout | stateful | side_request
    elapsed_ms: float = 0.0
    position: int | None = None    # index of the memory message (or of the merged user message)
    placement: str | None = None   # message | merge | system
    session: str = ""
    namespace: str = ""            # whose store (telemetry credits its memories)
    reused: bool = False           # the block came from the turn / session memo
    error: str | None = None
    compacted: bool = False        # earlier blocks changed (replay: compaction, forgotten memory; a late profile)
    replayed: int = 0              # history="replay": earlier blocks re-inserted at their places
    # contextPerTurn with profile=true: the session's profile block in this request (on every request
    # of the session; the fields above describe this turn's block, as without a profile)
    profile_ids: tuple[str, ...] = ()
    profile_tokens: int = 0

    @property
    def injected(self) -> bool:
        return bool(self.memory_ids) and self.skipped is None


@dataclass
class Prepared:
    """The request to send: ``body`` (``prepare_request``) or ``messages`` (``prepare``)."""

    body: dict[str, Any]
    injection: Injection | None
    api: str = "openai.chat"
    # the turn's retrieval query, kept (not computed) so ``memwire preview`` can say why memories
    # came or did not; None when the request was not read as a turn (no user message, a side request)
    query: Query | None = None

    @property
    def messages(self) -> Any:
        return self.body["input" if self.api == "openai.responses" else "messages"]
