"""Relevance: does the right memory come, and only the right memory? (issue 32)

    python benchmarks/relevance.py LOCOMO_JSON [--retrieval bm25|hybrid] [--json] [--k 6]
                                   [--tune 1-3] [--check 4-5] [--curve 0.1,0.2,...]
                                   [--embedding-model DIR] [--home DIR]

``--retrieval hybrid`` takes its model as ``benchmarks/locomo.py`` does (``--embedding-model``,
default ``$MEMWIRE_EMBEDDING_MODEL``, else the packaged MiniLM; distilled first under ``--home``
when need be) and stops when a store opens without its semantic side, rather than report BM25's
figures as hybrid's.

Every question and prompt goes the middleware's way: the gate (``policies._gate.gate``), the
query (``policies._query.query_from_messages``, no earlier messages), then
``MemoryStore.search(text, k, min_score=None)``: the store's defaults, what one turn injects.

LoCoMo stores are built as ``benchmarks/locomo.py`` builds them (every dialog turn one memory,
dated, written in order). For each half of the dev conversations (``--tune``, default 1-3, the
half the rules were chosen on; ``--check``, default 4-5, held out), figures:

- *evidence*: the share of answerable questions (categories 1-4; 5 is adversarial: about what
  did not happen) with at least one of their evidence turns among the ``k`` injected;
- *R@5 / R@10*: recall at the defaults (the share of a question's evidence turns among the first
  5 / 10 of a search of 10, averaged over answerable questions);
- *false, other conv.*: the share of another conversation's questions (all categories; the half's
  conversations asked each other's in a ring) that get any memory;
- *false, everyday*: the share of (store, prompt) pairs, the half's everyday prompts
  (``relevance_data.EVERYDAY``) asked of each of its stores, that get any memory;
- *search p50*: the median time of one ``search`` (gate and query included) of an own question.

The coding store (``relevance_data.CODING_STORE``, 20 memories): false injection of the half's
everyday prompts, related questions (sharing a word with their memory) that find it among the
``k``, and the 12 paraphrases (sharing no content word: BM25 cannot find them; checked and
reported) found; and the 12 held-out paraphrases (``PARAPHRASES_CHECK``: other memories, other
wordings; hybrid was tuned on the first 12, never on these).

The trade-off curve sweeps ``min_score`` (the decision's main threshold) over ``--curve`` and
prints the same figures at each point for both halves. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo
import relevance_data as data

from memwire.memory._index import DEFAULT_MIN_SCORE
from memwire.memory._model import Hit
from memwire.memory._store import MemoryStore
from memwire.memory._text import analyze
from memwire.policies._gate import gate
from memwire.policies._query import query_from_messages

ANSWERABLE = (1, 2, 3, 4)
CURVE = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)


def ask(store: MemoryStore, prompt: str, k: int, min_score: float | None) -> list[Hit]:
    """What the middleware would inject for ``prompt`` as a conversation's first message."""
    decision = gate(prompt)
    if decision.skip:
        return []
    query = query_from_messages(decision.query, [])
    return store.search(query.text, k, min_score=min_score, context=query.context)


@dataclass
class Built:
    """A LoCoMo conversation's store and questions."""

    name: str
    store: MemoryStore
    by_id: dict[str, list[str]]  # memory id -> dia ids
    questions: list[locomo.Question]


@dataclass
class Half:
    name: str
    convs: list[Built] = field(default_factory=list)
    everyday: list[str] = field(default_factory=list)
    related: list[tuple[str, int]] = field(default_factory=list)


def pct(num: float, den: int) -> float:
    return round(100.0 * num / den, 1) if den else 0.0


