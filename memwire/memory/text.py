"""Text analysis for retrieval: the same function turns memories and queries into index terms.

``analyze`` case-folds, strips accents, splits on anything that is not a letter or digit, drops
English stopwords and one-letter words, and stems with the Snowball English stemmer (PyStemmer).
A hyphenated compound ("de-stress", "e-mail") also yields its joined form
("destress", "email"), so either spelling matches. Possessives ("Caroline's") lose the "'s".

Text written without spaces (Chinese, Japanese kana and kanji, Korean Hangul) is indexed as
overlapping character bigrams ("用户喜欢" -> "用户", "户喜", "喜欢"), a lone character as itself:
what Lucene's CJKAnalyzer does. It needs no dictionary and no model, works the same for every
such script, and a query matches a memory when they share a two-character sequence. Emoji are
terms of their own, so "🍕?" finds the memory about pizza that has the emoji.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

__all__ = ["analyze", "STOPWORDS", "COMMON_WORDS", "common_terms"]

# A compound is word parts joined by single hyphens/dots/apostrophes; we split it ourselves.
_TOKEN = re.compile(r"[^\W_]+(?:[-'’.][^\W_]+)*")
_JOINERS = re.compile(r"[-'’.]")
_POSSESSIVE = re.compile(r"['’]s$")
_NEGATION = re.compile(r"n['’]t$")
# Han, kana, Hangul (syllables and compatibility jamo), CJK compatibility ideographs
_CJK = re.compile(r"[\u3040-\u30ff\u3131-\u318e\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_EMOJI = re.compile(r"[\U0001F000-\U0001FAFF\u2600-\u27BF]")

# The common English function words (NLTK's list, plus contractions' fragments and a few
# conversational fillers). They carry no topic, so they would only add noise to BM25.
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against ain all am an and any are aren as at be because been before
    being below between both but by can couldn d did didn do does doesn doing don down during each
    few for from further had hadn has hasn have haven having he her here hers herself him himself his
    how i if in into is isn it its itself just ll m ma me mightn more most mustn my myself needn no
    nor not now o of off on once only or other our ours ourselves out over own re s same shan she
    should shouldn so some such t than that the their theirs them themselves then there these they
    this those through to too under until up ve very was wasn we were weren what when where which
    while who whom why will with wouldn y you your yours yourself yourselves
    would could also yeah yes oh ok okay hey hi hello really
    """.split()
)

# Irregular past forms -> base form, so "bought" finds "buy" and "went" finds "go" (the stemmer
# only strips suffixes). Forms that are also common nouns ("bit", "rose", "saw"?) are left out
# when the noun is the likelier reading.
_IRREGULAR: dict[str, str] = {}
for _line in """
    arise arose arisen|awake awoke awoken|become became|begin began begun|bend bent|bet|bite bitten
    bleed bled|blow blew blown|break broke broken|breed bred|bring brought|build built|burn burnt
    buy bought|catch caught|choose chose chosen|cling clung|come came|creep crept|deal dealt
    dig dug|draw drew drawn|dream dreamt|drink drank drunk|drive drove driven|eat ate eaten
    fall fell fallen|feed fed|feel felt|fight fought|find found|flee fled|fly flew flown
    forbid forbade forbidden|forget forgot forgotten|forgive forgave forgiven|freeze froze frozen
    get got gotten|give gave given|go went gone|grow grew grown|hang hung|hear heard|hide hid hidden
    hold held|keep kept|kneel knelt|know knew known|lay laid|lead led|leap leapt|learn learnt
    leave left|lend lent|lie lain|light lit|lose lost|make made|mean meant|meet met
    mistake mistook mistaken|overcome overcame|pay paid|ride rode ridden|ring rang rung|run ran
    say said|see saw seen|seek sought|sell sold|send sent|shake shook shaken|shine shone
    shoot shot|shrink shrank shrunk|sing sang sung|sink sank sunk|sit sat|sleep slept|slide slid
    speak spoke spoken|speed sped|spend spent|spin spun|stand stood|steal stole stolen|stick stuck
    sting stung|strike struck stricken|strive strove striven|swear swore sworn|sweep swept
    swim swam swum|swing swung|take took taken|teach taught|tear tore torn|tell told|think thought
    throw threw thrown|understand understood|wake woke woken|wear wore worn|weave wove woven
    weep wept|win won|withdraw withdrew withdrawn|write wrote written|undertake undertook undertaken
    """.replace("\n", "|").split("|"):
    if not _line.strip():
        continue
    _base, *_forms = _line.split()
    for _form in _forms:
        _IRREGULAR[_form] = _base

