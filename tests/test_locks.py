"""memwire._locks: the inter-process write lock (filelock) used by the store and the trust file."""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from memwire._locks import write_lock


def test_threads_exclude_each_other_and_the_lock_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    inside, most = 0, 0

    def writer() -> None:
        nonlocal inside, most
        for _ in range(20):
            with write_lock(path):
                inside += 1
                most = max(most, inside)
                time.sleep(0.001)
                inside -= 1

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert most == 1
    assert path.exists()  # left in place: removing it would let two waiters lock two files
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_a_symlinked_lock_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / ".lock").symlink_to(target)
    with pytest.raises(OSError):
        with write_lock(tmp_path / ".lock"):
            pass
    assert target.read_text() == "keep"
