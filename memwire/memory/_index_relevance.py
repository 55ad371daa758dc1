"""The index's relevance decision beyond the score cut: a query about something the store does not
know gets no memory, however well one memory matches one of its words (issue 32).

The score cut (``_index``) asks how much of what a query is about a memory covers, a share of the
idf of its most specific words. Alone it cannot tell "What did Caroline research?" asked of a
store that never heard of Caroline from a real question: "research" is a rare word there, and a
memory holding it covers 45% of the question. Nor "How do I reverse a list in Python?" asked of a
chat about family life, where "list" is in three memories. The query's own text (never its
context) is judged before any memory is scored, in parts: its sentences that ask (those ending
with "?", every sentence when none does), a clause opening with an interrogative word a part of
its own ("Where are the notes kept, which laptop OS, how do deploys go out?"). The query abstains
when every part is about something the store does not know:

1. **Names.** A part that names something (a capitalized word inside a sentence, "Caroline",
   "Mona Lisa"; an identifier: "LaunchDarkly", "Next.js", "py3", a short option "-p") of which
   the store holds no word is mostly about that thing: the name counts as ``NAME_WEIGHT``
   unknown words in rule 2. "What did Caroline research?" asked of a store that never mentions
   Caroline abstains; "Should I indent this Python file with tabs or spaces?" asked of a store
   about indenting, not Python, does not. A part naming only things the store knows in every
   word ("What did Gina research?") is about it: the score cut judges.
   A coding prompt's own identifiers are no names: a file or a path ("app.py", "src/api",
   "refund_service.py"), a snake_case or lower camelCase name ("parse_invoice", "uploadAvatar")
   is what the prompt works on, and a coding agent's store rarely knows it while the rest of the
   prompt says what it is about ("Fix the failing test in refund_service.py" in a store that says
   how to run the tests). Its terms weigh one word between them, in rule 2 and in the score cut
   (``code_weights``), when the store lacks them. A library's dotted name ("numpy.argsort"), a
   product ("LaunchDarkly", "Next.js") and a host ("acme.dev") stay names: a question naming one
   asks about it.
2. **Unknown topic.** A part abstains when most (``UNKNOWN_SHARE``) of its specific weight (the
   idf of its words that are neither common English words, ``text.COMMON_WORDS``, nor numbers)
   is in words no memory holds: what it asks about is mostly not in the store. "How do I undo
   the last commit in git?" shares only "commit" with a store that knows nothing of git or
   undoing; a question the store can answer shares most of its rare words with it. A frequent
   English word beyond those (``text.generic_terms``: "implement", "step", "column") weighs
   ``GENERIC_WEIGHT`` of its idf: "Now implement the approval step for large refunds" asked of a
   store about refunds and approvals is about them, though it never said "implement". In a store of
   fewer than ``SMALL_STORE`` memories, where most words of any question are missing by chance
   and document frequencies say little, words are counted instead (a common word the store lacks
   for ``COMMON_WEIGHT``, a frequent one for ``SMALL_GENERIC_WEIGHT``; one the store holds, for a
   whole word: it is what the question shares with the store, "staging" in "What's the staging
   URL?") and a part abstains when more than ``SMALL_UNKNOWN_SHARE`` of them are unknown: "Should
   I use tabs in this file?" is about a store that holds only "User prefers tabs". A weekday or
   month name the store lacks weighs nothing ("Can I deploy this on Friday?" asked of a store
   whose deploys go out on Tuesdays: when, not what about). A part of numbers and common words
   only ("What's 17 times 23?") names no topic at all: it abstains.

Capitalization only says something in text that has lower-case words after its first one: in
Title Case or ALL CAPS text only identifiers are names. A sentence's first word, weekday and month
names ("on a Friday", capitalized by rule, not by being names), a number-first token ("10am",
"8th", "1990s") and an acronym in capitals ("URL", "API": as often a plain word as a name) are not.
Consecutive names are one ("Mona Lisa", "Dr. Seuss"): unknown when the store holds none of its
words, known when it holds them all.

Both rules apply only with a score cut (``min_score`` > 0): a search with ``min_score=0`` ranks
every memory sharing a word with the query, as before. Figures: ``benchmarks/relevance.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from ._index_postings import Lexicon
from ._index_scoring import COMMON_WEIGHT, SMALL_STORE, idf
from ._text import CJK_CHAR, analyze, common_terms, generic_terms

__all__ = [
    "GENERIC_WEIGHT", "NAME_WEIGHT", "SMALL_GENERIC_WEIGHT", "SMALL_UNKNOWN_SHARE", "UNKNOWN_SHARE", "Code", "abstains",
    "code_weights", "names", "parts",
]

# Rule 2: a query abstains when this share of its specific weight is in words the store lacks.
# Chosen on LoCoMo conversations 1-3 and the tune half of benchmarks/relevance_data.py: 0.4-0.5
# keep the evidence share, 0.6 lets a third more everyday prompts through (see relevance.py).
UNKNOWN_SHARE = 0.5
# In a store of fewer than SMALL_STORE memories most words of any question are missing by chance:
# a question sharing one word of three with it ("which package manager, pnpm?") is about it, so a
# query abstains there when more than two thirds of its words are unknown
SMALL_UNKNOWN_SHARE = 2 / 3
# A name of which the store holds no word counts as this many unknown words: the store knows
# nothing of what the question is about ("What did Caroline research?"), unless the rest of it
# is well known ("Should I indent this Python file with tabs?" in a store about indenting). On
# LoCoMo conversations 1-3, false injection on another conversation's questions: 4.2% at 2,
# 0.6% at 3, 0.4% when an unknown name always abstains; 2 keeps "Should I indent this Python
# file with tabs or spaces?" for "The CI bot indents with tabs, width 8", 3 does not.
NAME_WEIGHT = 2.0
# Rule 2 in a store of SMALL_STORE memories or more: a frequent English word beyond COMMON_WORDS
# (``text.generic_terms``, 3,000 words: "implement", "step", "column") weighs this share of its
# idf, as it says less of what a question is about than its rare words and names ("Now implement
# the approval step for large refunds" is about approvals and refunds, not steps). On LoCoMo
# conversations 1-3 (4-5), against full weight: false injection on another conversation's
# questions 4.2% -> 0.4% (6.6% -> 1.0%), on everyday prompts 5.6% -> 5.6% (13.3% -> 6.7%), the
# evidence share unchanged; 0.1 and 0.5 give about the same.
GENERIC_WEIGHT = 0.25
# Rule 2 in a smaller store, where words are counted: a frequent English word the store lacks
# weighs this much of a word; one it holds, a whole word (at a quarter, "What's the staging URL?"
# abstained: "staging" is a frequent word, "URL" is not in the store). On
# benchmarks/relevance_small.py's dev set, related prompts found: 93.8% at 1.0, 100% at 0.5 and
# 0.25, false injection 0.7% at all three.
SMALL_GENERIC_WEIGHT = 0.5

_DAYS_MONTHS = (
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march",
    "april", "may", "june", "july", "august", "september", "october", "november", "december",
)
# English capitalizes these by rule, not because they are names
_CALENDAR = frozenset([
    *_DAYS_MONTHS, "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
])



@lru_cache(maxsize=1)
def _time_terms() -> frozenset[str]:
    """The index terms of weekday and month names."""
    return frozenset(analyze(" ".join(_DAYS_MONTHS)))


# a word (inner apostrophes, dots, hyphens and underscores kept: "Caroline's", "Next.js",
# "snake_case"), a short option ("-p"), or what ends a sentence or opens a quote (the next word
# starts one); anything but space between two words ends a run of names
_PIECE = re.compile(
    r"(?P<opt>(?<![\w-])-[A-Za-z](?![\w-]))"
    r"|(?P<word>[^\W_](?:[\w'’.-]*[^\W_])?)"
    r"|(?P<end>[.!?;:]+(?=\s|$)|[\n\"“”«»()\[\]{}<>`*#|]+)"
)
# LaunchDarkly, iPhone, SQLAlchemy (mixed case); py3, gpt4 (letters, then a digit); Next.js,
# os.path (dotted)
_IDENTIFIER = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]|^[^\W\d_]+.*\d|^[^\W_]{2,}(?:\.[^\W_]{2,})+$")
# A coding prompt's own identifiers: a file or a path ("app.py", "src/app", "refund_service.py"), a
# snake_case or lower camelCase name ("parse_args", "getUser"). Not a library's dotted name
# ("numpy.argsort", "os.path"), a product ("LaunchDarkly", "Next.js": a capitalized name in ".js" is
# a JavaScript library's) nor a host ("acme.dev"): a question naming one asks about it, and the
# store must know it (a name, rule 1).
_CODE = re.compile(
    r"_|^[a-z][a-z\d]*[A-Z]|\.(?i:py|pyi|ipynb|js|jsx|ts|tsx|mjs|cjs|go|rs|rb|java|kt|kts|swift|c|h|cc|cpp|hpp|cs"
    r"|php|sh|sql|md|rst|txt|json|ya?ml|toml|ini|cfg|conf|lock|html?|css|scss|vue|svelte|proto|tf|xml|gradle|csv)$")
_JS_LIBRARY = re.compile(r"^[A-Z][a-z\d]*\.js$")
_LOWER_AFTER = re.compile(r"[\s\"'(“‘][^\W\d_A-Z]")  # a word after the first in lower case (or uncased)
_CJK = re.compile(CJK_CHAR)
_ABBREVIATION = 3  # a capitalized word this short followed by "." ("Dr.", "St.") continues a name


class Code(tuple[str, ...]):
    """A code identifier's index terms ("refund_service.py": refund, servic, py): among ``names``,
    but weighed as one word, not as a name (see the module docstring)."""

    __slots__ = ()


@lru_cache(maxsize=1024)
# complexity over 15: a scanner with one branch per kind of name (quoted, capitalised run, identifier, path, option)
def names(text: str) -> tuple[tuple[tuple[str, ...], ...], ...]:  # noqa: C901
    """The names and identifiers ``text`` mentions (see the module docstring), sentence by
    sentence: for each sentence that asks (ends with "?"; every sentence when none does), the
    index terms of each name in it, a code identifier's as a ``Code``; () when it names
    nothing."""
    # capitalization is informative only when some word after the first is in lower case
    cased = _LOWER_AFTER.search(text) is not None
    sentences: list[tuple[list[list[str]], bool]] = []  # each sentence's names, and whether it asks
    runs: list[list[str]] = []
    run: list[str] = []
    start = True  # the next word starts a sentence
    named = False
    last = 0  # where the previous piece ended
    code_end = -2  # where the last code identifier ended
    for m in _PIECE.finditer(text):
        if run and m.start() > last and not text[last : m.start()].isspace():  # "Gina, Jon": two names
            runs.append(run)
            run = []
        last = m.end()
        kind = m.lastgroup
        if kind == "end":
            end = m.group()
            if end == "." and run and run[-1][0].isupper() and len(run[-1]) <= _ABBREVIATION:
                continue  # "Dr. Seuss": the name goes on
            if run:
                runs.append(run)
                run = []
            if not start or runs:
                sentences.append((runs, "?" in end or "？" in end))
                runs = []
            start = True
            continue
        word = m.group()
        if kind == "word" and ((_CODE.search(word) and not _JS_LIBRARY.match(word))
                               or text[m.end() : m.end() + 1] == "/" or text[m.start() - 1 : m.start()] == "/"):
            # a file, a path, a function: what the prompt works on, not what it is about
            if run:
                runs.append(run)
                run = []
            if terms := analyze(word):
                if runs and runs[-1][0] == _CODE_MARK and code_end == m.start() - 1:  # "src/api": one path
                    runs[-1] += terms
                else:
                    runs.append([_CODE_MARK, *terms])
                named = True
            code_end = m.end()
            start = False
            continue
        if kind == "opt":
            name = True
        elif word.isalpha() and word[1:].islower():  # most words: no identifier, at most capitalized
            name = cased and not start and word[0].isupper() and word.casefold() not in _CALENDAR
        elif word[0].isdigit():  # "10am", "8th", "1990s": quantities
            name = False
        else:
            name = _IDENTIFIER.search(word) is not None or (
                cased and not start and word[0].isupper() and not word.isupper() and word.casefold() not in _CALENDAR)
        start = False
        if name:
            run.append(word)
            named = True
        elif run:
            runs.append(run)
            run = []
    if not named:
        return ()
    if run:
        runs.append(run)
    if not start or runs:
        sentences.append((runs, False))
    asking = [r for r, asks in sentences if asks] or [r for r, _ in sentences]
    return tuple(tuple(t for r in rs if (t := _terms(r))) for rs in asking)


_CODE_MARK = "\0code"  # heads a run of a code identifier's terms in ``names``


def _terms(run: list[str]) -> tuple[str, ...]:
    """A name's index terms (none for "I", "The"), a ``Code`` for an identifier's."""
    if run[0] == _CODE_MARK:
        return Code(dict.fromkeys(run[1:]))
    return tuple(dict.fromkeys(t for w in run for t in (_option(w) if w.startswith("-") else analyze(w))))


def _option(word: str) -> list[str]:
    """A short option's index term ("-p")."""
    return analyze(word) or [word.casefold()]


