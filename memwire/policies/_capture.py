"""Explicit capture: the statements in what a person typed that ask to be remembered.

Deterministic and free: a handful of English patterns, read sentence by sentence from the human
text of a new latest user message. What counts:

| the person writes | kind | stored as |
|---|---|---|
| "remember that X", "remember: X", "please remember X", "keep in mind that X" | fact (or the kind of X) | X |
| "from now on, X" | instruction | X |
| "always X", "never X" (an order: a verb follows), "don't ever X" | instruction | the sentence |
| "I prefer X", "I'd prefer X", "I'd rather X", "my preference is X", "call me X" | preference | "User prefers X", ... |
| "my X is Y" for X in ``PROFILE_KEYS`` (timezone, name, editor, shell, ...) | fact | "User's X is Y" |
| "forget that X", "forget about X", "never mind X" | forget | X (the captured memory that matches it) |
| a retraction: "(actually,) forget that", "scratch that", "never mind", "no, that's wrong" | forget | "" |
| a correction: "correction: X", "I meant X", "actually it's X", "not Y but X", "X, not Y" | correct | X |

"For future reference, X" is remembered as "remember that X" is.

A retraction ("" : what this conversation captured last) is also "ignore that", "take that back",
"don't save that", "that's not right". A correction is also "no, it's X", "make that X", "scratch
that, it's X"; X is a statement, or a value (``value``) to put in place of the one it corrects
(``old``: Y, when said: "correction: the script is ship.sh, not deploy.sh"). Both act on what the
same conversation captured last (the middleware decides which: ``middleware/_capture``); with
nothing to act on they do nothing ("correction: X" is then X, remembered). What never triggers:
"I forget things", "correction fluid", "don't forget that X" (X is remembered), "ignore that
warning" (not a bare "that"), "it's 6543" without "actually" / "no" / "sorry" before it.

Questions ("Do you remember that ...?"), quoted lines (``>``), code blocks, sentences of more than
``MAX_SENTENCE_CHARS`` and text past ``MAX_SCAN_CHARS`` are never read: a pasted log or file is
not a request to remember it. First-person words in X become the user's ("my" → "the user's"), so
a memory reads the same wherever it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "MAX_SCAN_CHARS",
    "MAX_SENTENCE_CHARS",
    "PROFILE_KEYS",
    "Kind",
    "Statement",
    "corrected",
    "might_state",
    "statements",
]

Kind = Literal["fact", "preference", "instruction", "forget", "correct"]

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
    old: str = ""  # a correction: the value it replaces, when said ("not deploy.sh")
    value: bool = False  # a correction: ``text`` is a value to put in place of one, not a statement
    retracts: bool = False  # a correction that also takes back ("scratch that, it's X"): with no place for X


_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# a sentence ends at . ! ? ; or a line break, when white space or the end follows
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_LEAD = (r"^(?:(?:ok(?:ay)?|also|and|so|oh|btw|by the way|hey|hi|one more thing|actually|sorry|wait|oops|hmm|ah|no|nope"
         r"|my bad)[,:]?\s+)*(?:please\s+)?")
# a lead that takes back what was just said: "actually it's X" corrects, "it's X" alone does not
_TAKING_BACK = re.compile(r"^(?:\W*(?:ok(?:ay)?|so|oh|hmm|ah|well)\W+)*(?:actually|sorry|wait|oops|no|nope|my bad)\b",
                          re.IGNORECASE)
_THAT = r"(?:that|this|it)(?:\s+(?:last\s+)?(?:one|part|bit|thing|statement))?"
_RETRACT = (r"(?:(?:forget|scratch|strike|ignore|disregard|drop|delete|remove|undo|cancel|discard)\s+" + _THAT
            + r"|forget\s+what\s+i\s+(?:just\s+)?said|never\s?mind(?:\s+" + _THAT + r")?"
            r"|(?:i\s+)?take\s+(?:that|it)\s+back"
            r"|(?:please\s+)?(?:don'?t|do\s+not)\s+(?:remember|save|store|keep|note)\s+" + _THAT
            + r"|(?:that'?s|that\s+is|that\s+was|this\s+is)\s+(?:wrong|incorrect|not\s+right|not\s+true|not\s+correct"
            r"|a\s+mistake|outdated))")
_RETRACTION = re.compile(_LEAD + _RETRACT + r"(?P<rest>\s*(?:[,:;-]|--|—)\s*.*)?[.!]*$", re.IGNORECASE)
_IT_IS = r"(?:it'?s|it\s+is|it\s+should\s+be|that\s+should\s+be|should\s+be)"
_REST_VALUE = re.compile(r"^\s*(?:[,:;-]|--|—)\s*(?:" + _IT_IS + r"|i\s+meant|make\s+(?:that|it))\s+(?P<x>.+?)[.!]*$",
                         re.IGNORECASE)
_CORRECTION = re.compile(_LEAD + r"correction\s*(?::|,|-|--|—)\s*(?P<x>.+?)[.!]*$", re.IGNORECASE)
_MEANT = re.compile(_LEAD + r"i\s+meant(?:\s+to\s+say)?\s*[:,]?\s+(?P<x>.+?)[.!]*$", re.IGNORECASE)
_ACTUALLY_IT_IS = re.compile(_LEAD + _IT_IS + r"\s+(?P<x>.+?)[.!]*$", re.IGNORECASE)
_MAKE_THAT = re.compile(_LEAD + r"make\s+(?:that|it)\s+(?P<x>.+?)[.!]*$", re.IGNORECASE)
_NOT_BUT = re.compile(_LEAD + r"(?:" + _IT_IS + r"\s+)?not\s+(?P<old>[^,]+?),?\s+but\s+(?:rather\s+)?(?P<x>.+?)[.!]*$",
                      re.IGNORECASE)
# "ship.sh, not deploy.sh": short, the whole sentence
_X_NOT_Y = re.compile(_LEAD + r"(?:" + _IT_IS + r"\s+)?(?P<x>[^,\s]+(?:\s+[^,\s]+)?),\s+not\s+"
                      r"(?P<old>[^,\s]+(?:\s+[^,\s]+)?)[.!]*$", re.IGNORECASE)
# the tail of a corrected statement that names what it replaces: "..., not deploy.sh", "(not 5433)"
_NOT_TAIL = re.compile(r"(?:,\s*|\s+)(?:and\s+)?not\s+(?P<old>[^,;]+?)\s*$|\s*\(not\s+(?P<old2>[^)]+)\)\s*$",
                       re.IGNORECASE)
# a corrected statement (not a bare value) has a verb that links a subject to its value
_LINKING = re.compile(r"\b(?:is|are|was|were|'s|uses?|runs?|listens?|lives?|prefers?|starts?|ends?|has|have|goes|"
                      r"points?|called|named|should|must|needs?|takes?|means?)\b", re.IGNORECASE)
_SUBJECT_START = re.compile(r"(?:we|i|you|they|the|our|my|its?|this|these|those|user|users)\b", re.IGNORECASE)
_PRONOUNS = frozenset(["it", "that", "this", "so", "what i said", "something else", "the other one", "that one"])
_FORGET = re.compile(
    _LEAD + r"(?:forget(?:\s+(?:that|about|what i said about))?|never\s?mind(?:\s+(?:that|about))?|disregard"
    r"(?:\s+(?:that|what i said about))?)(?:\s*[:,-]\s*|\s+|$)(?P<x>.*)$", re.IGNORECASE)
_REMEMBER = re.compile(
    _LEAD + r"(?:(?:do\s+)?remember(?:\s+that|\s*:)|don'?t forget(?:\s+that|\s*:)|keep in mind(?:\s+that|\s*:)"
    r"|note for (?:the )?future\s*:|for (?:future|later) reference\s*[,:]|make a note(?:\s+that|\s*:)"
    r"|remember(?=\s+(?:i|my|we|our|the|that|to always|to never)\b))\s*(?P<x>.+)$", re.IGNORECASE)
_FROM_NOW_ON = re.compile(_LEAD + r"(?:from now on|going forward|in (?:the )?future)\s*[,:]?\s+(?P<x>.+)$",
                          re.IGNORECASE)
_ALWAYS_NEVER = re.compile(_LEAD + r"(?:you\s+(?:should|must)\s+)?"
                           r"(?P<x>(?:always|never|don'?t ever|do not ever)\s+(?P<next>\S+).*)$", re.IGNORECASE)
# "always the same error", "never again": not an order
_NOT_A_VERB = frozenset(["the", "a", "an", "this", "that", "these", "those", "my", "your", "our", "his", "her", "its",
                         "their", "so", "same", "again", "mind", "been", "had", "has", "have", "was", "were", "is",
                         "are", "am", "be"])
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
                      r"|i|my|call|scratch|strike|ignore|drop|delete|remove|undo|cancel|discard|take|that|this"
                      r"|correction|it|should|not)", re.IGNORECASE)
_VALUE_END = re.compile(r",|\s+(?:and|but|so|because|which|though)\s+", re.IGNORECASE)
_FIRST_PERSON = (
    (re.compile(r"\bI'm\b"), "the user is"), (re.compile(r"\bI've\b"), "the user has"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "the user's"), (re.compile(r"\bmine\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "the user"), (re.compile(r"\bme\b"), "the user"),
)
_I_VERB = re.compile(r"\bI\b(?:\s+(?P<verb>[a-z]+(?:'t)?))?")
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't", "was": "was",
              "wasn't": "wasn't", "go": "goes"}
_UNCHANGED = frozenset(["can", "can't", "will", "won't", "would", "wouldn't", "should", "shouldn't", "must", "might",
                        "may", "could", "couldn't", "did", "didn't", "also", "always", "never", "usually", "often",
                        "sometimes", "really", "just", "only", "still"])


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


def _correction(x: str, said: str, old: str = "", *, retracts: bool = False) -> Statement | None:
    """A correction to ``x``: a statement ("the deploy script is ship.sh") or a value ("6543")."""
    x = x.strip().strip("\"'“”").strip()
    if not old and (t := _NOT_TAIL.search(x)) is not None:  # "..., not deploy.sh"
        old, x = (t["old"] or t["old2"] or "").strip(), x[:t.start()]
    old = old.strip().rstrip(".!").strip("\"'“”`").strip()
    words = _words(x)
    if not words or x.lower() in _PRONOUNS or re.match(r"to\s", x, re.IGNORECASE):
        return None  # "I meant it", "I meant to ask ..."
    if (words >= 3 and _LINKING.search(x)) or (words >= 4 and _SUBJECT_START.match(x)):
        return Statement("correct", _clean(_third_person(x)), said, old)
    if words <= 4:
        return Statement("correct", x.rstrip(" .,;:!"), said, old, value=True)
    return None


def _corrections(sentence: str) -> Statement | None:
    """A retraction ("scratch that") or a correction ("I meant X") of what was just captured."""
    if m := _RETRACTION.match(sentence):
        rest = m["rest"] or ""
        if v := _REST_VALUE.match(rest):  # "scratch that, it's 6543"
            st = _correction(v["x"], sentence)
            return replace(st, retracts=True) if st is not None else Statement("forget", "", sentence)
        return Statement("forget", "", sentence)
    if m := _CORRECTION.match(sentence):
        return _correction(m["x"], sentence)
    if m := _MEANT.match(sentence):
        return _correction(m["x"], sentence)
    if (m := _ACTUALLY_IT_IS.match(sentence)) and _TAKING_BACK.match(sentence):
        return _correction(m["x"], sentence)
    if m := _MAKE_THAT.match(sentence):
        return _correction(m["x"], sentence)
    if m := _NOT_BUT.match(sentence):
        return _correction(m["x"], sentence, m["old"])
    return None


def _one(sentence: str) -> Statement | None:
    if sentence.endswith("?") or len(sentence) > MAX_SENTENCE_CHARS:
        return None
    sentence = sentence.replace("’", "'")
    if _words(sentence) <= 8 and (m := _X_NOT_Y.match(sentence)) and m["x"].lower() not in _PRONOUNS:
        return _correction(m["x"], sentence, m["old"])  # "ship.sh, not deploy.sh"
    if not _TRIGGER.match(sentence):
        return None
    if (st := _corrections(sentence)) is not None:
        return st
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
          "going forward", "future", "always", "don't ever", "dont ever", "do not ever", "prefer", "rather",
          # retractions and corrections
          "scratch", "strike", "ignore", "drop that", "delete that", "remove that", "undo", "cancel", "discard",
          "wrong", "incorrect", "not right", "not true", "not correct", "mistake", "outdated", "back", "meant",
          "correction", "actually", "sorry", "oops", "wait", "no, it", "no it", "nope", "my bad", "make that",
          "make it", ", not ", "save that", "save this", "save it", "store that", "store this", "store it",
          "keep that", "keep this", "keep it")
_PROFILE_KEY_WORDS = sorted((re.escape(k).replace(r"\ ", r"\s+") for k in PROFILE_KEYS), key=len, reverse=True)
_CALL_OR_MY = re.compile(r"call\s+me|my\s+(?:" + "|".join(_PROFILE_KEY_WORDS) + r")\b")


def might_state(human_text: str) -> bool:
    """False when ``human_text`` surely holds no statement (a cheap test; True: read it)."""
    low = human_text[:MAX_SCAN_CHARS].lower().replace("’", "'")
    return (any(w in low for w in _WORDS) or ("not " in low and " but " in low)
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


# a value in a stored statement: a backticked span, a path, a version, a file name, a number, a word
_VALUE_TOKEN = re.compile(r"`[^`]+`|[\w@+#~]+(?:[./\\:_\-'][\w@+#~]+)*")
_NOT_NAMES = frozenset(["the", "a", "an", "user", "user's", "always", "never", "don't", "i"])


def _kind_of(tok: str) -> str:
    """What kind of value a token is: values of one kind can stand for each other."""
    core = tok.strip("`")
    if any(c.isdigit() for c in core):
        return "number" if re.fullmatch(r"[\d.,]+", core) else "code"
    if any(c in core for c in "./\\:_@") or (("-" in core) and not core.replace("-", "").isalpha()):
        return "code"  # deploy.sh, Europe/Paris, snake_case
    if tok.startswith("`"):
        return "code"
    if core[:1].isupper():
        return "name"
    return "word"


def corrected(text: str, value: str, old: str = "", groups: Sequence[frozenset[str]] = ()) -> str | None:
    """``text`` (a stored statement) with ``value`` in place of the value it corrects: ``old``
    when given (it must be in ``text``), else the one value of ``value``'s kind in ``text``
    ("listens on port 5433" + "6543"; "User prefers npm." + "pnpm" when a group of ``groups``
    holds both). None when that is not one clear place: nothing is guessed."""
    value = value.strip()
    if not value or "\n" in value:
        return None
    if old:
        spans = [m.span() for m in re.finditer(r"(?<![\w./\\-])" + re.escape(old) + r"(?![\w/\\-]|\.\w)", text,
                                                re.IGNORECASE)]
    else:
        toks = list(_VALUE_TOKEN.finditer(text))
        parts = value.split()
        if len(parts) > 1:  # "Node 20" for "Node 18": a run of as many tokens, one of them the same
            spans = [(toks[i].start(), toks[i + len(parts) - 1].end()) for i in range(len(toks) - len(parts) + 1)
                     if any(toks[i + j].group().lower() == p.lower() for j, p in enumerate(parts))
                     and all(_kind_of(toks[i + j].group()) == _kind_of(p) for j, p in enumerate(parts))]
        else:
            kind = _kind_of(value)
            group = next((g for g in groups if value.lower() in g), None)
            same = [m for i, m in enumerate(toks) if _kind_of(m.group()) == kind
                    and not (kind == "name" and (i == 0 or m.group().lower() in _NOT_NAMES))]
            if kind == "word":
                same = [m for m in same if group is not None and m.group().lower() in group]
            elif kind == "number" and len(same) > 1:  # "6543": the 4-digit one, not "15" beside it
                same = [m for m in same if len(m.group()) == len(value)]
            spans = [m.span() for m in same]
    if len(spans) != 1:
        return None
    a, b = spans[0]
    if text[a:b].lower() == value.lower():
        return None
    return text[:a] + value + text[b:]
