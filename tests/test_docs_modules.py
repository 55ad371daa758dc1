"""Every module docs/architecture.md names exists: a path with a directory is read from the package
(``memory/_store.py``) or the repository (``tests/stores.py``); a bare name (``_limits.py``) from the
directory of the path before it on the same line, as the concern table writes them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
_NAME = re.compile(r"`([\w./-]+\.py|[\w./-]+/)`")


def named_modules(text: str) -> list[tuple[int, str, Path]]:
    """(line number, name as written, the path it names) of each module a line of ``text`` names
    (a bare name with no path before it on its line is left out: nothing says where it is)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        here: Path | None = None
        for name in _NAME.findall(line):
            if "/" in name.rstrip("/"):
                first = name.split("/")[0]
                path = ROOT / name if (ROOT / first).is_dir() else ROOT / "memwire" / name
                here = path if name.endswith("/") else path.parent
            elif here is not None:
                path = here / name
            else:
                continue
            out.append((n, name, path))
    return out


def sections(text: str) -> str:
    """What the check reads: the concern table and the store backend's recipe (elsewhere the
    document names files of a memory directory, ``DIR/inbox/``, and examples to write)."""
    table = text[text.index("## Where each concern lives"):]
    table = table[:table.index("\n## ", 1)]
    recipe = text[text.index("**A store backend.**"):]
    return table + recipe[:recipe.index("Then `tests/memory/test_protocol.py`")]


def test_every_module_the_architecture_names_exists() -> None:
    named = named_modules(sections(ARCHITECTURE.read_text(encoding="utf-8")))
    assert len(named) > 50  # the concern table is read
    missing = [f"line {n}: {name}" for n, name, path in named if not path.exists()]
    assert missing == [], "docs/architecture.md names modules that do not exist:\n" + "\n".join(missing)


def test_the_check_catches_a_wrong_name() -> None:
    text = ("| x | `memory/_store.py` (`MemoryStore`), `_store_nowhere.py`; `adapters/server/_refusal.py` |\n"
            "in `memory/postgres/` (`_store_rows.py`, `_rows.py`) and `tests/stores.py`")
    assert [(name, p.exists()) for _, name, p in named_modules(text)] == [
        ("memory/_store.py", True), ("_store_nowhere.py", False), ("adapters/server/_refusal.py", True),
        ("memory/postgres/", True), ("_store_rows.py", True), ("_rows.py", False), ("tests/stores.py", True)]
