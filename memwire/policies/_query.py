"""What a retrieval query is made of: the latest user message, plus a little recent context.

The latest user message is what the memories must be relevant to. Recent conversation text helps
with follow-ups ("and what about the tests?"), but it is weighted lower so it cannot outvote the
message itself. A short reply to an assistant question ("yes, the staging one") means little on
its own; the question is made part of the query text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._scripts import CJK_CHAR

__all__ = ["CONTEXT_CHARS", "CONTEXT_MESSAGES", "MAX_QUERY_CHARS", "Query", "cap_query", "query_from_messages"]

CONTEXT_MESSAGES = 3  # earlier messages kept as context: a follow-up rarely refers further back
CONTEXT_CHARS = 600  # tail of each kept message: long assistant answers would otherwise dominate
MAX_QUERY_CHARS = 4000  # a pasted log or file must not make retrieval slow: its head and tail are kept
_SHORT_REPLY_WORDS = 6  # a reply this short to a question is read together with the question
_QUESTION_CHARS = 300
# A word for the short-reply test: a run of letters or digits, but in text written without
# spaces (Chinese, Japanese, Korean) every two characters, about a word's length there; as \w+
# a whole Chinese message would be one word, and always a "short reply"
_WORD = re.compile(rf"{CJK_CHAR}{{1,2}}|(?:(?!{CJK_CHAR})\w)+")


@dataclass(frozen=True)
class Query:
    """A retrieval query.

    ``text`` is the latest user message (for a short answer to an assistant question, question
    and answer). ``context`` is recent conversation text before it, oldest first; its terms count
    for less than the terms of ``text``.
    """

    text: str
    context: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Query.text must be a str, got {type(self.text).__name__}")
        if not isinstance(self.context, tuple):  # a list would make the frozen query unhashable
            object.__setattr__(self, "context", tuple(self.context))


def _last_question(text: str) -> str | None:
    """The last question asked in ``text`` (up to its last '?' or fullwidth '？'), or None."""
    end = max(text.rfind("?"), text.rfind("？"))
    if end < 0:
        return None
    head = text[: end + 1]
    # start after the previous sentence end (also a CJK "。" or "！"), but keep at most _QUESTION_CHARS
    start = max(head.rfind(c, 0, end) for c in ".!\n。！") + 1
    return head[max(start, len(head) - _QUESTION_CHARS) :].strip() or None


def cap_query(text: str) -> str:
    """``text`` cut to MAX_QUERY_CHARS: its first and last halves (a question usually comes before
    or after what was pasted). Retrieval cost grows with the query; the budget must hold for any."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    half = MAX_QUERY_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def query_from_messages(latest_user: str, earlier: Sequence[str]) -> Query:
    """Build the query for ``latest_user`` given the texts of the earlier messages (all roles,
    oldest first). Keeps the last ``CONTEXT_MESSAGES`` messages (their last ``CONTEXT_CHARS``
    characters each) as context. When the latest message is a short reply (not itself a question)
    and the message just before it asked one, that question joins the query text."""
    kept = [m[-CONTEXT_CHARS:] for m in earlier[-CONTEXT_MESSAGES:] if m and m.strip()]
    latest_user = cap_query(latest_user)
    text = latest_user
    short = len(_WORD.findall(latest_user)) <= _SHORT_REPLY_WORDS
    # a short question of its own ("and the tests?") is a follow-up, not an answer
    if earlier and short and not latest_user.rstrip().endswith(("?", "？")):
        question = _last_question(earlier[-1] or "")
        if question:
            text = f"{question}\n{latest_user}"
    return Query(text, tuple(kept))
