"""Explicit capture: the statements in what a person typed that ask to be remembered.

Deterministic and free: a handful of English patterns, read sentence by sentence from the human
text of a new latest user message. What counts:

| the person writes | kind | stored as |
|---|---|---|
| "remember that X", "remember: X", "please remember X", "keep in mind that X", "for future reference, X" | fact (or the kind of X) | X |
| "from now on, X" | instruction | X |
| "always X", "never X" (an order: a verb follows), "don't ever X" | instruction | the sentence |
| "I prefer X", "I'd prefer X", "I'd rather X", "my preference is X", "call me X" | preference | "User prefers X", ... |
| "my X is Y" for X in ``PROFILE_KEYS`` (timezone, name, editor, shell, ...) | fact | "User's X is Y" |
| "forget that X", "forget about X", "never mind X", "never mind" alone | forget | X ("" for the last capture) |

Questions ("Do you remember that ...?"), quoted lines (``>``), code blocks, sentences of more than
``MAX_SENTENCE_CHARS`` and text past ``MAX_SCAN_CHARS`` are never read: a pasted log or file is
not a request to remember it. First-person words in X become the user's ("my" → "the user's"), so
a memory reads the same wherever it is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_SCAN_CHARS", "MAX_SENTENCE_CHARS", "PROFILE_KEYS", "Kind", "Statement", "might_state", "statements"]

Kind = Literal["fact", "preference", "instruction", "forget"]

MAX_SCAN_CHARS = 4000
MAX_SENTENCE_CHARS = 400
MIN_WORDS = 2  # "always." is not an instruction

PROFILE_KEYS = (
    "timezone", "time zone", "name", "preferred name", "nickname", "pronouns", "email", "email address",
    "github username", "github handle", "username", "role", "job title", "job", "title", "team",
    "company", "employer", "location", "city", "country", "native language", "preferred language",
    "first language", "language", "editor", "ide", "shell", "os", "operating system", "terminal",
    "keyboard layout", "package manager", "browser", "birthday",
)


@dataclass(frozen=True)
class Statement:
    """One thing to remember (or to forget), as it should be stored."""

    kind: Kind
    text: str
    said: str  # the sentence it came from


_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# a sentence ends at . ! ? ; or a line break, when white space or the end follows
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_LEAD = r"^(?:(?:ok(?:ay)?|also|and|so|oh|btw|by the way|hey|hi|one more thing)[,:]?\s+)*(?:please\s+)?"
_FORGET = re.compile(
    _LEAD + r"(?:forget(?:\s+(?:that|about|what i said about))?|never\s?mind(?:\s+(?:that|about))?|disregard"
    r"(?:\s+(?:that|what i said about))?)(?:\s*[:,-]\s*|\s+|$)(?P<x>.*)$", re.IGNORECASE)
_REMEMBER = re.compile(
    _LEAD + r"(?:(?:do\s+)?remember(?:\s+that|\s*:)|don'?t forget(?:\s+that|\s*:)|keep in mind(?:\s+that|\s*:)"
    r"|note for (?:the )?future\s*:|for (?:future|later) reference\s*[,:]|make a note(?:\s+that|\s*:)"
    r"|remember(?=\s+(?:i|my|we|our|the|that|to always|to never)\b))\s*(?P<x>.+)$", re.IGNORECASE)
_FROM_NOW_ON = re.compile(_LEAD + r"(?:from now on|going forward|in (?:the )?future)\s*[,:]?\s+(?P<x>.+)$", re.IGNORECASE)
_ALWAYS_NEVER = re.compile(_LEAD + r"(?:you\s+(?:should|must)\s+)?(?P<x>(?:always|never|don'?t ever|do not ever)\s+(?P<next>\S+).*)$",
                           re.IGNORECASE)
# "always the same error", "never again": not an order
_NOT_A_VERB = frozenset(["the", "a", "an", "this", "that", "these", "those", "my", "your", "our", "his", "her", "its", "their", "so", "same", "again", "mind", "been", "had", "has", "have", "was", "were", "is", "are", "am", "be"])
_PREFER = re.compile(
    _LEAD + r"(?:i\s*(?:really\s+|generally\s+|usually\s+|strongly\s+)?(?P<verb>prefer|'d prefer|would prefer"
    r"|'d rather|would rather)|(?P<pref>my\s+preference\s+is(?:\s+that)?)|(?P<call>call\s+me))\s+(?P<x>.+)$",
    re.IGNORECASE)
_PREFER_LEAD = {"prefer": "User prefers", "'d prefer": "User would prefer", "would prefer": "User would prefer",
                "'d rather": "User would rather", "would rather": "User would rather"}
_PROFILE = re.compile(
    _LEAD + r"my\s+(?P<key>" + "|".join(sorted((re.escape(k).replace(r"\ ", r"\s+") for k in PROFILE_KEYS),
                                               key=len, reverse=True))
    + r")\s+(?:is|=|:)\s+(?P<x>.+)$", re.IGNORECASE)
# what a sentence may begin with (after the lead-in) for any pattern above to match it: most
# sentences fail this one test, so the request path pays a single match for them, not six
_TRIGGER = re.compile(_LEAD + r"(?:forget|never|disregard|do|remember|keep|note|for|make|from|going|in|you|always"
                      r"|i|my|call)", re.IGNORECASE)
_VALUE_END = re.compile(r",|\s+(?:and|but|so|because|which|though)\s+", re.IGNORECASE)
_FIRST_PERSON = (
    (re.compile(r"\bI'm\b"), "the user is"), (re.compile(r"\bI've\b"), "the user has"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "the user's"), (re.compile(r"\bmine\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "the user"), (re.compile(r"\bme\b"), "the user"),
)
_I_VERB = re.compile(r"\bI\b(?:\s+(?P<verb>[a-z]+(?:'t)?))?")
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't", "was": "was",
              "wasn't": "wasn't", "go": "goes"}
_UNCHANGED = frozenset(["can", "can't", "will", "won't", "would", "wouldn't", "should", "shouldn't", "must", "might", "may", "could", "couldn't", "did", "didn't", "also", "always", "never", "usually", "often", "sometimes", "really", "just", "only", "still"])


def _third_person_verb(verb: str) -> str:
    """The verb after "the user" ("I use" → "the user uses"); modals and adverbs stay."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb in _UNCHANGED or verb.endswith("ed"):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _i_to_user(m: re.Match[str]) -> str:
    return "the user" + (f" {_third_person_verb(m['verb'])}" if m["verb"] else "")


