"""The vector side of hybrid retrieval: the memories' embeddings in one matrix beside BM25's index.

Rows are added and removed one at a time (a removed row is filled by the last one, so the matrix
stays dense and a search is one matrix-vector product). A search returns the top memories by
cosine, each with its z-score against the model's null (``Null``: unrelated texts' similarities),
and only those at or above ``min_z``: the semantic side abstains, by a calibrated similarity, not a
rank. ``threshold(n)`` gives the z a store of n memories needs so that an unrelated query's best
match passes it about ``alpha`` of the time (the more memories, the likelier a chance match).

``to_bytes``/``from_bytes`` carry it beside the index snapshot (markdown) or in a column
(PostgreSQL): a header naming the model's key and the dimensions, the ids, the rows as float16.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ._embed import Null

__all__ = ["VectorHit", "VectorIndex"]

Array = npt.NDArray[np.float32]
_MAGIC = b"MWVEC1\n"


@dataclass(frozen=True)
class VectorHit:
    id: str
    similarity: float  # cosine
    z: float  # against the model's null: how far past unrelated texts' similarity


class VectorIndex:
    """Embeddings by memory id, searched by cosine; ``key`` names the embedder that made them
    (vectors of another model are not comparable). Thread-safe."""

    def __init__(self, key: str, dims: int, null: Null) -> None:
        if dims <= 0:
            raise ValueError(f"dims must be positive, not {dims}")
        self.key, self.dims, self.null = key, dims, null
        self._rows = np.zeros((16, dims), np.float32)
        self._ids: list[str] = []
        self._slot: dict[str, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, mid: object) -> bool:
        return mid in self._slot

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._ids)

    def add(self, mid: str, vec: Array) -> None:
        """Set ``mid``'s embedding (a unit vector of ``dims``), replacing any it had."""
        vec = np.asarray(vec, np.float32).reshape(-1)
        if vec.shape[0] != self.dims:
            raise ValueError(f"a vector of {vec.shape[0]} dimensions for an index of {self.dims}")
        with self._lock:
            slot = self._slot.get(mid)
            if slot is None:
                slot = len(self._ids)
                if slot == len(self._rows):
                    grown = np.zeros((2 * len(self._rows), self.dims), np.float32)
                    grown[:slot] = self._rows[:slot]
                    self._rows = grown
                self._ids.append(mid)
                self._slot[mid] = slot
            self._rows[slot] = vec

    def add_many(self, items: Iterable[tuple[str, Array]]) -> None:
        for mid, vec in items:
            self.add(mid, vec)

    def remove(self, mid: str) -> bool:
        """Drop ``mid``; False when it was not there."""
        with self._lock:
            slot = self._slot.pop(mid, None)
            if slot is None:
                return False
            last = len(self._ids) - 1
            if slot != last:  # the last row fills the hole
                moved = self._ids[last]
                self._rows[slot] = self._rows[last]
                self._ids[slot] = moved
                self._slot[moved] = slot
            self._ids.pop()
            self._rows[last] = 0.0
            return True

    def threshold(self, alpha: float = 0.05, n: int | None = None) -> float:
        """The z a match needs so that, of ``n`` memories (default: this index's) unrelated to a
        query, the best passes with probability about ``alpha`` (a Bonferroni bound on the null's
        tail: each may pass with ``alpha / n``). Where the null's sample cannot resolve that tail,
        its normal approximation does."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
        n = max(1, len(self) if n is None else n)
        p = alpha / n
        sample = self.null.sample
        if p * len(sample) >= 10:  # at least ten null pairs beyond it: the empirical quantile
            # (np.quantile's linear interpolation, read off the sorted sample: O(1) per search)
            pos = (1.0 - p) * (len(sample) - 1)
            lo = int(pos)
            hi = min(lo + 1, len(sample) - 1)
            sim = float(sample[lo]) + (float(sample[hi]) - float(sample[lo])) * (pos - lo)
            return (sim - self.null.mean) / self.null.std
        return NormalDist().inv_cdf(1.0 - p)

    def search(self, query: Array, k: int, min_z: float | None = None, exclude: Sequence[str] = ()) -> list[VectorHit]:
        """The best ``k`` memories for ``query`` (a unit vector) whose z is at least ``min_z``
        (default: ``threshold()``), best first; [] when none passes."""
        if k <= 0:
            return []
        query = np.asarray(query, np.float32).reshape(-1)
        if query.shape[0] != self.dims:
            raise ValueError(f"a query of {query.shape[0]} dimensions for an index of {self.dims}")
        cut = self.threshold() if min_z is None else min_z
        floor = self.null.mean + cut * self.null.std
        with self._lock:
            n = len(self._ids)
            if n == 0:
                return []
            # einsum's own loop, not BLAS: OpenBLAS spreads a matrix-vector product over threads,
            # and on busy cores its p90 was 28 ms against einsum's 3.5 ms (6000 x 256, two cores)
            sims = np.einsum("ij,j->i", self._rows[:n], query)
            passing = np.flatnonzero(sims >= floor)
            if len(exclude):
                skip = {self._slot[m] for m in exclude if m in self._slot}
                passing = np.asarray([i for i in passing if i not in skip], np.int64)
            if len(passing) > k:
                passing = passing[np.argpartition(-sims[passing], k - 1)[:k]]
            order = passing[np.argsort(-sims[passing], kind="stable")]
            ids = [self._ids[i] for i in order]
        picked = sims[order]
        zs = self.null.z(picked)
        return [VectorHit(m, float(s), float(z)) for m, s, z in zip(ids, picked, zs, strict=True)]

    def to_bytes(self) -> bytes:
        """The index as bytes: magic, a JSON header (key, dims, ids), the rows as float16."""
        with self._lock:
            header = json.dumps({"key": self.key, "dims": self.dims, "ids": self._ids}).encode()
            rows = self._rows[:len(self._ids)].astype("<f2").tobytes()
        return _MAGIC + struct.pack("<I", len(header)) + header + rows

    @classmethod
    def from_bytes(cls, data: bytes, key: str, null: Null) -> VectorIndex:
        """The index ``to_bytes`` wrote; ``ValueError`` naming the problem when the bytes are not
        one, or were made under another model (``key``): the caller then re-embeds."""
        if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 4:
            raise ValueError("not a memwire vector index")
        at = len(_MAGIC)
        (size,) = struct.unpack("<I", data[at:at + 4])
        try:
            header = json.loads(data[at + 4:at + 4 + size])
            dims, ids, made_by = int(header["dims"]), [str(i) for i in header["ids"]], str(header["key"])
        except (ValueError, KeyError, TypeError):
            raise ValueError("a memwire vector index with an unreadable header") from None
        if made_by != key:
            raise ValueError("a vector index made by another embedding model; re-embed the memories")
        raw = data[at + 4 + size:]
        if len(raw) != len(ids) * dims * 2 or len(set(ids)) != len(ids):
            raise ValueError(f"a vector index of {len(ids)} ids whose rows do not match ({len(raw)} bytes)")
        out = cls(key, dims, null)
        rows = np.frombuffer(raw, "<f2").astype(np.float32).reshape(len(ids), dims)
        out._rows = np.zeros((max(16, len(ids)), dims), np.float32)
        out._rows[:len(ids)] = rows
        out._ids = ids
        out._slot = {m: i for i, m in enumerate(ids)}
        return out
