"""The JSON Lines logs memwire keeps beside the memory files (capture events, telemetry): appended
whole lines at a time, never through a symlink, bounded (lines that would take the file past
``max_bytes`` go to a new one, the old one becoming ``NAME.1``: at most twice ``max_bytes`` on disk)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["append_jsonl", "append_jsonl_many", "read_jsonl", "LOG_MAX_BYTES"]

LOG_MAX_BYTES = 1 << 20
WRITE_BYTES = 1 << 16  # lines written together at most (one line may be longer)


def append_jsonl(path: Path, record: Mapping[str, Any], max_bytes: int = LOG_MAX_BYTES) -> None:
    append_jsonl_many(path, (record,), max_bytes)


def append_jsonl_many(path: Path, records: Iterable[Mapping[str, Any]], max_bytes: int = LOG_MAX_BYTES) -> None:
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
                fd = _open_append(path)
            size = os.fstat(fd).st_size
            if size and size + len(data) > max_bytes:  # these lines start the next file
                os.close(fd)
                fd = -1
                try:
                    os.replace(path, path.with_name(path.name + ".1"))
                except FileNotFoundError:  # another writer rotated it first
                    pass
                fd = _open_append(path)
            os.write(fd, data)
    finally:
        if fd >= 0:
            os.close(fd)


def _open_append(path: Path) -> int:
    """``path`` open for appending, created (and its directory) if missing; never through a symlink."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    try:
        return os.open(path, flags, 0o600)
    except FileNotFoundError:  # the directory is missing: the one case worth a mkdir (appends are frequent)
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags, 0o600)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of ``path`` and its rotated ``.1``, oldest first (unreadable lines skipped)."""
    records = []
    for p in (path.with_name(path.name + ".1"), path):
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            continue
        for ln in lines:
            try:
                records.append(json.loads(ln))
            except ValueError:
                continue
    return records
