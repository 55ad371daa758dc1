"""A persistent snapshot of a markdown store's parsed files and index, for a fast cold start.

``DIR/.index`` (hidden, beside ``.meta.json``) holds, for each memory file, its (mtime, size,
inode), a BLAKE2b digest of its bytes and the memories parsed from it (the columns of its
``_table.Table``), plus the whole BM25 index (its ids as rows of those columns, so the store and the
index share one string per id). It is a cache, never the truth, and never trusted blindly:

- a file is taken from the snapshot only when its (mtime, size, inode) and the digest of its
  bytes, read now, are those recorded; any other file is parsed again (an edit of the same size
  with the mtime put back changes the digest);
- the index is taken only when every file of every directory came from the snapshot, and no file
  was added or removed; else it is built again from the memories (in file order, as a first load
  does), so a store loaded from a snapshot is the store loaded from scratch;
- a snapshot that cannot be read, of another format, or made with other index parameters or
  another text analysis is ignored and written again; never an error.

The format is numpy's ``.npz`` read with ``allow_pickle=False`` (no code runs on load) plus a JSON
header. Restoring builds no object per memory besides its id string: the tables take the columns
as they are. Written atomically (temp file + rename) after a load that parsed files, and at exit when
the store changed since; only for stores of ``MIN_MEMORIES`` or more (a smaller one loads in a few
milliseconds anyway).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from .. import _paths
from .._errors import MemoryFileError
from . import _index, _text
from ._table import Kind, Merged, Table

__all__ = ["MIN_MEMORIES", "SNAPSHOT_NAME", "digest", "restore", "save"]

log = logging.getLogger("memwire")

SNAPSHOT_NAME = ".index"
FORMAT = 2
MIN_MEMORIES = 2000
_PROBE = ("Caroline's friends went to the de-stress yoga café in May 2023: 用户喜欢 🍕 #rust, productivity -p aws"
          " important indentation linter")


class MemoryStore(Protocol):
    """What a snapshot reads of the markdown store it saves or restores (``_store.MemoryStore``,
    which imports this module): its directory, its files' tables and its index."""

    @property
    def path(self) -> Path: ...

    @property
    def root(self) -> Path: ...

    @property
    def _dirs(self) -> Sequence[Any]: ...  # the scopes' directories (``_store._Dir``)

    @property
    def _merged(self) -> Merged: ...

    @property
    def _index(self) -> Any: ...  # its BM25 index (``_index``)


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


_CHUNK = 1 << 20


def _digest_file(fh: Any, size: int) -> bytes | None:
    """``digest`` of an open file's first ``size`` bytes, read in chunks into one buffer (no copy
    of a large file in memory); None when it holds fewer."""
    h = hashlib.blake2b(digest_size=16)
    buf = bytearray(min(_CHUNK, max(size, 1)))
    view = memoryview(buf)
    left = size
    while left:
        n = fh.readinto(view[: min(left, len(buf))])
        if not n:
            return None
        h.update(view[:n])
        left -= n
    return h.digest()


def _fingerprint() -> str:
    """What the snapshot's index depends on besides the files: the index's parameters and the
    text analysis (a changed stemmer, stopword list or tokenizer yields other terms)."""
    parts = [repr((_index.K1, _index.B, _index.DELTA, FORMAT)), " ".join(_text.analyze(_PROBE)),
             " ".join(sorted(_text.STOPWORDS)), " ".join(sorted(_text.COMMON_WORDS)),
             " ".join(_index.date_terms("8 May, 2023") + _index.date_terms("2024-02-03"))]
    return hashlib.blake2b("\n".join(parts).encode("utf-8"), digest_size=16).hexdigest()


# ------------------------------------------------------------------ columns of strings


def _pack(values: Sequence[str | None]) -> tuple[Any, Any]:
    """Strings (none holding a newline) as one UTF-8 blob, and which were None."""
    import numpy as np

    blob = "\n".join(v or "" for v in values).encode("utf-8", errors="surrogatepass")
    return np.frombuffer(blob, dtype=np.uint8), np.fromiter((v is None for v in values), dtype=bool, count=len(values))


