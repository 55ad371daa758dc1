"""What a store holds for retrieval = "hybrid": one embedder per model for the whole process, and per
store a vector index kept in step with the memories, searched beside BM25 and fused with it.

The fusion is deliberately conservative (a naive reciprocal-rank fusion of MiniLM and this BM25
lowered LoCoMo's evidence share, issue 32): BM25's hits keep their order and scores; a memory only
the semantic side found is added after them, and only when its similarity passes the model's
calibrated cut (``VectorIndex.threshold``: an unrelated prompt gets such a match about ``alpha``
of the time), so the semantic side abstains as BM25 does. Its score is set below every BM25 hit's,
in the semantic order.

It also abstains on a query that names something the store never mentions (a capitalized word
inside a sentence or an identifier, ``_index_relevance.names``: "What desserts has Maria made?"
asked of a store without Maria): static embeddings cannot tell one name from another, so such a
query matches whatever the store holds on its topic (Joanna's desserts), and what it asks about is
not there. On LoCoMo that was every semantic hit on another conversation's questions (0.4% of them
at the cut, 0 with the rule; benchmarks/semantic.py), and no hit on a conversation's own.

And it adds only memories that share no word with the query: one that does was BM25's to judge,
and BM25's relevance decision (issue 32 item 1) leaves such a memory out on purpose. The semantic
side is for what BM25 cannot see, a question in other words. Bringing back BM25's rejects gave
0.3 points of LoCoMo's evidence share on conversations 4-5 and one everyday prompt of 30 a coding
memory ("how do i undo the last commit in git" -> "Commit messages follow Conventional Commits");
without them hybrid's figures there are BM25's (benchmarks/semantic.py --relevance).

Nothing here distils: ``shared_embedder`` loads a model2vec directory or already-distilled static
embeddings (``distil_now=False``), and a model that is not ready gives one warning and None, so
opening a store (a namespace's, on a request) never waits minutes. Distil at start-up or with a
command (``_embed.prepare``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from .. import _paths
from .._errors import MemoryFileError
from ._embed import StaticEmbedder, _warn_once, open_embedder
from ._embed_vectors import VectorHit, VectorIndex
from ._index_relevance import names
from ._text import analyze

__all__ = ["ALPHA", "VECTORS_NAME", "SemanticSide", "fuse", "load_vectors", "open_side", "save_vectors",
           "shared_embedder"]

VECTORS_NAME = ".index.vectors"  # beside the index snapshot (``.index``) of a markdown directory
_DIGEST = 32  # bytes of SHA-256 before the vectors: what they were made from

ALPHA = 0.05  # the chance an unrelated prompt gets a semantic match past the cut
_FILL = 0.5  # a semantic-only hit scores this share of the lowest BM25 score found (or of the cut)

_embedders: dict[tuple[str, str], StaticEmbedder | None] = {}
_embedders_lock = threading.Lock()


def shared_embedder(model: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> StaticEmbedder | None:
    """The process's embedder for ``model`` (loaded once: every store and namespace shares it), or
    None after one warning (extra missing, model missing or not distilled yet)."""
    key = (str(Path(model).expanduser().absolute()), "" if home is None else str(home))
    with _embedders_lock:
        if key not in _embedders:
            _embedders[key] = open_embedder(model, home, distil_now=False)
        return _embedders[key]


def open_side(model: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None = None,
              alpha: float = ALPHA) -> SemanticSide | None:
    """A store's semantic side for ``model``, or None after one warning (no model named, the
    extra or the model missing, not distilled yet): the store then searches with BM25 alone."""
    if model is None or str(model) == "":
        _warn_once("", "none", "semantic retrieval is off: retrieval is 'hybrid' but no embedding_model is set; "
                   "searching with BM25 only")
        return None
    embedder = shared_embedder(model, home)
    return None if embedder is None else SemanticSide(embedder, alpha)


class SemanticSide:
    """A store's vector index: ``add``/``remove`` as memories change (microseconds each), ``search``
    with the calibrated cut. Thread-safe (the index locks)."""

    def __init__(self, embedder: StaticEmbedder, alpha: float = ALPHA) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
        self.embedder = embedder
        self.alpha = alpha
        self.index = VectorIndex(embedder.key, embedder.dims, embedder.null)
        # the store's words (every memory's index terms, with or without a vector): a query naming
        # something none of them is gets nothing from this side
        self._terms: dict[str, frozenset[str]] = {}
        self._known: Counter[str] = Counter()
        self._terms_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.index)

    def add(self, mid: str, text: str) -> None:
        """Embed ``text`` as ``mid``'s (replacing what it had); a text with no known token has no
        vector and is left out (BM25 still finds it), and so is one whose embedding fails (said
        once): the store's reading never fails for the vector side."""
        try:
            vec = self.embedder.embed(text)
        except Exception as exc:
            _warn_once(self.embedder.key, "embed", f"semantic retrieval: a memory could not be embedded "
                       f"({type(exc).__name__}); it is found by BM25 only")
            vec = None
        if vec is None:
            self.index.remove(mid)
        else:
            self.index.add(mid, vec)
        self._set_terms(mid, text)

    def add_many(self, items: Iterable[tuple[str, str]]) -> None:
        for mid, text in items:
            self.add(mid, text)

    def remove(self, mid: str) -> None:
        self.index.remove(mid)
        self._set_terms(mid, None)

    def _set_terms(self, mid: str, text: str | None) -> None:
        terms = frozenset(analyze(text)) if text is not None else frozenset()
        with self._terms_lock:
            old = self._terms.pop(mid, None)
            if old:
                self._known.subtract(old)
                for t in old:
                    if self._known[t] <= 0:
                        del self._known[t]
            if text is not None:
                self._terms[mid] = terms
                self._known.update(terms)

    def unknown_name(self, query: str) -> tuple[str, ...] | None:
        """The first name in ``query`` of which the store holds no word (its terms), or None."""
        with self._terms_lock:
            for part in names(query):
                for name in part:
                    if not any(t in self._known for t in name):
                        return name
        return None

    def search(self, query: str, k: int, exclude: Collection[str] = ()) -> list[VectorHit]:
        """The memories whose similarity to ``query`` passes the cut and that share no word with
        it, best first, at most ``k``; none when the query names something the store never
        mentions. A memory sharing a word with the query is BM25's to judge: its relevance decision
        saw it, and the semantic side does not bring back what that decision left out ("how do i
        undo the last commit in git" and "Commit messages follow Conventional Commits")."""
        if k <= 0 or self.unknown_name(query) is not None:
            return []
        vec = self.embedder.embed(query)
        if vec is None:
            return []
        asked = frozenset(analyze(query))
        want = k
        while True:  # rarely more than one round: few memories pass the cut
            hits = self.index.search(vec, want, self.index.threshold(self.alpha), tuple(exclude))
            with self._terms_lock:
                kept = [h for h in hits if not (self._terms.get(h.id, frozenset()) & asked)]
            if len(kept) >= k or len(hits) < want:
                return kept[:k]
            want *= 2

    def to_bytes(self) -> bytes:
        return self.index.to_bytes()

    def load(self, data: bytes, items: Iterable[tuple[str, str]] = ()) -> bool:
        """Take the vectors ``to_bytes`` wrote, and the words of ``items`` (the store's (id, search
        text), what they were made from); False (and nothing changed) when they are not this
        model's or not readable: the caller then adds the memories again."""
        try:
            index = VectorIndex.from_bytes(data, self.embedder.key, self.embedder.null)
        except ValueError:
            return False
        self.index = index
        for mid, text in items:
            self._set_terms(mid, text)
        return True