def locomo_figures(half: Half, k: int, min_score: float | None, full: bool) -> dict[str, Any]:
    """The half's LoCoMo figures at ``min_score`` (None: the store's default). ``full``: also
    recall at 5/10 and the search time."""
    injected = answerable = 0
    r5: list[float] = []
    r10: list[float] = []
    times: list[float] = []
    other_hit = other_n = every_hit = every_n = 0
    n = len(half.convs)
    for i, conv in enumerate(half.convs):
        for q in conv.questions:
            if q.category not in ANSWERABLE:
                continue
            t0 = time.perf_counter()
            hits = ask(conv.store, q.text, k, min_score)
            times.append((time.perf_counter() - t0) * 1000)
            found = {d for h in hits for d in conv.by_id.get(h.memory.id, [])}
            answerable += 1
            injected += bool(found & set(q.evidence))
            if full:
                ranked = [d for h in ask(conv.store, q.text, 10, min_score) for d in conv.by_id.get(h.memory.id, [])]
                ev = set(q.evidence)
                r5.append(len(ev & set(ranked[:5])) / len(ev))
                r10.append(len(ev & set(ranked[:10])) / len(ev))
        if n > 1:
            other = half.convs[(i + 1) % n]
            for q in other.questions:
                other_n += 1
                other_hit += bool(ask(conv.store, q.text, k, min_score))
        for prompt in half.everyday:
            every_n += 1
            every_hit += bool(ask(conv.store, prompt, k, min_score))
    out: dict[str, Any] = {
        "answerable": answerable,
        "evidence_injected": pct(injected, answerable),
        "false_other_conv": pct(other_hit, other_n),
        "other_questions": other_n,
        "false_everyday": pct(every_hit, every_n),
        "everyday_asked": every_n,
    }
    if full:
        out["recall_at_5"] = round(100 * statistics.fmean(r5), 1) if r5 else 0.0
        out["recall_at_10"] = round(100 * statistics.fmean(r10), 1) if r10 else 0.0
        out["search_p50_ms"] = round(statistics.median(times), 3) if times else 0.0
    return out


def coding_figures(store: MemoryStore, ids: list[str], half: Half, k: int, min_score: float | None,
                   full: bool) -> dict[str, Any]:
    """The coding store's figures for the half's everyday prompts and related questions (and,
    when ``full``, the paraphrases and the search time)."""
    false = sum(bool(ask(store, p, k, min_score)) for p in half.everyday)
    related = sum(ids[m] in {h.memory.id for h in ask(store, q, k, min_score)} for q, m in half.related)
    out: dict[str, Any] = {
        "false_everyday": pct(false, len(half.everyday)),
        "related_found": pct(related, len(half.related)),
    }
    if full:
        for key, rows in (("paraphrases_found", data.PARAPHRASES), ("paraphrases_check_found", data.PARAPHRASES_CHECK)):
            found = sum(ids[m] in {h.memory.id for h in ask(store, q, k, min_score)} for q, m in rows)
            out[key] = f"{found}/{len(rows)}"
        times = []
        for prompt in [q for q, _ in half.related] + half.everyday:
            t0 = time.perf_counter()
            ask(store, prompt, k, min_score)
            times.append((time.perf_counter() - t0) * 1000)
        out["search_p50_ms"] = round(statistics.median(times), 3)
    return out


def paraphrase_overlaps() -> list[str]:
    """Paraphrases that share an index term with their memory (there should be none)."""
    bad = []
    for q, m in data.PARAPHRASES + data.PARAPHRASES_CHECK:
        shared = set(analyze(q)) & set(analyze(data.CODING_STORE[m]))
        if shared:
            bad.append(f"{q!r} shares {sorted(shared)}")
    return bad


@contextmanager
def stores(path: str, tune: str, check: str, retrieval: str) -> Iterator[tuple[list[Half], MemoryStore, list[str]]]:
    """The two halves' LoCoMo stores and the coding store, in temporary directories."""
    convs = locomo.load(path)
    with tempfile.TemporaryDirectory(prefix="memwire-relevance-") as tmp:
        halves = []
        for name, spec in (("tune", tune), ("check", check)):
            half = Half(name, everyday=data.EVERYDAY[name], related=data.RELATED[name])
            for sid, turns, questions in locomo.pick(convs, spec):
                store, by_id = locomo.build_store(turns, Path(tmp) / sid, retrieval)
                half.convs.append(Built(sid, store, by_id, questions))
            halves.append(half)
        coding = locomo.open_store(Path(tmp) / "coding", retrieval)
        if retrieval == "hybrid" and getattr(coding, "_semantic", None) is None:
            raise SystemExit(f"retrieval hybrid: the store opened without its semantic side (model "
                             f"{locomo.EMBEDDING_MODEL}); see the warning above")
        ids = [m.id for m in coding.add_many(data.CODING_STORE)]
        yield halves, coding, ids