def _unpack(blob: Any, none: Any, shared: dict[str, str] | None = None) -> list[str | None]:
    """``_pack``'s strings back; with ``shared``, equal strings are one object (a date repeated by
    every memory of a session is one string, as on a first load)."""
    if not len(none):
        return []
    values: list[str | None] = blob.tobytes().decode("utf-8", errors="surrogatepass").split("\n")
    if len(values) != len(none):
        raise ValueError("a column of strings does not match its length")
    for i in none.nonzero()[0].tolist():
        values[i] = None
    if shared is not None:
        values = [v if v is None else shared.setdefault(v, v) for v in values]
    return values


def _ints(values: Any, code: str) -> array[int]:
    """A numpy array as an ``array`` of ``code`` (what a table grows)."""
    import numpy as np

    out = array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=np.dtype(code)).tobytes())
    return out


# ------------------------------------------------------------------ writing


def save(store: MemoryStore) -> bool:
    """Write the store's snapshot (call with the store's lock held). Returns whether it was
    written: not for a small store, nor when the directory does not exist."""
    import numpy as np

    target = store.path / SNAPSHOT_NAME
    try:
        if len(store._merged) < MIN_MEMORIES or not stat.S_ISDIR(_paths.lstat(store.root, store.path).st_mode):
            return False
    except FileNotFoundError:
        return False
    header: dict[str, Any] = {"format": FORMAT, "fingerprint": _fingerprint(), "dirs": []}
    arrays: dict[str, Any] = {}
    ids: list[str] = []
    texts: list[bytes] = []
    ends: list[Any] = []
    kind: list[Any] = []
    kinds: list[Kind] = []
    row_of: dict[int, int] = {}  # id(table) -> its first row in the columns
    for d in store._dirs:
        files = []
        for name in d.ordered():
            sig, known = d.sigs.get(name), d.hashes.get(name)
            if sig is None or name in d.links:
                continue
            if known is None:  # patched by an add without a re-read: digest what is there now
                known = _digest_if_unchanged(d.root, d.path / name, sig)
                if known is None:
                    continue  # changed meanwhile: parsed again on the next start
                d.hashes[name] = known
            table = d.files[name]
            t_ids, t_text, t_ends, t_kind, t_kinds = table.columns()
            row_of[id(table)] = len(ids)
            files.append({"name": name, "sig": list(sig), "digest": known.hex(), "head": _hex(d.heads.get(name)),
                          "n": len(t_ids), "kinds": len(t_kinds), "bytes": len(t_text),
                          "problems": [[p.line, p.problem] for p in d.problems.get(name, [])]})
            ids += t_ids
            texts.append(bytes(t_text))
            ends.append(np.frombuffer(t_ends, dtype=np.int64))
            kind.append(np.frombuffer(t_kind, dtype=np.uint32))
            kinds += t_kinds
        header["dirs"].append({"path": str(d.path), "files": files})
    arrays["m_id"], _ = _pack(ids)
    arrays["m_text"] = np.frombuffer(b"".join(texts), dtype=np.uint8)
    arrays["m_end"] = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
    arrays["m_kind"] = np.concatenate(kind) if kind else np.zeros(0, dtype=np.uint32)
    for key, column in (("tags", [" ".join(k[0]) for k in kinds]), ("topic", [k[2] for k in kinds]),
                        ("date", [k[3] for k in kinds])):
        arrays[f"k_{key}"], arrays[f"k_{key}_none"] = _pack(column)
    arrays["k_pinned"] = np.fromiter((k[1] for k in kinds), dtype=bool, count=len(kinds))
    for key, value in store._index.export().items():
        if key == "ids" and isinstance(value, list):  # rows of m_id (-1: a free slot), else in i_ids_more
            arrays["i_id_rows"], more = _rows(store, value, row_of, len(ids))
            arrays["i_ids_more"], arrays["i_ids_more_none"] = _pack(more)
        elif isinstance(value, list):
            arrays[f"i_{key}"], arrays[f"i_{key}_none"] = _pack(value)
        else:
            arrays[f"i_{key}"] = value
    arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    fd, tmp = _paths.mkstemp(store.root, store.path, prefix=".index.")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        _paths.replace(store.root, tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def _rows(store: MemoryStore, index_ids: list[str | None], row_of: dict[int, int], n: int) -> tuple[Any, list[str]]:
    """The index's ids as rows of the saved id column (where the store shows that id from that
    row): restored, they are the very strings the tables hold. An id shown under another (a
    collision's longer id) or from a file not saved goes in ``more``, at row ``n + i``."""
    import numpy as np

    more: list[str] = []
    single = store._merged._single
    if single is not None and id(single) in row_of:  # one table (a large store's usual case): all at once
        rows = single._row.numbers(index_ids)
        out = np.where(rows >= 0, rows + row_of[id(single)], -1)
        for slot in np.flatnonzero(rows < 0).tolist():
            if index_ids[slot] is not None:
                out[slot] = n + len(more)
                more.append(index_ids[slot])
        return out, more
    out = np.empty(len(index_ids), dtype=np.int64)
    for slot, mid in enumerate(index_ids):
        if mid is None:
            out[slot] = -1
            continue
        ref = store._merged.ref(mid)
        first = row_of.get(id(ref[0])) if ref is not None and ref[1] == mid else None
        if ref is None or first is None:
            out[slot] = n + len(more)
            more.append(mid)
        else:
            out[slot] = first + ref[0]._row[mid]
    return out, more


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _digest_if_unchanged(root: Path, path: Path, sig: Sequence[int]) -> bytes | None:
    """The digest of the file when it is still what ``sig`` (mtime, size, inode) says, else None."""
    try:
        with os.fdopen(_paths.open_fd(root, path, os.O_RDONLY), "rb") as fh:
            st = os.fstat(fh.fileno())
            if (st.st_mtime_ns, st.st_size, st.st_ino) != tuple(sig):
                return None
            found = _digest_file(fh, sig[1])
            longer = bool(fh.read(1))
            st = os.fstat(fh.fileno())  # the same file all along: an edit in place meanwhile moves them
    except (OSError, MemoryFileError):
        return None
    return found if (st.st_mtime_ns, st.st_size, st.st_ino) == tuple(sig) and not longer else None


# ------------------------------------------------------------------ reading


def restore(store: MemoryStore) -> bool:
    """Fill the store's directories with the files whose (mtime, size, inode) and digest match the
    snapshot (call before the first load, with the store's lock held). Returns True when the
    index was restored too (every file matched, none added or removed); then the caller must not
    rebuild it. A snapshot that cannot be used is ignored (logged at debug level)."""
    import numpy as np

    path = store.path / SNAPSHOT_NAME
    try:
        fh = os.fdopen(_paths.open_fd(store.root, path, os.O_RDONLY), "rb")
    except (OSError, MemoryFileError):
        return False
    try:
        with fh, np.load(fh, allow_pickle=False) as z:
            return _restore(store, z)
    except Exception as exc:
        log.debug("memwire: index snapshot %s not used (%s: %s)", path, type(exc).__name__, exc)
        for d in store._dirs:
            for part in (d.files, d.sigs, d.problems, d.heads, d.hashes):
                part.clear()
        return False


def _restore(store: MemoryStore, z: Any) -> bool:
    header = json.loads(z["header"].tobytes().decode("utf-8"))
    if header.get("format") != FORMAT or header.get("fingerprint") != _fingerprint():
        return False
    dirs = header["dirs"]
    if [d["path"] for d in dirs] != [str(d.path) for d in store._dirs]:
        return False
    # which files are still what was saved: only their columns are read
    todo: list[tuple[Any, dict[str, Any], int, int, int]] = []  # (dir, file, first row, first kind, first byte)
    whole = True
    at = k_at = b_at = 0
    for d, saved in zip(store._dirs, dirs, strict=True):  # the same paths, checked above
        on_disk = d._scan(remember=False)
        whole = whole and set(on_disk) == {f["name"] for f in saved["files"]}
        for f in saved["files"]:
            sig = tuple(f["sig"])
            if (on_disk.get(f["name"]) == sig
                    and _digest_if_unchanged(d.root, d.path / f["name"], sig) == bytes.fromhex(f["digest"])):
                todo.append((d, f, at, k_at, b_at))
            else:
                whole = False
            at, k_at, b_at = at + f["n"], k_at + f["kinds"], b_at + f["bytes"]
    if not todo:
        return False
    ids = z["m_id"].tobytes().decode("utf-8").split("\n") if at else []
    ends, kind = z["m_end"], z["m_kind"]
    shared: dict[str, str] = {}  # one string per distinct topic, date, tag
    tags = _unpack(z["k_tags"], z["k_tags_none"], shared)
    topics, dates = _unpack(z["k_topic"], z["k_topic_none"], shared), _unpack(z["k_date"], z["k_date_none"], shared)
    pinned = z["k_pinned"].tolist()
    if not (len(ids) == len(ends) == len(kind) == at and len(tags) == len(topics) == len(dates) == len(pinned) == k_at):
        raise ValueError("memory columns of different lengths")
    kinds: list[Kind] = [(tuple(t.split(" ")) if t else (), p, topic, date)
                         for t, p, topic, date in zip(tags, pinned, topics, dates, strict=True)]  # lengths checked
    text = z["m_text"]
    if len(text) != b_at:
        raise ValueError("the text column does not match the files")
    for d, f, first, k_first, b_first in todo:
        name, n = f["name"], f["n"]
        source = str(d.path / name)
        _check_texts(text[b_first : b_first + f["bytes"]], ends[first : first + n])
        t_text = bytearray(memoryview(text[b_first : b_first + f["bytes"]]))
        d.files[name] = Table.restore(source, ids[first : first + n], t_text, _ints(ends[first : first + n], "q"),
                                      _ints(kind[first : first + n], "I"), kinds[k_first : k_first + f["kinds"]])
        d.sigs[name] = tuple(f["sig"])
        d.heads[name] = bytes.fromhex(f["head"]) if f["head"] is not None else None
        d.hashes[name] = bytes.fromhex(f["digest"])
        d.problems[name] = [MemoryFileError(source, line, problem) for line, problem in f["problems"]]
    if not whole:
        return False
    state: dict[str, Any] = {}
    for key in z.files:
        if not key.startswith("i_") or key.endswith("_none") or key.startswith("i_ids_more"):
            continue
        if key == "i_id_rows":
            more = _unpack(z["i_ids_more"], z["i_ids_more_none"])
            every = ids + more
            state["ids"] = [None if r < 0 else every[r] for r in z[key].tolist()]
            continue
        none = f"{key}_none"
        state[key[2:]] = _unpack(z[key], z[none], shared if key in ("i_dates", "i_tail_dates") else None) \
            if none in z.files else z[key]
    store._index.restore(state)
    return True


def _check_texts(text: Any, ends: Any) -> None:
    """A file's text buffer and its rows' ends must be UTF-8 cut at characters, ends ascending:
    else a search would fail building a memory (a damaged snapshot is ignored instead)."""
    import codecs

    import numpy as np

    if len(ends) and (ends[0] < 0 or ends[-1] != len(text) or np.any(np.diff(ends) < 0)):
        raise ValueError("text ends out of order")
    cuts = ends[:-1][ends[:-1] < len(text)]  # where the next memory's text starts
    if len(cuts) and np.any((text[cuts] & 0xC0) == 0x80):
        raise ValueError("a text cut inside a character")
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")  # raises on bytes that are not UTF-8
    for at in range(0, len(text), _CHUNK):
        decoder.decode(memoryview(text[at : at + _CHUNK]))
    decoder.decode(b"", final=True)
