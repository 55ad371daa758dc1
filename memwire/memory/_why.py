"""Why a search found what it found, or nothing: for a person reading ``memwire search`` and
``memwire preview`` (issue 32), never on a request's path.

Each hit: the query's words the memory holds, as the person wrote them ("staging", not the stem
"stage"), matched with the index's own analysis (``_text.analyze``, ``_index.date_terms``), and,
with retrieval = "hybrid", whether BM25 found it or only the semantic side did (then with its
similarity). Nothing found: one reason, read from the decisions the search itself makes, not a
second judgement beside them: the store is empty; the query has no word to search by; no memory
shares a word with it; the index abstains (``BM25Index.abstains``: the query names something, or is
about a topic, no memory mentions); or the best memory covers less of the query than the score cut.
For the last, the highest cut at which a memory comes back is found by asking the search itself
(``_closest``), so the ``--min-score`` it suggests does bring that memory back.

It costs a few searches more than the search it explains: only the command line asks for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..policies._query import Query
from ._index import DEFAULT_MIN_SCORE, BM25Index, date_terms
from ._index_relevance import names
from ._model import Memory
from ._protocol import Store
from ._store_base import _PRIOR_POOL
from ._text import _PIECE, CJK_CHAR, analyze

__all__ = ["HitWhy", "Nothing", "explain_hits", "why_nothing"]

# the index's word pieces (words, short options, emoji), found in the text as written: the index
# finds them in case-folded text, where "-P" is "-p"
_SURFACE = re.compile(_PIECE.pattern, re.IGNORECASE)
_CJK = re.compile(CJK_CHAR)
_STEPS = 24  # halvings in ``_closest``: the cut found to within 2^-24 of the store's cut
_SHOWN = 6  # unknown words named at most


@dataclass(frozen=True)
class HitWhy:
    """Why one memory was chosen: the query's words it holds (``matched``; ``context``: words of
    the earlier messages only, a turn's query), and which side found it (``via``: "bm25", or
    "semantic" with its cosine ``similarity``)."""

    id: str
    matched: tuple[str, ...]
    via: str = "bm25"
    similarity: float | None = None
    context: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for a person."""
        parts = []
        if self.via == "semantic":
            sim = "" if self.similarity is None else f", similarity {self.similarity:.2f}"
            parts.append(f"close in meaning (semantic{sim})")
        if self.matched:
            parts.append("matched: " + ", ".join(self.matched))
        if self.context:
            parts.append("from earlier messages: " + ", ".join(self.context))
        return "; ".join(parts) or "matched: no word of the query (a conversation neighbor's)"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"matched": list(self.matched), "via": self.via}
        if self.via == "semantic":
            out["similarity"] = self.similarity
        if self.context:
            out["matched_context"] = list(self.context)
        return out


@dataclass(frozen=True)
class Nothing:
    """Why a search found nothing: ``reason`` (empty, no_words, no_shared_word, unknown_name,
    unknown_topic, under_cut, not_passed) and a sentence for a person (``text``)."""

    reason: str
    text: str
    unknown: tuple[str, ...] = ()     # unknown_name / unknown_topic: the words no memory holds
    best: float | None = None         # under_cut: the highest cut at which a memory comes back
    cut: float | None = None          # the cut the search used
    closest: str | None = None        # under_cut: that memory's id

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason, "text": self.text}
        if self.unknown:
            out["unknown"] = list(self.unknown)
        if self.cut is not None:
            out["cut"] = self.cut
        if self.best is not None:
            out["best"] = self.best
        if self.closest is not None:
            out["closest"] = self.closest
        return out


def cut_of(store: Store, min_score: float | None) -> float:
    """The score cut a search of ``store`` with ``min_score`` uses (``StoreBase.search``)."""
    if min_score is not None:
        return min_score
    return DEFAULT_MIN_SCORE if store.min_score is None else float(store.min_score)


def _words(text: str) -> list[tuple[str, frozenset[str]]]:
    """The words of ``text`` as written, each with its index terms (none for a stopword). A run of
    CJK characters gives its bigrams, each shown as itself."""
    out: list[tuple[str, frozenset[str]]] = []
    for m in _SURFACE.finditer(text):
        word = m.group()
        terms = analyze(word)
        if _CJK.search(word):
            out += [(t, frozenset([t])) for t in terms]
        elif terms:
            out.append((word, frozenset(terms)))
    return out


def _shown(words: Iterable[str]) -> tuple[str, ...]:
    """``words`` once each (case aside), in order."""
    seen: dict[str, str] = {}
    for w in words:
        seen.setdefault(w.casefold(), w)
    return tuple(seen.values())


def matched_words(text: str, memory: Memory) -> tuple[str, ...]:
    """The words of ``text`` whose index terms ``memory`` holds (its text, tags, topic, date)."""
    held = set(analyze(memory.search_text())) | set(date_terms(memory.date))
    return _shown(w for w, terms in _words(text) if terms & held)