def _digest(items: Iterable[tuple[str, str]]) -> bytes:
    """What the vectors were made from: every (id, search text), in id order."""
    h = hashlib.sha256()
    for mid, text in sorted(items):
        h.update(f"{mid}\0{text}\0".encode("utf-8", "replace"))
    return h.digest()


def save_vectors(side: SemanticSide, root: Path, directory: Path, items: Iterable[tuple[str, str]]) -> None:
    """Write ``side``'s vectors beside the index snapshot, with the digest of what they were made
    from (``items``: the store's (id, search text)), atomically and never through a symlink."""
    data = _digest(items) + side.to_bytes()
    fd, tmp = _paths.mkstemp(root, directory, prefix=VECTORS_NAME + ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        _paths.replace(root, tmp, directory / VECTORS_NAME)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_vectors(side: SemanticSide, root: Path, directory: Path, items: Iterable[tuple[str, str]]) -> bool:
    """Take the vectors ``save_vectors`` wrote when they were made, by this model, from exactly
    ``items``; False (nothing taken) otherwise: the caller embeds the memories."""
    items = list(items)
    try:
        data = _paths.read_bytes(root, directory / VECTORS_NAME)
    except (OSError, MemoryFileError):
        return False
    if data[:_DIGEST] != _digest(items):
        return False
    return side.load(data[_DIGEST:], items)


def fills_in(found: int, k: int, rank_prior: float) -> bool:
    """Whether a semantic hit can be among the ``k`` a search returns after ``found`` BM25 hits: it
    is scored ``_FILL`` of the lowest BM25 score (``fuse``), so with ``k`` lexical hits or more only
    a stability prior (a factor ``1 ± rank_prior/2``; 0 when none is applied) wide enough to lift it
    past one of them could place it. When none can, the vector search is skipped: most queries."""
    return found < k or _FILL * (1 + rank_prior / 2) >= 1 - rank_prior / 2


def fuse(bm25: Sequence[tuple[str, float]], semantic: Sequence[VectorHit], k: int,
         cut: float = 0.0) -> list[tuple[str, float]]:
    """BM25's (id, score) hits as they are, then the semantic hits BM25 did not find, in their
    order, each scored below the lowest BM25 score (or ``cut`` when BM25 found nothing); at most
    ``k``. The semantic side never displaces a lexical hit."""
    out = list(bm25[:k])
    seen = {mid for mid, _ in out}
    floor = min((s for _, s in out), default=cut if cut > 0 else 1.0) * _FILL
    extra = [h for h in semantic if h.id not in seen]
    for i, h in enumerate(extra[:max(0, k - len(out))]):
        out.append((h.id, floor * (1.0 - i / (len(extra) + 1))))
    return out