_INLINE_CODE = re.compile(r"(`[^`]*`)")


def _third_person(text: str) -> str:
    """First-person words outside inline code become the user's."""
    parts = _INLINE_CODE.split(text)
    for i in range(0, len(parts), 2):  # even parts are outside backticks
        for pattern, repl in _FIRST_PERSON:
            parts[i] = pattern.sub(repl, parts[i])
        parts[i] = _I_VERB.sub(_i_to_user, parts[i])
    return "".join(parts)


def _clean(text: str) -> str:
    text = text.strip().strip("\"'“”").strip()
    text = re.sub(r"\s+", " ", text).rstrip(" ,;:")
    if text and text[-1] not in ".!":
        text += "."
    return text[:1].upper() + text[1:]


def _sentences(text: str) -> list[str]:
    text = _CODE_BLOCK.sub("\n", text[:MAX_SCAN_CHARS])
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(">")]  # quoted: someone else's words
    return [s.strip() for s in _SENTENCE_END.split("\n".join(lines)) if s and s.strip()]


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def _one(sentence: str) -> Statement | None:
    if sentence.endswith("?") or len(sentence) > MAX_SENTENCE_CHARS or not _TRIGGER.match(sentence):
        return None
    if m := _FORGET.match(sentence):
        return Statement("forget", _clean(m["x"]) if m["x"].strip() else "", sentence)
    if (m := _REMEMBER.match(sentence)) and _words(m["x"]) >= MIN_WORDS:
        inner = _one(re.sub(r"^to\s+(?=always|never)", "", m["x"], flags=re.IGNORECASE))  # an order, a preference
        if inner is not None and inner.kind != "forget":
            return Statement(inner.kind, inner.text, sentence)
        return Statement("fact", _clean(_third_person(m["x"])), sentence)
    if (m := _FROM_NOW_ON.match(sentence)) and _words(m["x"]) >= MIN_WORDS:
        return Statement("instruction", _clean(_third_person(m["x"])), sentence)
    if ((m := _ALWAYS_NEVER.match(sentence)) and _words(m["x"]) > MIN_WORDS
            and m["next"].lower().strip(".,!") not in _NOT_A_VERB):
        return Statement("instruction", _clean(_third_person(m["x"])), sentence)
    if m := _PREFER.match(sentence):
        lead = ("User wants to be called" if m["call"] else "User prefers" if m["pref"]
                else _PREFER_LEAD[re.sub(r"\s+", " ", m["verb"].lower())])
        return Statement("preference", _clean(f"{lead} {_third_person(m['x'])}"), sentence)
    if m := _PROFILE.match(sentence):
        value = _VALUE_END.split(m["x"], maxsplit=1)[0]  # "my name is Ana and I work on payments"
        if 0 < _words(value) <= 8:
            key = re.sub(r"\s+", " ", m["key"].lower())
            return Statement("fact", _clean(f"User's {key} is {value}"), sentence)
    return None


# one of these (lower-cased) is in every sentence a pattern above matches: a message holding none
# of them (almost every message) costs a few substring tests, not a split into sentences
_WORDS = ("remember", "forget", "never", "disregard", "keep in mind", "note", "reference", "from now on",
          "going forward", "future", "always", "don't ever", "dont ever", "do not ever", "prefer", "rather")
_CALL_OR_MY = re.compile(r"call\s+me|my\s+(?:" + "|".join(sorted((re.escape(k).replace(r"\ ", r"\s+") for k in PROFILE_KEYS),
                                                                key=len, reverse=True)) + r")\b")


def might_state(human_text: str) -> bool:
    """False when ``human_text`` surely holds no statement (a cheap test; True: read it)."""
    low = human_text[:MAX_SCAN_CHARS].lower()
    return (any(w in low for w in _WORDS)
            or (("call" in low or "my" in low) and _CALL_OR_MY.search(low) is not None))


def statements(human_text: str) -> list[Statement]:
    """The explicit statements in ``human_text``, in order; [] for almost every message."""
    if not might_state(human_text):
        return []
    found: dict[tuple[str, str], Statement] = {}
    for sentence in _sentences(human_text):
        st = _one(sentence)
        if st is not None:
            found.setdefault((st.kind, st.text.lower()), st)
    return list(found.values())
