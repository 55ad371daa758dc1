"""A persistent snapshot of a markdown store's parsed files and index, for a fast cold start.

``DIR/.index`` (hidden, beside ``.meta.json``) holds, for each memory file, its (mtime, size,
inode), a BLAKE2b digest of its bytes and the memories parsed from it, plus the whole BM25 index.
It is a cache, never the truth, and never trusted blindly:

- a file is taken from the snapshot only when its (mtime, size, inode) and the digest of its
  bytes, read now, are those recorded; any other file is parsed again (an edit of the same size
  with the mtime put back changes the digest);
- the index is taken only when every file of every directory came from the snapshot, and no file
  was added or removed; else it is built again from the memories (in file order, as a first load
  does), so a store loaded from a snapshot is the store loaded from scratch;
- a snapshot that cannot be read, of another format, or made with other index parameters or
  another text analysis is ignored and written again; never an error.

The format is numpy's ``.npz`` read with ``allow_pickle=False`` (no code runs on load) plus a JSON
header. Written atomically (temp file + rename) after a load that parsed files, and at exit when
the store changed since; only for stores of ``MIN_MEMORIES`` or more (a smaller one loads in a few
milliseconds anyway).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import MemoryFileError
from ._model import Memory

if TYPE_CHECKING:
    from ._store import MemoryStore, _Dir

__all__ = ["SNAPSHOT_NAME", "MIN_MEMORIES", "digest", "save", "restore"]

log = logging.getLogger("memwire")

SNAPSHOT_NAME = ".index"
FORMAT = 1
MIN_MEMORIES = 2000
_PROBE = "Caroline's friends went to the de-stress yoga café in May 2023: 用户喜欢 🍕 #rust"


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _fingerprint() -> str:
    """What the snapshot's index depends on besides the files: the index's parameters and the
    text analysis (a changed stemmer, stopword list or tokenizer yields other terms)."""
    from . import _index, _text

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


def _unpack(blob: Any, none: Any) -> list[str | None]:
    if not len(none):
        return []
    values: list[str | None] = blob.tobytes().decode("utf-8", errors="surrogatepass").split("\n")
    if len(values) != len(none):
        raise ValueError("a column of strings does not match its length")
    for i in none.nonzero()[0].tolist():
        values[i] = None
    return values


# ------------------------------------------------------------------ writing


def save(store: "MemoryStore") -> bool:
    """Write the store's snapshot (call with the store's lock held). Returns whether it was
    written: not for a small store, nor when the directory does not exist."""
    import numpy as np

    target = store.path / SNAPSHOT_NAME
    if len(store._merged) < MIN_MEMORIES or not store.path.is_dir():
        return False
    header: dict[str, Any] = {"format": FORMAT, "fingerprint": _fingerprint(), "dirs": []}
    arrays: dict[str, Any] = {}
    mems: list[Memory] = []
    for d in store._dirs:
        files = []
        for name in d.ordered():
            sig, known = d.sigs.get(name), d.hashes.get(name)
            if sig is None or name in d.outside:
                continue
            if known is None:  # patched by an add without a re-read: digest what is there now
                known = _digest_if_unchanged(d.path / name, sig)
                if known is None:
                    continue  # changed meanwhile: parsed again on the next start
                d.hashes[name] = known
            files.append({"name": name, "sig": list(sig), "digest": known.hex(), "head": _hex(d.heads.get(name)),
                          "n": len(d.files[name]),
                          "problems": [[p.line, p.problem] for p in d.problems.get(name, [])]})
            mems.extend(d.files[name].values())
        header["dirs"].append({"path": str(d.path), "files": files})
    for key, column in (("id", [m.id for m in mems]), ("text", [m.text for m in mems]),
                        ("tags", [" ".join(m.tags) for m in mems]), ("topic", [m.topic for m in mems]),
                        ("date", [m.date for m in mems])):
        arrays[f"m_{key}"], arrays[f"m_{key}_none"] = _pack(column)
    arrays["m_pinned"] = np.fromiter((m.pinned for m in mems), dtype=bool, count=len(mems))
    for key, value in store._index.export().items():
        if isinstance(value, list):
            arrays[f"i_{key}"], arrays[f"i_{key}_none"] = _pack(value)
        else:
            arrays[f"i_{key}"] = value
    arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    fd, tmp = tempfile.mkstemp(prefix=".index.", suffix=".tmp", dir=store.path)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _digest_if_unchanged(path: Path, sig: tuple[int, int, int]) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
            st = os.fstat(fh.fileno())
    except OSError:
        return None
    return digest(data) if (st.st_mtime_ns, st.st_size, st.st_ino) == tuple(sig) and len(data) == sig[1] else None


# ------------------------------------------------------------------ reading


def restore(store: "MemoryStore") -> bool:
    """Fill the store's directories with the files whose (mtime, size, inode) and digest match the
    snapshot (call before the first load, with the store's lock held). Returns True when the
    index was restored too (every file matched, none added or removed); then the caller must not
    rebuild it. A snapshot that cannot be used is ignored (logged at debug level)."""
    path = store.path / SNAPSHOT_NAME
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return False
    try:
        return _restore(store, raw)
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign snapshot is rebuilt, never an error
        log.debug("memwire: index snapshot %s not used (%s: %s)", path, type(exc).__name__, exc)
        for d in store._dirs:
            d.files.clear(), d.sigs.clear(), d.problems.clear(), d.heads.clear(), d.hashes.clear()
        return False


def _restore(store: "MemoryStore", raw: bytes) -> bool:
    import numpy as np

    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(arrays["header"].tobytes().decode("utf-8"))
    if header.get("format") != FORMAT or header.get("fingerprint") != _fingerprint():
        return False
    dirs = header["dirs"]
    if [d["path"] for d in dirs] != [str(d.path) for d in store._dirs]:
        return False
    ids = _unpack(arrays["m_id"], arrays["m_id_none"])
    texts = _unpack(arrays["m_text"], arrays["m_text_none"])
    tags = _unpack(arrays["m_tags"], arrays["m_tags_none"])
    topics = _unpack(arrays["m_topic"], arrays["m_topic_none"])
    dates = _unpack(arrays["m_date"], arrays["m_date_none"])
    pinned = arrays["m_pinned"].tolist()
    if not (len(ids) == len(texts) == len(tags) == len(topics) == len(dates) == len(pinned)):
        raise ValueError("memory columns of different lengths")
    whole = True
    at = 0
    for d, saved in zip(store._dirs, dirs):
        on_disk = d._scan(remember=False)
        whole = whole and set(on_disk) == {f["name"] for f in saved["files"]}
        for f in saved["files"]:
            name, n = f["name"], f["n"]
            start, at = at, at + n
            sig = tuple(f["sig"])
            if on_disk.get(name) != sig or _digest_if_unchanged(d.path / name, sig) != bytes.fromhex(f["digest"]):
                whole = False
                continue
            source = str(d.path / name)
            files: dict[str, Memory] = {}
            for i in range(start, at):
                mem = object.__new__(Memory)  # the dataclass's fields, without its per-field __setattr__
                mem.__dict__.update(id=ids[i], text=texts[i], tags=tuple(tags[i].split()) if tags[i] else (),
                                    pinned=pinned[i], topic=topics[i], date=dates[i], source=source)
                files[ids[i]] = mem  # type: ignore[index]
            d.files[name], d.sigs[name] = files, sig  # type: ignore[assignment]
            d.heads[name] = bytes.fromhex(f["head"]) if f["head"] is not None else None
            d.hashes[name] = bytes.fromhex(f["digest"])
            d.problems[name] = [MemoryFileError(source, line, problem) for line, problem in f["problems"]]
    if at != len(ids):
        raise ValueError("the files hold another number of memories than the columns")
    if not whole:
        return False
    state: dict[str, Any] = {}
    for key, value in arrays.items():
        if key.startswith("i_") and not key.endswith("_none"):
            none = arrays.get(f"{key}_none")
            state[key[2:]] = _unpack(value, none) if none is not None else value
    store._index.restore(state)
    return True
