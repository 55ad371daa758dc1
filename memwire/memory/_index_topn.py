"""The BM25 index's top-N search: the pool, the best memories on the query's own terms that pass
the score cut, found exactly while skipping most postings (``best``), and cut to its size
(``pool``). ``tests/memory/test_index_pruning.py`` checks it against scoring every memory.

Called under the index's lock, each query term's ``coef`` set for the query's quantum.
"""

from __future__ import annotations

import math
from typing import Any

from ._index_postings import UNBOUNDED, held, load_numpy, member
from ._index_scoring import COMMON_WEIGHT, Scorer, Term

__all__ = ["best", "pool"]

_BATCH = 200  # levels of up to this many postings (together) are walked in one pass (see best)
_SMALL = 2000  # a query whose terms hold this many postings or fewer has them all walked at once
# the pool's first estimate scores the best memories touched so far exactly (_probe) once there
# are this many times the pool's size of postings left to walk or candidates left to look up
_PROBE_WORTH = 5
# and once the walk is over, the candidates left that many times the pool's size or more are probed
# (again): their partial scores are closer to their own now (200: at 1M, the slow tail's p99 from
# 32 to 23 ms; at 100k a second probe costs more than it saves)
_REPROBE = 200

# a level of a term's postings to walk: (bound shed per posting, term, level, the term's rest after)
_Step = tuple[float, Term, int, float]


def best(sc: Scorer, terms: list[Term], size: int, cuts: tuple[float, float] | None, xs: Any,
         avgdl: float) -> tuple[Any, Any]:
    """The memories that pass the cut and may be among the ``size`` best on ``terms`` (by
    their own score, not counting ``xs``), with their exact own scores; every memory of that
    top ``size`` is among them.

    MaxScore over the terms' postings, with no store-sized work: the memories touched and
    their partial scores are kept as two sorted arrays, each walk merged into them
    (``_merge``). A term's postings are in levels by frequency (3 or more, 2, 1:
    ``Postings``), so that what a common word can add to most memories is bounded by what
    it adds at frequency 1. Levels are walked (their parts added to the memories they hold)
    best first by what they take off the bound per posting (``_steps``), until what the rest can
    add together (``Scorer.bound``) cannot lift a memory that holds none of them into the top
    ``size`` nor over the cut (``_walk``). The ``size``-th best score is estimated from below by
    scoring exactly the memories best so far (``_probe``: once during the walk, when enough of
    them are near the cut; again after it for a slow query's many candidates). The memories
    touched that can still make it get the other terms' parts by lookups (``_look_up``), term
    by term, dropping those that no longer can; the cut is checked last on exact scores
    (``_cut``)."""
    # the cut counts common words COMMON_WEIGHT: their share is summed at the end, for the
    # memories left; until then the cut is judged on bounds (the share is >= 0 and <= all)
    commons = cuts is not None and any(x.common for x in terms)
    cand, a, theta, probed = _walk(sc, _steps(sc, terms, avgdl), terms, size, cuts, xs, avgdl, commons)
    left = sorted((x for x in terms if x.rest > 0), key=lambda x: -x.rest)
    if left and len(cand) > (_REPROBE if probed else _PROBE_WORTH) * size and _promising(a, size, cuts):
        theta = max(theta, _probe(sc, cand, a, size, terms, commons, cuts, xs, avgdl))
    if left:
        keep = _can(a, terms, theta, cuts)
        cand, a = cand[keep], a[keep]
    cand, a, c, summed = _look_up(sc, left, cand, a, terms, theta, cuts, commons, avgdl)
    if cuts is not None and len(cand):
        cand, a = _cut(sc, cand, a, c, summed, terms, cuts, avgdl)
    return cand, a


