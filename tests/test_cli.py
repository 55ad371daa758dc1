"""The `memwire` command: memory commands and preview, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memwire.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_search_pin_forget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "mem")
    code, out, _ = run(capsys, "add", "--dir", d, "Run the tests with make test", "--tag", "build", "--json")
    assert code == 0
    mem = json.loads(out)
    assert mem["text"] == "Run the tests with make test" and mem["tags"] == ["build"]
    run(capsys, "add", "--dir", d, "User prefers tabs over spaces", "--topic", "Preferences")
    run(capsys, "add", "--dir", d, "Deploys go out on Tuesdays")
    code, out, _ = run(capsys, "list", "--dir", d, "--json")
    assert {m["text"] for m in json.loads(out)} >= {"Run the tests with make test", "User prefers tabs over spaces"}
    code, out, _ = run(capsys, "search", "--dir", d, "how", "do", "I", "run", "the", "tests", "--json")
    hits = json.loads(out)
    assert hits[0]["id"] == mem["id"] and hits[0]["score"] > 0
    code, out, _ = run(capsys, "pin", "--dir", d, mem["id"])
    assert code == 0 and "pinned" in out
    code, out, _ = run(capsys, "list", "--dir", d, "--pinned", "--json")
    assert [m["id"] for m in json.loads(out)] == [mem["id"]]
    code, out, _ = run(capsys, "forget", "--dir", d, mem["id"])
    assert code == 0 and "forgot" in out
    code, out, err = run(capsys, "forget", "--dir", d, mem["id"])
    assert code == 2 and "no memory with id" in err


def test_namespace_has_its_own_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "mem"
    run(capsys, "add", "--dir", str(d), "--namespace", "alice", "Alice deploys with helm")
    assert (d / "namespaces" / "alice" / "MEMORY.md").is_file()
    _, out, _ = run(capsys, "list", "--dir", str(d), "--json")
    assert json.loads(out) == []
    code, _, err = run(capsys, "list", "--dir", str(d), "--namespace", "../etc")
    assert code == 2 and "invalid namespace" in err


def test_preview_marks_the_injected_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "mem")
    for text in ["Run the tests with make test; Docker must be running", "User prefers tabs over spaces",
                 "The staging database listens on port 5433"]:
        run(capsys, "add", "--dir", d, text)
    code, out, _ = run(capsys, "preview", "--dir", d, "How do I run the tests?")
    assert code == 0 and "injected" in out and "make test" in out and ">> [0]" in out
    msgs = tmp_path / "messages.json"
    msgs.write_text(json.dumps([{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Which port does the staging database use?"}]))
    code, out, _ = run(capsys, "preview", "--dir", d, "--messages", str(msgs), "--json", "--mode", "system_prompt_per_turn")
    data = json.loads(out)
    assert data["injection"]["mode"] == "systemPromptPerTurn"
    assert "5433" in data["body"]["messages"][0]["content"]


def test_errors_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "preview", "--dir", str(tmp_path), "--mode", "fast", "hi")
    assert code == 2 and "unknown mode 'fast'" in err and "contextPerTurn" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "preview", "--dir", str(tmp_path), "--messages", str(bad))
    assert code == 2 and "bad.json" in err
    bad.write_text(json.dumps([{"content": "no role"}]))
    code, _, err = run(capsys, "preview", "--dir", str(tmp_path), "--messages", str(bad))
    assert code == 2 and "no 'role'" in err
