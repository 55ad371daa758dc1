"""`memwire import` says how each new memory settled (issue 33): added as a fact of its own, merged
into an active memory that says it in other words (reinforced, nothing added), or added as a new
value of one (the older archived); a dry run says the same without writing; importing the same
files again finds every one of them there, the merged ones included (no second reinforcement)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memwire.cli import main
from memwire.memory._import import import_path
from tests.stores import StoreSpec

SOURCE = ("- The staging database listens on port 6543.\n"   # a new value of the port
          "- The ledger database is PostgreSQL 15.\n"        # the ledger memory in other words
          "- Use tabs for indentation.\n")                   # a fact of its own


def _counts(report: Any) -> tuple[int, int, int, int]:
    return report.added, report.merged, report.superseded, report.already


def test_an_import_counts_added_merged_and_superseded_apart(make_store: StoreSpec, tmp_path: Path) -> None:
    s = make_store()
    port = s.add("The staging database listens on port 5433.")
    ledger = s.add("The ledger runs on PostgreSQL 15.")
    src = tmp_path / "src"
    src.mkdir()
    (src / "MEMORY.md").write_text(SOURCE)
    evidence = s.lifecycle.get(ledger).evidence

    dry = import_path(src, make_store(), dry_run=True)
    assert _counts(dry) == (1, 1, 1, 0) and [f.merged for f in dry.files] == [1]
    assert {m.id for m in make_store()} == {port.id, ledger.id}  # nothing written

    got = import_path(src, s)  # one store throughout: a reinforcement's count is saved a while later
    assert _counts(got) == (1, 1, 1, 0)
    [f] = got.files
    assert (f.added, f.merged, f.superseded) == (1, 1, 1)
    assert sorted(m.text for m in s) == ["The ledger runs on PostgreSQL 15.",
                                         "The staging database listens on port 6543.", "Use tabs for indentation."]
    assert [m.text for m in s.archive] == ["The staging database listens on port 5433."]
    assert s.lifecycle.get(ledger).evidence == evidence + 1  # said again: reinforced once

    again = import_path(src, make_store())  # another process: it reads the link the first one saved
    assert _counts(again) == (0, 0, 0, 3)  # idempotent, the merged text included
    assert import_path(src, s).already == 3
    assert s.lifecycle.get(ledger).evidence == evidence + 1  # the same file is no new evidence


def test_the_cli_prints_the_counts_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "mem")
    for text in ("The staging database listens on port 5433.", "The ledger runs on PostgreSQL 15."):
        assert main(["add", text, "--dir", d]) == 0
    src = tmp_path / "src"
    src.mkdir()
    (src / "MEMORY.md").write_text(SOURCE)
    capsys.readouterr()
    assert main(["import", str(src), "--dir", d, "--dry-run"]) == 0
    assert ("total: would add 1, would merge 1 (said in other words by a memory there), would replace 1 (new "
            "values: the older ones archived), already there 0, skipped 0") in capsys.readouterr().out
    assert main(["import", str(src), "--dir", d, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["added"], data["merged"], data["superseded"], data["already_there"]) == (1, 1, 1, 0)
    assert [(f["added"], f["merged"], f["superseded"]) for f in data["files"]] == [(1, 1, 1)]
    assert main(["import", str(src), "--dir", d]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"total: added 0, already there 3, skipped 0 -> {d}"