def _steps(sc: Scorer, terms: list[Term], avgdl: float) -> list[_Step]:
    """The levels of the terms' postings by frequency (>= 3, 2, 1), in the order to walk them: by
    what they take off the bound per posting, a term's highest first (until a level is walked,
    the memories of the levels below it are bounded by its lowest frequency). Sets each term's
    ``rest`` (its bound) and ``thr`` (none walked)."""
    steps: list[_Step] = []
    for x in terms:
        p = x.p
        n2, n3 = p.at_least(2).n, p.at_least(3).n
        levels = [lv for lv, here in ((3, n3), (2, n2 - n3), (1, p.n - n2)) if here]
        x.rest = sc.bound(x, p.maxtf if levels[0] == 3 else levels[0], avgdl)
        x.thr = UNBOUNDED
        rest, worth = x.rest, math.inf
        for j, lv in enumerate(levels):
            after = sc.bound(x, levels[j + 1], avgdl) if j + 1 < len(levels) else 0.0
            worth = min(worth, (rest - after) / (n3 if lv == 3 else n2 if lv == 2 else p.n))
            steps.append((worth, x, lv, after))
            rest = after
    steps.sort(key=lambda st: -st[0])  # stable: a term's levels stay in order
    return steps


def _walk(sc: Scorer, steps: list[_Step], terms: list[Term], size: int, cuts: tuple[float, float] | None,
          xs: Any, avgdl: float, commons: bool) -> tuple[Any, Any, float, bool]:
    """Walk the ``steps`` while what the levels left can add may lift a memory holding none of
    them into the top ``size`` or over the cut: the memories touched (ascending), their partial
    scores, the lower bound of the ``size``-th best score, and whether it was probed."""
    np = load_numpy()
    theta = -math.inf
    cand, a = np.zeros(0, dtype=np.int32), np.zeros(0)  # the memories touched (ascending), partial scores
    # the walked (slots, parts) not merged into them yet: merged only when a probe is considered
    pending: list[tuple[Any, Any]] = []
    batch = _BATCH if _unwalked(steps) > _SMALL else _SMALL
    probed = batch == _SMALL  # nothing to gain
    i = 0
    while i < len(steps) and _can(0.0, terms, theta, cuts):
        i, slots, part = _walk_levels(sc, steps, i, batch, avgdl)
        pending.append((slots, part))
        if (probed or i == len(steps) or sum(y.rest for y in terms) < theta
                or _unwalked(steps[i:]) <= _PROBE_WORTH * size):
            continue  # probed, done, the walk stops anyway, or a probe would not pay
        cand, a = _merge(cand, a, pending)
        pending = []
        if len(cand) >= size and _promising(a, size, cuts):
            probed = True
            theta = max(theta, _probe(sc, cand, a, size, terms, commons, cuts, xs, avgdl))
    cand, a = _merge(cand, a, pending)
    return cand, a, theta, probed


def _walk_levels(sc: Scorer, steps: list[_Step], i: int, batch: int, avgdl: float) -> tuple[int, Any, Any]:
    """Walk the level ``steps[i]``, and those after it while they hold few postings (``batch``
    together), in one pass: the index of the next step, and the memories walked (repeats
    possible) with their parts."""
    pieces: list[tuple[Term, Any, Any]] = []
    walked = 0
    while i < len(steps) and (not pieces or walked + steps[i][1].p.at_least(steps[i][2]).n <= batch):
        _, x, level, after = steps[i]
        i += 1
        run = x.p.at_least(level)
        slots, tfs = run.slots[: run.n], run.tfs[: run.n]
        walked += run.n
        if x.thr != UNBOUNDED:  # the levels above were walked
            below = tfs < x.thr
            slots, tfs = slots[below], tfs[below]
        x.rest, x.thr = after, level
        pieces.append((x, slots, tfs))
    if len(pieces) == 1:
        x, slots, tfs = pieces[0]
        part = sc.parts(sc.data.lens.take(slots), tfs, x.coef, avgdl)
    else:  # a memory may be in several: _merge sums them
        np = load_numpy()
        counts = [len(pc[1]) for pc in pieces]
        slots = np.concatenate([pc[1] for pc in pieces])
        part = sc.parts(sc.data.lens.take(slots), np.concatenate([pc[2] for pc in pieces]),
                        np.repeat([pc[0].coef for pc in pieces], counts), avgdl)
    return i, slots, part


