"""Text analysis for retrieval: the same function turns memories and queries into index terms.

``analyze`` case-folds, strips accents, splits on anything that is not a letter or digit, drops
English stopwords and one-letter words, and stems with the Snowball English stemmer (PyStemmer),
guarded: a stem that drops a long derivational suffix ("productivity" -> "product", the stem of
"production" too) is not taken (but a noun of action in "-ation" keeps its verb's stem:
"indentation" is "indent"), a word of three letters or fewer ("aws") is not stemmed, and a few
words are stemmed by hand ("linter" is "lint", "important" is no "import"). A
short command-line option ("-p") is a term of its own, so "the -p flag" is not just "flag".
A hyphenated compound ("de-stress", "e-mail") also yields its joined form
("destress", "email"), so either spelling matches. Possessives ("Caroline's") lose the "'s".

Text written without spaces between words (Chinese, Japanese kanji and kana, Korean Hangul) is
indexed as overlapping character bigrams, the same for memories and queries: "用户喜欢" -> "用户",
"户喜", "喜欢"; a run of one character is kept as itself. This is what Lucene's CJKAnalyzer does.
It needs no dictionary and no model (a segmenter such as jieba is a large dependency, and one per
language), treats the four scripts alike, and has no segmentation to get wrong: "中文" finds
"用户喜欢用中文回答问题" because both hold the bigram "中文". The cost is bigrams across word
boundaries ("户喜"): a run of n characters makes n - 1 bigrams for about n / 2 words, so the
index's score cut counts a bigram as half a word (``is_bigram``). And a one-character word
matches only in the same surroundings: "猫の名前" holds "猫の", "猫を飼う" holds "猫を", no "猫".
Korean words are spaced but take particles ("한국어로"), which bigrams absorb. Japanese voiced
kana keep their mark ("が" is not "か"): only Latin-style accents fold.

Emoji are terms of their own (they are not letters, so the word split would drop them): "🍕?"
finds "🍕 is my favourite food". A skin tone is dropped (👍🏽 is 👍), a flag is one term (🇯🇵),
and each emoji of a joined sequence (👩‍💻) is a term.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

from ..policies._scripts import CJK_CHAR

__all__ = ["CJK_CHAR", "COMMON_WORDS", "STOPWORDS", "analyze", "common_terms", "generic_terms", "is_bigram"]

# A compound is word parts joined by single hyphens/dots/apostrophes; we split it ourselves.
_TOKEN = re.compile(r"[^\W_]+(?:[-'’.][^\W_]+)*")
_JOINERS = re.compile(r"[-'’.]")
_POSSESSIVE = re.compile(r"['’]s$")
_NEGATION = re.compile(r"n['’]t$")
_CJK = re.compile(CJK_CHAR + "+")
# A flag (two regional indicators), or one pictograph (emoji blocks, misc symbols and technical,
# dingbats, ⭐): not a skin tone nor the ♀/♂ that a joined sequence adds
_EMOJI = re.compile(
    "[\U0001F1E6-\U0001F1FF]{2}"
    "|(?![\U0001F3FB-\U0001F3FF\u2640\u2642])[\U0001F000-\U0001FAFF\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff]"
)
# a short command-line option ("-p", "-n"): a term of its own, so "the -p flag" is not any flag
_OPTION = re.compile(r"(?<![\w-])-[a-z](?![\w-])")
_PIECE = re.compile(f"(?P<emoji>{_EMOJI.pattern})|(?P<option>{_OPTION.pattern})|{_TOKEN.pattern}")
_VOICING = "\u3099\u309a"  # kana voiced/semi-voiced marks: "が" is a different sound from "か"

# The common English function words (NLTK's list, plus contractions' fragments and a few
# conversational fillers). They carry no topic, so they would only add noise to BM25.
STOPWORDS: frozenset[str] = frozenset(
    ["a", "about", "above", "after", "again", "against", "ain", "all", "am", "an", "and", "any", "are", "aren", "as",
     "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "couldn", "d",
     "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "few", "for", "from", "further",
     "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers", "herself", "him", "himself",
     "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "ll", "m", "ma", "me", "mightn",
     "more", "most", "mustn", "my", "myself", "needn", "no", "nor", "not", "now", "o", "of", "off", "on", "once",
     "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "re", "s", "same", "shan", "she",
     "should", "shouldn", "so", "some", "such", "t", "than", "that", "the", "their", "theirs", "them", "themselves",
     "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "ve", "very",
     "was", "wasn", "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "why", "will",
     "with", "wouldn", "y", "you", "your", "yours", "yourself", "yourselves", "would", "could", "also", "yeah", "yes",
     "oh", "ok", "okay", "hey", "hi", "hello", "really"]
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
    ["able", "accept", "add", "age", "ago", "agree", "allow", "almost", "along", "already", "always", "another",
     "answer", "anything", "anyone", "appear", "area", "around", "ask", "away", "back", "bad", "become", "begin",
     "believe", "best", "better", "big", "bit", "bring", "build", "buy", "call", "came", "care", "carry", "case",
     "cause", "certain", "change", "check", "child", "children", "close", "come", "consider", "continue", "could",
     "course", "cut", "day", "days", "decide", "different", "done", "early", "easy", "else", "end", "enough", "even",
     "ever", "every", "everyone", "everything", "example", "expect", "experience", "face", "fact", "fall", "far",
     "feel", "few", "find", "fine", "first", "follow", "form", "found", "friend", "full", "game", "get", "give",
     "given", "go", "going", "gone", "good", "got", "great", "group", "grow", "guess", "guy", "half", "hand", "happen",
     "happy", "hard", "head", "hear", "help", "high", "hold", "home", "hope", "hour", "house", "idea", "important",
     "include", "instead", "keep", "kind", "know", "large", "last", "late", "later", "lead", "learn", "least", "leave",
     "left", "less", "let", "life", "light", "like", "line", "little", "live", "long", "look", "lot", "love", "low",
     "made", "make", "man", "many", "matter", "maybe", "mean", "might", "mind", "minute", "moment", "month", "morning",
     "move", "much", "must", "name", "need", "never", "new", "next", "nice", "night", "number", "often", "old", "one",
     "open", "order", "others", "part", "pass", "pay", "people", "person", "place", "plan", "play", "point", "possible",
     "pretty", "problem", "put", "question", "quite", "rather", "read", "ready", "real", "really", "reason", "remember",
     "rest", "right", "room", "run", "said", "same", "saw", "say", "second", "see", "seem", "seen", "set", "several",
     "show", "side", "since", "small", "something", "sometimes", "soon", "sort", "start", "stay", "still", "stop",
     "story", "sure", "take", "talk", "tell", "thing", "things", "think", "though", "thought", "three", "time", "today",
     "together", "told", "tomorrow", "tonight", "took", "try", "turn", "two", "understand", "until", "use", "used",
     "usually", "want", "watch", "way", "week", "well", "went", "whole", "without", "woman", "word", "work", "world",
     "write", "year", "years", "yesterday", "yet", "young",
     # prepositions the stopword list leaves in: function words, never what a message is about
     "across", "amid", "among", "behind", "beneath", "beside", "besides", "beyond", "despite", "except", "inside",
     "near", "onto", "outside", "past", "per", "throughout", "till", "toward", "towards", "underneath", "unlike",
     "upon", "via", "within"]
)

# The few thousand most frequent English words ("implement", "step", "large", "column"), most
# frequent first: package data that tools/common_words.py derives from tokenizer vocabularies
# (see there). A wider net than COMMON_WORDS, for the relevance decision only: a question's words
# in it say less of what it is about than its rarer words, names and identifiers.
GENERIC_FILE = "common_words.txt"

log = logging.getLogger("memwire")

_stem_lock = threading.Lock()


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer  # lazy: keeps `import memwire` light

    return Stemmer.Stemmer("english")


# Snowball strips derivational suffixes too, and so joins words of other meanings: "productivity",
# "production" and "productive" all become "product", "organization" "organ", "international"
# "intern". Its stem is taken only when it drops at most _DERIVED letters of the word's
# uninflected form (the word without its plural, past, -ing or -ly: "productivities" ->
# "productivity"), else the word keeps that form: "adoption" -> "adopt", "deployment" -> "deploy",
# "studies" -> "studi", but "productivity", "organization", "international" stay themselves. A
# word of three letters or fewer is not stemmed: the "s" of "aws" or "ios" is no plural.
_DERIVED = 4
# A noun of action in "-ation" keeps its verb's stem ("indentation" -> "indent", "configuration" ->
# "configur", "documentation" -> "document"): "Which indentation style?" is about "indents with
# tabs". Five letters, not more: "installation" -> "instal" stays, and so does "productivity".
_ACTION = 5
_SHORT = 3
# Words the stemmer gets wrong for a coding store, by hand. Tools named after what they do, which
# it leaves whole ("linter" is no "lint"): "How do I run the linter?" is about "Use ruff for
# linting". A list, not a rule: most nouns in "-er" are no agent of a verb ("user", "paper",
# "docker", "letter").
_TOOLS = {"linter": "lint", "linters": "lint", "formatter": "format", "formatters": "format",
          # and a word the stemmer joins to another's: "important" is no "import" (of a module)
          "important": "important", "importance": "important", "importantly": "important"}
_INFLECTIONS = (("ies", "y"), ("ied", "y"), ("ily", "y"), ("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"),
                ("es", ""), ("s", ""), ("ly", ""))


def _snowball(word: str) -> str:
    # PyStemmer objects are not documented as thread-safe; the cache makes the lock rarely taken.
    with _stem_lock:
        return str(_stemmer().stemWord(word))


def _dropped(word: str, stem: str) -> int:
    """How many letters at the end of ``word`` its ``stem`` does not keep."""
    n = 0
    for a, b in zip(word, stem):  # noqa: B905 - the common prefix
        if a != b:
            break
        n += 1
    return len(word) - n


def _uninflected(word: str, stem: str) -> str:
    """``word`` without its inflection: the shortest of its forms with an inflectional ending
    taken off that stems to ``stem`` (``word`` itself when none does)."""
    best = word
    for end, put in _INFLECTIONS:
        if word.endswith(end) and len(word) - len(end) >= _SHORT:
            form = word[: -len(end)] + put
            if len(form) < len(best) and _snowball(form) == stem:
                best = form
    return best


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    if word in _TOOLS:
        return _TOOLS[word]
    word = _IRREGULAR.get(word, word)
    if len(word) <= _SHORT:
        return word
    stem = _snowball(word)
    if _dropped(word, stem) <= _DERIVED:
        return stem
    base = _uninflected(word, stem)
    most = _ACTION if base.endswith("ation") else _DERIVED
    return stem if _dropped(base, stem) <= most else base


def _fold(text: str) -> str:
    text = text.casefold()
    if text.isascii():
        return text
    # "café" -> "cafe": decompose and drop the combining marks but kana voicing, then recompose
    # (Hangul syllables, voiced kana)
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) or c in _VOICING)
    return unicodedata.normalize("NFC", kept)


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def _add_word(tok: str, out: list[str]) -> None:
    if _NEGATION.search(tok):  # "don't", "won't": auxiliaries, all stopwords
        return
    tok = _POSSESSIVE.sub("", tok)
    parts = [p for p in _JOINERS.split(tok) if p]
    out.extend(parts)
    # "de-stress" also as "destress" (hyphens only: not "don't" -> "dont", "a.b" -> "ab")
    if len(parts) > 1 and set(_JOINERS.findall(tok)) == {"-"}:
        out.append("".join(parts))


def _words(text: str) -> list[str]:
    out: list[str] = []
    for m in _PIECE.finditer(_fold(text)):
        tok = m.group()
        # most words: nothing to split, join or drop (4x faster)
        if (tok.isascii() and tok.isalnum()) or m.group("emoji") or m.group("option"):
            out.append(tok)
        elif _CJK.search(tok):  # no spaces between words: bigrams of each CJK run, the rest as words
            for piece in re.split(f"({_CJK.pattern})", tok):
                if _CJK.fullmatch(piece):
                    out.extend(_bigrams(piece))
                elif piece:
                    _add_word(piece, out)
        else:
            _add_word(tok, out)
    return out


def _keep(w: str) -> bool:
    # one-letter words go ("I", "a", Russian "и"), but not digits, a lone CJK character or an emoji
    return w not in STOPWORDS and (len(w) > 1 or w.isdigit() or bool(_CJK.match(w) or _EMOJI.match(w)))


def is_bigram(term: str) -> bool:
    """Whether an index term is a CJK bigram (half a word, for the score cut)."""
    return len(term) == 2 and _CJK.fullmatch(term) is not None


@lru_cache(maxsize=1)
def common_terms() -> frozenset[str]:
    """COMMON_WORDS as index terms (stemmed)."""
    return frozenset(analyze(" ".join(COMMON_WORDS)))


@lru_cache(maxsize=1)
def generic_terms() -> frozenset[str]:
    """The words of GENERIC_FILE as index terms (stemmed), COMMON_WORDS' terms left out; none,
    with one warning, when the file is missing (the relevance decision then knows fewer words)."""
    from importlib.resources import files  # lazy: only a search needs the list

    try:
        words = files("memwire.memory").joinpath(GENERIC_FILE).read_text("utf-8")
    except OSError as exc:
        log.warning("memwire: the common word list %s cannot be read (%s)", GENERIC_FILE, type(exc).__name__)
        return frozenset()
    return frozenset(analyze(words)) - common_terms()


def analyze(text: str) -> list[str]:
    """The index terms of ``text``, in order: folded, stopwords dropped, stemmed."""
    return [_stem(w) for w in _words(text) if _keep(w)]


@lru_cache(maxsize=1024)
def recent_terms(text: str) -> tuple[str, ...]:
    """``analyze(text)``, remembered for the texts a conversation sends again and again: each
    message is the query of its turn, then context of the next turns' queries."""
    return tuple(analyze(text))