def run(path: str, retrieval: str, k: int, tune: str, check: str, curve: list[float]) -> dict[str, Any]:
    result: dict[str, Any] = {"retrieval": retrieval, "k": k, "default_min_score": DEFAULT_MIN_SCORE,
                              "tune_spec": tune, "check_spec": check, "paraphrase_overlaps": paraphrase_overlaps()}
    with stores(path, tune, check, retrieval) as (halves, coding, ids):
        for half in halves:
            result[half.name] = {
                "conversations": [c.name for c in half.convs],
                "locomo": locomo_figures(half, k, None, full=True),
                "coding": coding_figures(coding, ids, half, k, None, full=True),
                "curve": [
                    {"min_score": cut, **locomo_figures(half, k, cut, full=False),
                     **{f"coding_{key}": v for key, v in coding_figures(coding, ids, half, k, cut, False).items()}}
                    for cut in curve
                ],
            }
    return result


def show(result: dict[str, Any]) -> None:
    print(f"relevance at the store's defaults (min_score {result['default_min_score']}, k={result['k']}), "
          f"retrieval {result['retrieval']}; tune = conversations {result['tune_spec']}, "
          f"check = {result['check_spec']}")
    for bad in result["paraphrase_overlaps"]:
        print(f"  warning: paraphrase {bad}")
    rows: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("answerable questions", lambda h: h["locomo"]["answerable"]),
        ("evidence injected %", lambda h: h["locomo"]["evidence_injected"]),
        ("recall@5 %", lambda h: h["locomo"]["recall_at_5"]),
        ("recall@10 %", lambda h: h["locomo"]["recall_at_10"]),
        ("false, other conv. %", lambda h: h["locomo"]["false_other_conv"]),
        ("false, everyday %", lambda h: h["locomo"]["false_everyday"]),
        ("search p50 ms", lambda h: h["locomo"]["search_p50_ms"]),
        ("coding: false, everyday %", lambda h: h["coding"]["false_everyday"]),
        ("coding: related found %", lambda h: h["coding"]["related_found"]),
        ("coding: paraphrases found", lambda h: h["coding"]["paraphrases_found"]),
        ("coding: held-out paraphr.", lambda h: h["coding"]["paraphrases_check_found"]),
        ("coding: search p50 ms", lambda h: h["coding"]["search_p50_ms"]),
    ]
    print(f"{'':28s}{'tune':>10s}{'check':>10s}")
    for name, get in rows:
        print(f"{name:28s}" + "".join(f"{get(result[h])!s:>10s}" for h in ("tune", "check")))
    head = ("min_score", "evidence", "other", "everyday", "code:every", "code:rel")
    for h in ("tune", "check"):
        print(f"\ntrade-off curve, {h} ({', '.join(result[h]['conversations'])}): "
              "evidence injected %, false injection % (other conv., everyday), coding store")
        print("".join(f"{c:>11s}" for c in head))
        for p in result[h]["curve"]:
            vals = (p["min_score"], p["evidence_injected"], p["false_other_conv"], p["false_everyday"],
                    p["coding_false_everyday"], p["coding_related_found"])
            print("".join(f"{v:>11}" for v in vals))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="LoCoMo-format JSON (e.g. locomo-dev.json)")
    ap.add_argument("--retrieval", choices=locomo.RETRIEVALS, default="bm25")
    ap.add_argument("--embedding-model", help="with hybrid: a sentence-transformers or model2vec directory "
                    "(default $MEMWIRE_EMBEDDING_MODEL, else the packaged MiniLM)")
    ap.add_argument("--home", type=Path, help="memwire home for the distilled embeddings' cache")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--k", type=int, default=6, help="memories injected per turn (the default top_k, 6)")
    ap.add_argument("--tune", default="1-3", help="the conversations the rules were chosen on (1-based)")
    ap.add_argument("--check", default="4-5", help="the held-out conversations")
    ap.add_argument("--curve", default=",".join(map(str, CURVE)), help="min_score values of the trade-off curve")
    args = ap.parse_args(argv)
    try:
        curve = [float(x) for x in args.curve.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--curve takes numbers separated by commas, not {args.curve!r}")
    if args.k < 1:
        ap.error("--k must be at least 1")
    if args.retrieval == "hybrid":
        locomo.use_embedding_model(args.embedding_model, args.home)
    result = run(args.path, args.retrieval, args.k, args.tune, args.check, curve)
    if args.json:
        print(json.dumps(result))
    else:
        show(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