def _look_up(
    sc: Scorer, left: list[Term], cand: Any, a: Any, terms: list[Term], theta: float,
    cuts: tuple[float, float] | None, commons: bool, avgdl: float,
) -> tuple[Any, Any, Any, list[Term]]:
    """Add to the partial scores ``a`` of ``cand`` the parts of the terms ``left`` (not walked
    whole), by lookups, term by term, dropping after each the memories that can no longer make
    it: the memories left, their scores, the common words' share of them (when ``commons``) and
    the common words whose whole part that share holds."""
    c = load_numpy().zeros(len(cand)) if commons else None  # the common words' share, of those in ``summed``
    summed: list[Term] = []
    for x in left:
        if not len(cand):
            break
        at, part = _gather(sc, x, cand, x.thr, avgdl)
        a[at] += part
        if c is not None and x.common and x.thr == UNBOUNDED:  # its whole part
            c[at] += part
            summed.append(x)
        x.rest = 0.0
        # drop those that can no longer make it; one holding a term at a walked level keeps
        # that term's bound: a lookup to lift it cost more than it saved
        if x is not left[-1]:
            keep = _can(a, terms, theta, cuts)
            if not keep.all():
                cand, a = cand[keep], a[keep]
                c = None if c is None else c[keep]
    return cand, a, c, summed


def _cut(sc: Scorer, cand: Any, a: Any, c: Any, summed: list[Term], terms: list[Term],
         cuts: tuple[float, float], avgdl: float) -> tuple[Any, Any]:
    """The memories of ``cand`` whose exact own scores ``a`` pass the cut, and their scores: the
    common words count COMMON_WEIGHT in its second check (``c``: their share of ``a``, of those in
    ``summed`` so far; None when the query holds none)."""
    spec = a
    if c is not None:  # the common words' share, of those not summed during the lookups
        for x in terms:
            if x.common and x not in summed:
                at, part = _gather(sc, x, cand, UNBOUNDED, avgdl)
                c[at] += part
        spec = a - (1 - COMMON_WEIGHT) * c
    ok = (a >= cuts[0]) & (spec >= cuts[1])
    return cand[ok], a[ok]