# What a text asks, part by part: its sentences (an abbreviation's dot ends none), and within a
# sentence a clause that opens with an interrogative word ("..., which laptop OS, how do deploys
# go out?")
_SENTENCE = re.compile(r"(?<=[.!?;:。！？])\s+|\n+")
_ABBREVIATED = re.compile(r"(?:^|\s)[A-Z][a-z]{0,2}\.$")  # "... Dr." goes on in the next piece
_CLAUSE = re.compile(r"[,;]\s*(?:(?:and|or|also|but)\s+)?(?=(?:what|which|who|whom|whose|when|where|why|how)\b)",
                     re.IGNORECASE)


@lru_cache(maxsize=1024)
def parts(text: str) -> tuple[str, ...]:
    """What ``text`` asks, in the parts ``abstains`` judges one by one: its sentences that ask
    (end with "?"; every sentence when none does), each cut where a clause of its own begins
    with an interrogative word."""
    sentences: list[str] = []
    for piece in _SENTENCE.split(text):
        if sentences and _ABBREVIATED.search(sentences[-1]):
            sentences[-1] += " " + piece
        elif piece.strip():
            sentences.append(piece)
    asking = [s for s in sentences if s.rstrip().endswith(("?", "？"))] or sentences
    return tuple(c for s in asking for c in _CLAUSE.split(s) if c.strip())