def explain_hits(store: Store, query: str, memories: Sequence[Memory], *, k: int, min_score: float | None = None,
                 context: Sequence[str] = (), exclude: Collection[str] = ()) -> list[HitWhy]:
    """Why each of ``memories`` (what a search of ``query`` returned, or a turn's block) was chosen.
    ``k``, ``min_score``, ``context`` and ``exclude``: the search's."""
    try:
        semantic = store.similarities(query, k, exclude)
    except Exception:  # the store's search failed open to BM25 the same way
        semantic = {}
    if semantic is not None:  # hybrid: which hits BM25 found (as ``index_hits`` asks it)
        bm25 = {mid for mid, _ in store.index.search(Query(query, tuple(context)), k + _PRIOR_POOL,
                                                    cut_of(store, min_score), exclude)}
    out = []
    for mem in memories:
        words = matched_words(query, mem)
        earlier = _shown(w for c in context for w in matched_words(c, mem) if w.casefold() not in
                         {x.casefold() for x in words})
        if semantic is not None and mem.id not in bm25:
            out.append(HitWhy(mem.id, words, "semantic", semantic.get(mem.id), earlier))
        else:
            out.append(HitWhy(mem.id, words, "bm25", None, earlier))
    return out


def why_nothing(store: Store, query: str, *, min_score: float | None = None, context: Sequence[str] = (),
                exclude: Collection[str] = (), lower: str = "--min-score {}") -> Nothing:
    """Why a search of ``query`` (``min_score``, ``context``, ``exclude`` as it was run) found
    nothing. Call it after that search, on the same store (read as the search left it). ``lower``:
    how the person sets another cut (formatted with the value)."""
    cut = cut_of(store, min_score)
    if not len(store):
        return Nothing("empty", f"{store.location} holds no memories yet", cut=cut)
    if not analyze(query) and not any(analyze(c) for c in context):
        return Nothing("no_words", "the query has no word to search by (only stopwords or punctuation)", cut=cut)

    def found(at: float) -> list[Any]:
        return store.search(query, 1, min_score=at, context=context, exclude=exclude, refresh=False)

    if cut > 0:
        why = store.index.abstains(Query(query, tuple(context)))
        if why is not None:
            return _abstained(store.index, query, why, cut, lower.format(0))
    tiny = math.ulp(0.0) if cut > 0 else 0.0
    if not found(tiny):
        return Nothing("no_shared_word", "no memory shares a word with the query", cut=cut)
    if cut <= 0:  # every memory sharing a word would have come: the search excluded them
        return Nothing("not_passed", "nothing passed the search", cut=cut)
    best, closest = _closest(found, tiny, cut)
    if best is None or closest is None:
        return Nothing("not_passed", f"no memory passed the score cut {cut:.2f}", cut=cut)
    # the cut to suggest, in two decimals: the nearest when the search takes it, else the one below
    shown = round(best, 2) if 0 < round(best, 2) < cut and found(round(best, 2)) else math.floor(best * 100) / 100
    option = lower.format(f"{shown:.2f}" if shown > 0 else 0)
    text = (f"the closest memory, {closest.id} ({_brief(closest.text)}), passes a score cut of "
            f"{max(shown, math.floor(best * 1000) / 1000):.3f} at most, and the cut is {cut:.2f}: {option} shows it")
    return Nothing("under_cut", text, best=best, cut=cut, closest=closest.id)


def _closest(found: Any, lo: float, hi: float) -> tuple[float | None, Memory | None]:
    """The highest cut in [lo, hi) at which the search still returns a memory (it returns one at
    ``lo``, none at ``hi``), by halving, and that memory: the search's own decision, asked."""
    hits = found(lo)
    if not hits:
        return None, None
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        at = found(mid)
        if at:
            lo, hits = mid, at
        else:
            hi = mid
    return lo, hits[0].memory


def _brief(text: str, most: int = 60) -> str:
    text = " ".join(text.split())
    return f'"{text}"' if len(text) <= most else f'"{text[: most - 1]}…"'


def _abstained(index: BM25Index, query: str, why: str, cut: float, anyway: str) -> Nothing:
    """Nothing for a query the index abstains on, naming the words no memory holds."""
    words = _words(query)

    def known(term: str) -> bool:
        return bool(index.scores({term: 1.0}))

    unknown = [w for w, terms in words if not any(t.isdigit() or known(t) for t in terms)]
    if why == "unknown name":
        absent = {t for part in names(query) for name in part if not any(known(t) for t in name) for t in name}
        unknown = [w for w, terms in words if terms & absent] or unknown
    shown = _shown(unknown)[:_SHOWN]
    quoted = ", ".join(f'"{w}"' for w in shown)
    if why == "unknown name":
        text = f"the query names {quoted or 'something'}, which no memory mentions"
    else:
        text = "the query is about what no memory mentions" + (f" ({quoted})" if quoted else "")
    return Nothing(why.replace(" ", "_"), f"{text}; {anyway} searches anyway", unknown=shown, cut=cut)
