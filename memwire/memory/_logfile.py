"""The JSON Lines logs memwire keeps beside the memory files (capture events, telemetry): appended
whole lines at a time, never through a symlink (every path is checked from the memory directory
``root`` down: ``memwire._paths``), bounded (lines that would take the file past
``max_bytes`` go to a new one, the old one becoming ``NAME.1``: at most twice ``max_bytes`` on disk)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._paths import makedirs, open_fd, read_bytes, replace

__all__ = ["LOG_MAX_BYTES", "append_jsonl", "append_jsonl_many", "read_jsonl"]

LOG_MAX_BYTES = 1 << 20
WRITE_BYTES = 1 << 16  # lines written together at most (one line may be longer)


def append_jsonl(path: Path, record: Mapping[str, Any], max_bytes: int = LOG_MAX_BYTES, *, root: Path) -> None:
    append_jsonl_many(path, (record,), max_bytes, root=root)


def append_jsonl_many(path: Path, records: Iterable[Mapping[str, Any]], max_bytes: int = LOG_MAX_BYTES, *,
                      root: Path) -> None:
    """Append ``records``, one line each, opening the file once: whole lines per ``write`` (lines
    of two writers never interleave), rotating rather than passing ``max_bytes``."""
    chunks: list[bytes] = []
    chunk = b""
    for record in records:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        if chunk and len(chunk) + len(line) > min(WRITE_BYTES, max_bytes):
            chunks.append(chunk)
            chunk = b""
        chunk += line
    if chunk:
        chunks.append(chunk)
    fd = -1
    try:
        for data in chunks:
            if fd < 0:
                fd = _open_append(root, path)
            size = os.fstat(fd).st_size
            if size and size + len(data) > max_bytes:  # these lines start the next file
                os.close(fd)
                fd = -1
                with contextlib.suppress(FileNotFoundError):  # another writer rotated it first
                    replace(root, path, path.with_name(path.name + ".1"))
                fd = _open_append(root, path)
            os.write(fd, data)
    finally:
        if fd >= 0:
            os.close(fd)


def _open_append(root: Path, path: Path) -> int:
    """``path`` open for appending, created (and its directory) if missing; never through a symlink."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        return open_fd(root, path, flags)
    except FileNotFoundError:  # the directory is missing: the one case worth a mkdir (appends are frequent)
        makedirs(root, path.parent)
        return open_fd(root, path, flags)


def read_jsonl(path: Path, *, root: Path) -> list[dict[str, Any]]:
    """The records of ``path`` and its rotated ``.1``, oldest first (unreadable lines skipped)."""
    records = []
    for p in (path.with_name(path.name + ".1"), path):
        try:
            lines = read_bytes(root, p).decode("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            continue
        for ln in lines:
            try:
                records.append(json.loads(ln))
            except ValueError:
                continue
    return records
