"""The social-closer gate: trivial turns ("ok", "thanks", 👍) skip retrieval.

A short reply to a question the assistant just asked ("yes" after "Shall I also add tests?") is
not a closer: it is retrieved, with the question as the query.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["CLOSERS", "GateDecision", "gate", "is_closer"]

CLOSERS = frozenset(
    {
        "ok", "okay", "k", "kk", "yes", "yep", "yeah", "yup", "no", "nope", "nah", "sure", "thanks",
        "thank you", "thx", "ty", "tysm", "got it", "gotcha", "cool", "nice", "great", "perfect",
        "right", "correct", "agreed", "done", "alright", "all right", "fine", "awesome", "excellent",
        "good", "very good", "sounds good", "looks good", "lgtm", "exactly", "understood", "noted",
        "cheers", "thanks a lot", "thank you very much", "thanks so much", "many thanks",
        "ok thanks", "ok thank you", "ok cool", "ok great", "great thanks", "perfect thanks",
        "cool thanks", "thanks again", "will do", "makes sense", "i see", "fair enough", "np",
        "no problem", "no worries", "bye", "goodbye", "hmm", "mhm", "ack", "roger", "nice one",
        "sweet", "yes please", "no thanks", "no thank you", "yes thanks", "sure thing",
        "go ahead", "go on", "continue", "proceed", "do it", "yes do it", "ok do it",
    }
)

# Short replies that carry meaning only as an answer ("yes" to "Shall I ...?").
_ANSWERS = frozenset(
    {
        "yes", "yep", "yeah", "yup", "no", "nope", "nah", "sure", "ok", "okay", "k", "correct", "right",
        "agreed", "yes please", "no thanks", "no thank you", "sure thing", "go ahead", "do it",
        "yes do it", "ok do it", "please do", "exactly", "fine", "alright", "all right", "sounds good",
    }
)

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def _normalize(text: str) -> str:
    words = _WORD.findall(text.lower().replace("’", "'"))
    return " ".join(words)


def _symbols_only(text: str) -> bool:
    """True for emoji-only or punctuation-only messages (👍, 🙏, ✅, '...', '!!')."""
    for ch in text:
        if ch.isspace():
            continue
        cat = unicodedata.category(ch)
        if cat[0] in ("L", "N"):
            return False
    return True


MAX_CLOSER_CHARS = 200


def is_closer(text: str) -> bool:
    """Whether a message is a social closer, on its own (no conversation context)."""
    if len(text) > MAX_CLOSER_CHARS:  # closers are short; a regex over a pasted 17 MB prompt holds the GIL
        return False
    if _symbols_only(text):
        return True
    norm = _normalize(text)
    return norm in CLOSERS or norm in _ANSWERS


def _ends_with_question(text: str) -> str | None:
    """The last question of an assistant message, if it ends with one."""
    t = text.strip()
    if not t.endswith("?"):
        return None
    # the last sentence that ends with '?'
    parts = re.split(r"(?<=[.!?])\s+|\n+", t)
    return parts[-1].strip() if parts else t


@dataclass(frozen=True)
class GateDecision:
    skip: bool
    query: str  # what to retrieve with (the user text, or question + answer)
    reason: str | None = None


def gate(user_text: str, previous_assistant: str | None = None) -> GateDecision:
    """Decide whether a turn is retrieved, and with which query."""
    if not is_closer(user_text):
        return GateDecision(False, user_text)
    if previous_assistant and not _symbols_only(user_text) and _normalize(user_text) in _ANSWERS:
        question = _ends_with_question(previous_assistant)
        if question:
            return GateDecision(False, f"{question} {user_text}")
    return GateDecision(True, user_text, "gate")
