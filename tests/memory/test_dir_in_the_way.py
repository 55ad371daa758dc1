"""A memory directory that is a file, or lies under one (issue 34 item 1): every store call raises
``MemoryFileError`` naming the path, in the words the command line uses (``check_dir``), and a
call through the middleware goes out unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryFileError, MemoryStore, Middleware
from memwire.memory._open import check_dir

CALLS: dict[str, Callable[[MemoryStore], Any]] = {
    "add": lambda s: s.add("Deploys go out on Tuesdays"),
    "search": lambda s: s.search("deploys"),
    "list": list,
    "len": len,
    "namespace add": lambda s: MemoryStore.for_namespace(s.root, "alice").add("Alice uses helm"),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("under", ["", "sub", "sub/deeper"])
def test_every_store_call_names_the_path(tmp_path: Path, call: str, under: str) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    named = afile / under if under else afile
    with pytest.raises(MemoryFileError) as caught:
        CALLS[call](MemoryStore(named))
    assert caught.value.path == str(named) and caught.value.line is None
    if under:
        assert caught.value.problem == f"the memory directory cannot be created: {afile} is a file"
    else:  # a write and a read (from the listing) say it in the same words
        assert caught.value.problem == "the memory directory is a file, not a directory"
    assert afile.read_text() == "x"



@pytest.mark.parametrize("under", ["", "sub"])
def test_the_command_lines_check_raises_the_same_error(tmp_path: Path, under: str) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    named = afile / under if under else afile
    with pytest.raises(MemoryFileError) as checked:
        check_dir(named)
    with pytest.raises(MemoryFileError) as stored:
        MemoryStore(named).add("Deploys go out on Tuesdays")
    assert str(checked.value) == str(stored.value)


def test_a_usable_directory_passes(tmp_path: Path) -> None:
    check_dir(tmp_path / "not" / "yet")  # created on first write
    MemoryStore(tmp_path / "not" / "yet").add("Deploys go out on Tuesdays")
    check_dir(tmp_path / "not" / "yet")


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_call_goes_out_unchanged_and_says_why_in_one_line(tmp_path: Path, under: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    messages = [{"role": "user", "content": "When do deploys go out?"}]
    p = Middleware(store=MemoryStore(afile / under if under else afile)).prepare(messages)
    assert p.messages == messages and p.injection is not None and p.injection.skipped == "error"
    assert "MemoryFileError" in caplog.text and "NotADirectoryError" not in caplog.text
    assert "Traceback" not in caplog.text