def code_weights(lex: Lexicon, named: Iterable[Iterable[tuple[str, ...]]], terms: Mapping[str, float]
                 ) -> Mapping[str, float]:
    """``terms`` (a query's) with the terms of its code identifiers (among ``named``, its ``names``)
    that the store lacks weighing one word between them: "refund_service.py" in "Fix the failing
    test in refund_service.py" is what the prompt works on, and its three unseen terms would
    otherwise be most of the score cut's ideal (a memory about running the tests would not cover a fifth)."""
    code = [c for sentence in named for c in sentence if isinstance(c, Code)]
    if not code:
        return terms
    out = dict(terms)
    for c in code:
        for t in c:
            if t in out and not lex.df(t):
                out[t] = min(out[t], terms[t] / len(c))
    return out


def abstains(lex: Lexicon, n: int, asked: Iterable[tuple[Mapping[str, float], Iterable[Iterable[tuple[str, ...]]]]]
             ) -> str | None:
    """Why a query gets no memory from a store of ``n`` memories whose terms are ``lex``:
    "unknown name", "unknown topic", or None (it is judged by the score cut). ``asked``: each of
    its ``parts``, as its terms and its ``names``; the query abstains when every part does."""
    why = None
    for terms, named in asked:
        part = _unknown(lex, n, terms, named)
        if part is None:
            return None
        why = "unknown name" if part or why == "unknown name" else "unknown topic"
    return why