def _merge(cand: Any, a: Any, pending: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The memories of ``cand`` (ascending and distinct) and of the ``pending`` slots (in any
    order, repeats allowed), ascending and distinct, with their scores: ``a`` plus the parts
    of each (sums of parts are exact in any order, see ``Scorer.quantum_for``). One stable sort
    of the sorted runs merges them: no scattered writes into a store-sized array, and one pass
    for however many levels were walked since the last."""
    np = load_numpy()
    if not pending:
        return cand, a
    slots = np.concatenate([cand, *(sl for sl, _ in pending)])
    val = np.concatenate([a, *(part for _, part in pending)])
    order = slots.argsort(kind="stable")
    slots, val = slots.take(order), val.take(order)
    first = np.empty(len(slots), dtype=bool)
    first[:1] = True
    np.not_equal(slots[1:], slots[:-1], out=first[1:])
    at = first.nonzero()[0]
    if len(at) == len(slots):  # no memory in two of them
        return slots, val
    return slots.take(at), np.add.reduceat(val, at)


def _unwalked(steps: list[_Step]) -> int:
    """How many postings the levels of ``steps`` hold."""
    return sum(st[1].p.at_least(st[2]).n for st in steps)


def _can(a: Any, terms: list[Term], theta: float, cuts: tuple[float, float] | None) -> Any:
    """Whether memories of partial score ``a`` may still reach ``theta`` and pass the cut with
    what the terms can add to them yet (``Term.rest``: floating-point sums, given a margin
    far above their rounding)."""
    up = sum(x.rest for x in terms)
    slack = 1e-9 * (1.0 + up + abs(theta if theta > -math.inf else 0.0))
    if cuts is None:
        return a + (up + slack) >= theta
    ok = a + (up + slack) >= max(cuts[0], theta)
    spec = sum(x.rest * COMMON_WEIGHT if x.common else x.rest for x in terms)
    ok &= a + (spec + slack) >= cuts[1]
    return ok


def _theta(a: Any, c: Any, slots: Any, size: int, cuts: tuple[float, float] | None, xs: Any,
           slack: float = 1e-9) -> float:
    """A lower bound of the ``size``-th best own score: the ``size``-th best of the (partial)
    scores ``a`` of ``slots`` (distinct; ``c`` of it on common words, None for none) among
    those sure to pass the cut (by ``slack``, far above any rounding of the rest of the
    sum; 0 for exact scores), not counting ``xs``."""
    np = load_numpy()
    ok = None
    if cuts is not None:
        margin = slack * (1.0 + abs(cuts[0]) + abs(cuts[1]))
        ok = (a >= cuts[0] + margin) & ((a if c is None else a - (1 - COMMON_WEIGHT) * c) >= cuts[1] + margin)
    if xs is not None:
        free = ~member(slots, xs)
        ok = free if ok is None else ok & free
    if ok is not None:
        a = a[ok]
    if len(a) < size:
        return -math.inf
    return float(np.partition(a, len(a) - size)[len(a) - size])


def _promising(a: Any, size: int, cuts: tuple[float, float] | None) -> bool:
    """Whether a probe of the memories of partial scores ``a`` may find ``size`` of them over
    the cut: at least half as many hold 90% of it already. (A probe finding fewer bounds
    nothing; at 100k, half the probes of a query with many mid-frequency words did.)"""
    return cuts is None or int(load_numpy().count_nonzero(a >= 0.9 * cuts[0])) >= size // 2


def _probe(sc: Scorer, slots: Any, a: Any, size: int, terms: list[Term], commons: bool,
           cuts: tuple[float, float] | None, xs: Any, avgdl: float) -> float:
    """A close lower bound of the ``size``-th best own score: that of the memories of
    ``slots`` (distinct) with the best partial scores ``a``, scored exactly from their own
    terms (``IndexData.runs``)."""
    np = load_numpy()
    many = min(len(slots), 2 * size)
    best = np.sort(slots[np.argpartition(a, len(a) - many)[len(a) - many:]])
    own, com, _ = sc.score_runs(sc.data.runs(best), len(best), terms, avgdl, commons)
    return _theta(own, com if commons else None, best, size, cuts, xs, slack=0.0)


def _gather(sc: Scorer, x: Term, slots: Any, below: int, avgdl: float) -> tuple[Any, Any]:
    """``x``'s part in ``slots`` (distinct, ascending) where it is held fewer than ``below``
    times: where in ``slots`` and how much (a common word's read from its codes, see
    ``_index_postings``)."""
    data = sc.data
    at, tfs = held(x.p, slots, below, len(data.ids))
    return at, sc.parts(data.lens.take(slots[at]), tfs, x.coef, avgdl)


def pool(ids: list[str | None], cand: Any, own: Any, size: int, xs: Any) -> Any:
    """The slots of ``cand`` (ascending, and so returned) in their order by own score ``own``
    (best first, ties by id: ``ids`` of the slots) down to the ``size``-th not in ``xs``."""
    np = load_numpy()
    if len(cand) <= size:  # all of them, whichever are excluded
        return cand
    free = None if xs is None else ~member(cand, xs)
    mine = own if free is None else own[free]
    if len(mine) <= size:
        return cand
    last = np.partition(mine, len(mine) - size)[len(mine) - size]
    above = own > last
    need = size - int(np.count_nonzero(above if free is None else above & free))
    ties = sorted((own == last).nonzero()[0].tolist(), key=lambda i: ids[cand[i]])
    take = []
    for i in ties:
        if not need:
            break
        take.append(i)
        need -= free is None or bool(free[i])
    return np.sort(np.concatenate((cand[above], cand[take])), kind="stable")