# Frequent English content words: they say little about what a message is about ("make", "good",
# "time", "work"). Not stopwords (a memory may hinge on one), but the index's score cut counts
# them for less, so "how do vaccines work?" does not pull up a memory about someone's work.
COMMON_WORDS: frozenset[str] = frozenset(
    """
    able accept add age ago agree allow almost along already always another answer anything
    anyone appear area around ask away back bad become begin believe best better big bit bring
    build buy call came care carry case cause certain change check child children close come
    consider continue could course cut day days decide different done early easy else end enough
    even ever every everyone everything example expect experience face fact fall far feel few
    find fine first follow form found friend full game get give given go going gone good got
    great group grow guess guy half hand happen happy hard head hear help high hold home hope
    hour house idea important include instead keep kind know large last late later lead learn
    least leave left less let life light like line little live long look lot love low made make
    man many matter maybe mean might mind minute moment month morning move much must name need
    never new next nice night number often old one open order others part pass pay people person
    place plan play point possible pretty problem put question quite rather read ready real
    really reason remember rest right room run said same saw say second see seem seen set several
    show side since small something sometimes soon sort start stay still stop story sure take
    talk tell thing things think though thought three time today together told tomorrow took
    try turn two understand until use used usually want watch way week well went whole without
    woman word work world write year years yesterday yet young
    """.split()
)

_stem_lock = threading.Lock()


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer  # lazy: keeps `import memwire` light

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    word = _IRREGULAR.get(word, word)
    # PyStemmer objects are not documented as thread-safe; the cache makes the lock rarely taken.
    with _stem_lock:
        return str(_stemmer().stemWord(word))


def _fold(text: str) -> str:
    text = text.casefold()
    if text.isascii():
        return text
    # "café" -> "cafe": decompose and drop the combining marks (then recompose: Hangul syllables)
    stripped = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", stripped)


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def _words(text: str) -> list[str]:
    out: list[str] = []
    folded = _fold(text)
    for m in _TOKEN.finditer(folded):
        tok = m.group()
        if _CJK.search(tok):  # no spaces between words: bigrams of each CJK run, the rest as words
            for piece in re.split(f"({_CJK.pattern})", tok):
                if _CJK.fullmatch(piece):
                    out.extend(_bigrams(piece))
                elif piece:
                    out.extend(_words(piece))
            continue
        if _NEGATION.search(tok):  # "don't", "won't": auxiliaries, all stopwords
            continue
        tok = _POSSESSIVE.sub("", tok)
        parts = [p for p in _JOINERS.split(tok) if p]
        out.extend(parts)
        # "de-stress" also as "destress" (hyphens only: not "don't" -> "dont", "a.b" -> "ab")
        if len(parts) > 1 and set(_JOINERS.findall(tok)) == {"-"}:
            out.append("".join(parts))
    out.extend(_EMOJI.findall(folded))
    return out


@lru_cache(maxsize=1)
def common_terms() -> frozenset[str]:
    """COMMON_WORDS as index terms (stemmed)."""
    return frozenset(analyze(" ".join(COMMON_WORDS)))


def analyze(text: str) -> list[str]:
    """The index terms of ``text``, in order: folded, stopwords dropped, stemmed."""
    return [_stem(w) for w in _words(text) if w not in STOPWORDS and (len(w) > 1 or w.isdigit() or not w.isascii())]