# complexity over 15: the decision's rules (module docstring) written out together, so the code reads as the rule does
def _unknown(lex: Lexicon, n: int, text: Mapping[str, float], named: Iterable[Iterable[tuple[str, ...]]]  # noqa: C901
             ) -> bool | None:
    """Whether a part of a query (its terms ``text``, its ``names``) is about what the store does
    not know: None when it is not, else whether it names something the store never saw."""
    absent: set[str] = set()  # the terms of the names of which the store holds no word
    share: dict[str, float] = {}  # a code identifier's terms: one word's weight between them
    known = False
    for sentence in named:
        for terms in sentence:
            held = sum(1 for t in terms if lex.df(t))
            if isinstance(terms, Code):
                for t in terms:
                    share[t] = min(share.get(t, 1.0), 1 / len(terms))
            elif not held:
                absent.update(terms)
            known |= held == len(terms)
    if known and not absent:
        return None
    common, generic = common_terms(), generic_terms()
    small = n < SMALL_STORE
    unseen = idf(0.5, n)  # an unseen word weighs as one held by half a memory
    lacking = total = 0.0
    topic = numbers = False  # a word that is neither common nor a number; a number
    for term in text:
        # numbers say little; CJK text is indexed as bigrams, most of them spanning two words
        if term.isdigit() or _CJK.match(term):
            topic |= not term.isdigit()
            numbers |= term.isdigit()
            continue
        df = lex.df(term)
        if not df and term in _time_terms():
            continue  # "on Friday", "in May": when, not what about (known, it is: dated memories)
        topic |= term not in common
        if small:
            # in a small store document frequencies say little (see ``_index``): words are
            # counted, a common word the store lacks for COMMON_WEIGHT
            part = COMMON_WEIGHT if term in common and not df else 1.0
        elif term in common:  # says little of what a query is about
            continue
        else:
            part = idf(df, n) if df else unseen
        if term in absent:
            part *= NAME_WEIGHT
        elif term in generic and not (small and df):
            # a frequent word says less of what a query is about; in a small store only when the
            # store lacks it (missing by chance): held, it is what the query shares with the store
            part *= GENERIC_WEIGHT if not small else SMALL_GENERIC_WEIGHT
        part *= share.get(term, 1.0)
        total += part
        if not df:
            lacking += part
    if not topic:
        # nothing but numbers and common words names no topic ("What's 17 times 23?"); common words
        # alone are a follow-up ("and which one?") or about the user ("What's my name?"): the cut
        # and the context judge
        return bool(absent) if numbers else None
    if lacking > (SMALL_UNKNOWN_SHARE if small else UNKNOWN_SHARE) * total:
        return bool(absent)
    return None
