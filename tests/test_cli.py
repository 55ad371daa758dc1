"""The `memwire` command: memory commands and preview, as a user runs them."""

from __future__ import annotations

import json
import os
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


def test_preview_shows_the_profile_block(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    d = str(tmp_path / "mem")
    run(capsys, "add", "--dir", d, "--tag", "preference", "--pin", "User prefers tabs over spaces")
    run(capsys, "add", "--dir", d, "Run the tests with make test; Docker must be running")
    monkeypatch.setenv("MEMWIRE_PROFILE", "true")
    monkeypatch.setenv("MEMWIRE_STARTUP_MAX_TOKENS", "100")  # the pinned memory only
    code, out, _ = run(capsys, "preview", "--dir", d, "How do I run the tests?")
    assert code == 0 and "profile block: 1 memories" in out and "## Pinned" in out and "Showing 1 of 2" in out
    assert ">> [1]" in out and "make test" in out  # this turn's block, after the profile


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


def test_preview_is_not_subject_to_the_retrieval_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A preview answers what the request would be; a tiny budget (a cold start) must not hide it."""
    d = str(tmp_path / "mem")
    run(capsys, "add", "--dir", d, "Run the tests with make test")
    monkeypatch.setenv("MEMWIRE_TIMEOUT_MS", "0.0001")
    code, out, _ = run(capsys, "preview", "--dir", d, "--json", "How do I run the tests?")
    assert code == 0
    injection = json.loads(out)["injection"]
    assert injection["skipped"] is None and injection["memory_ids"]


def test_add_dash_reads_the_text_from_standard_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    d = str(tmp_path / "mem")
    monkeypatch.setattr("sys.stdin", io.StringIO("Deploys go out on Tuesdays only\n"))
    code, out, _ = run(capsys, "add", "--dir", d, "-", "--json")
    assert code == 0 and json.loads(out)["text"] == "Deploys go out on Tuesdays only"
    monkeypatch.setattr("sys.stdin", io.StringIO("  \n"))
    code, _, err = run(capsys, "add", "--dir", d, "-")
    assert code == 2 and "standard input was empty" in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["-k", "0"], ["-k", "-1"], ["-k", "101"], ["-k", "x"], ["--min-score", "5"]])
def test_search_limits_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["search", "--dir", str(tmp_path), "tabs", *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and ("from 1 to 100" in err or "from 0 to 1" in err) and "Traceback" not in err


@pytest.mark.parametrize("command", [["add", "hello"], ["list"], ["search", "tabs"], ["proxy", "--workers", "1"],
                                     ["proxy", "--workers", "2"]])
@pytest.mark.parametrize("under", ["", "sub"])
def test_a_dir_that_is_a_file_is_named_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, command: list[str],
                                                        under: str) -> None:
    """A directory the person named that cannot be a memory directory is one line naming the path,
    exit 2, for every command: the proxy refuses at start (issue 34 item 1), it does not serve."""
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: pytest.fail("served with an unusable memory directory"))
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    named = afile / under if under else afile
    code, _, err = run(capsys, command[0], "--dir", str(named), *command[1:])
    why = "the memory directory is a file, not a directory" if not under else \
        f"the memory directory cannot be created: {afile} is a file"
    assert code == 2 and err == f"memwire: error: {named}: {why}\n"
    assert afile.read_text() == "x"


@pytest.mark.parametrize("how", ["--config", "MEMWIRE_CONFIG"])
@pytest.mark.parametrize("command", [["list"], ["trust", "--list"], ["proxy"]])
def test_a_config_that_is_a_directory_is_named_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, how: str,
                                                  command: list[str]) -> None:
    """``--config DIR`` says it is a directory, not "config file not found" (issue 34 item 1)."""
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    if how == "--config":
        code, _, err = run(capsys, "--config", "conf", *command)
        source = ""
    else:
        monkeypatch.setenv("MEMWIRE_CONFIG", "conf")
        code, _, err = run(capsys, *command)
        source = "MEMWIRE_CONFIG: "
    expected = f"memwire: error: {source}conf: a directory, not a config file (name the file, such as " \
               f"{Path('conf') / 'memwire.toml'})\n"
    assert code == 2 and err == expected
    code, _, err = run(capsys, "--config", "missing.toml", *command)
    assert code == 2 and err.endswith("missing.toml: config file not found\n")


@pytest.mark.parametrize(("flag", "value"), [("--header-timeout", "0"), ("--body-timeout", "-1"), ("--max-connections", "0")])
def test_proxy_limits_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    code, _, err = run(capsys, "proxy", "--dir", str(tmp_path), flag, value)
    assert code == 2 and flag in err and "Traceback" not in err


def test_inbox_list_approve_reject(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memwire import MemoryStore
    from memwire.memory._inbox import inbox_of

    d = tmp_path / "mem"
    store = MemoryStore(d)
    inbox = inbox_of(store)
    ci = inbox.add("CI runs on Node 20", tags=["fact", "captured"], topic="Facts")
    short = inbox.add("User prefers short answers", tags=["preference", "captured"], topic="Preferences")
    java = inbox.add("The build needs Java 21", tags=["fact", "captured"], topic="Facts")
    code, out, _ = run(capsys, "inbox", "--dir", str(d), "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)] == [ci.id, java.id, short.id]
    assert len(store) == 0  # waiting memories are not memory
    code, out, _ = run(capsys, "inbox", "--dir", str(d), "approve", ci.id[:6])  # options before the action
    assert code == 0 and f"approved (injected from now on): {ci.id}  CI runs on Node 20" in out
    code, out, _ = run(capsys, "inbox", "reject", "--dir", str(d), short.id)  # ... or after it
    assert code == 0 and "rejected" in out
    assert [m.text for m in store] == ["CI runs on Node 20"] and store.get(ci.id).topic == "Facts"
    assert "rejected" in store.archive.get(short.id).tags
    for bad in (["approve"], ["approve", java.id, "--all"], ["reject", "zzzz"]):
        code, _, err = run(capsys, "inbox", "--dir", str(d), *bad)
        assert code == 2 and err.startswith("memwire: error: ") and "Traceback" not in err
    assert [m.id for m in inbox_of(store)] == [java.id]  # a failed command moved nothing
    code, out, _ = run(capsys, "inbox", "approve", "--all", "--dir", str(d))
    assert code == 0 and java.id in out and len(inbox_of(store)) == 0
    _, out, _ = run(capsys, "inbox", "--dir", str(d))
    assert "is empty" in out


@pytest.mark.parametrize(("argv", "usage", "hint"), [
    (["add", "x", "--tagg", "build"], "usage: memwire add ", "did you mean --tag?"),
    (["list", "--dri", "x"], "usage: memwire list ", "did you mean --dir?"),
    (["proxy", "--prot", "8788"], "usage: memwire proxy ", "did you mean --port?"),
    (["proxy", "--prot=8788"], "usage: memwire proxy ", "did you mean --port?"),
    (["search", "tabs", "--min-socre", "0.5"], "usage: memwire search ", "did you mean --min-score?"),
    (["inbox", "approve", "--alll"], "usage: memwire inbox approve ", "did you mean --all?"),
    (["keys", "add", "alice", "--lable", "ci"], "usage: memwire keys add ", "did you mean --label?"),
    (["list", "--zzzzzz"], "usage: memwire list ", "memwire list --help lists its options"),
    (["list", "--config", "my.toml"], "usage: memwire list ",
     "--config is memwire's own option: give it before the command, as in memwire --config ... list"),
    (["forget", "abcd", "efgh"], "usage: memwire forget ", None),
])
def test_a_mistyped_option_shows_the_subcommands_usage_and_the_nearest_option(
        capsys: pytest.CaptureFixture[str], argv: list[str], usage: str, hint: str | None) -> None:
    """Issue 34 item 3: the subcommand's usage, not memwire's, and "did you mean" from its options."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(usage) and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    prog = usage.removeprefix("usage: ").strip()
    extras = " ".join(argv[next(i for i, a in enumerate(argv) if a.startswith("-") or a == "efgh"):])
    assert last == f"{prog}: error: unrecognized arguments: {extras}" + (f"; {hint}" if hint else "")


def test_proxy_takes_a_capture_setting(capsys: pytest.CaptureFixture[str]) -> None:
    from memwire.cli import build_parser

    assert build_parser().parse_args(["proxy", "--capture", "review"]).capture == "review"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["proxy", "--capture", "sometimes"])
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


def test_import_reports_each_file_and_a_second_run_adds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "project"
    (src / ".pi" / "memory" / "topics").mkdir(parents=True)
    (src / "CLAUDE.md").write_text("## Build\n- Run the tests with make test\n```\nmake\n```\n@docs/git.md\n")
    (src / ".pi" / "memory" / "topics" / "lessons.md").write_text("# Lessons\n- [lesson] Read the logs first\n")
    d = str(tmp_path / "mem")
    code, out, err = run(capsys, "import", str(src), "--dir", d, "--dry-run")
    assert code == 0 and not Path(d).exists()
    assert "total: would add 2, already there 0, skipped 1 (code block 1)" in out and "(dry run: nothing written)" in out
    code, out, _ = run(capsys, "import", str(src), "--dir", d)
    assert code == 0 and out.splitlines() == [
        "CLAUDE.md (claude): added 1, already there 0, skipped 1 (code block 1)",
        "  @docs/git.md: an import of CLAUDE.md, not followed (import that file on its own)",
        f"{os.path.join('.pi', 'memory', 'topics', 'lessons.md')} (pi-topics): added 1, already there 0, skipped 0",
        f"total: added 2, already there 0, skipped 1 (code block 1) -> {d}",
    ]
    code, out, _ = run(capsys, "import", str(src), "--dir", d, "--json")
    data = json.loads(out)
    assert code == 0 and (data["added"], data["already_there"]) == (0, 2)
    assert [f["format"] for f in data["files"]] == ["claude", "pi-topics"]
    _, out, _ = run(capsys, "list", "--dir", d, "--json")
    assert [(m["text"], m["tags"]) for m in json.loads(out)] == [
        ("Run the tests with make test", ["imported"]), ("Read the logs first", ["lesson", "imported"])]


def test_import_into_a_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "MEMORY.md").write_text("<!-- 2026-02-15 14:30:00 [a1b2c3d4] -->\n#preference Use pnpm, never npm.\n")
    d = tmp_path / "mem"
    code, out, _ = run(capsys, "import", str(tmp_path / "MEMORY.md"), "--dir", str(d), "--namespace", "alice")
    assert code == 0 and f"-> {d / 'namespaces' / 'alice'}" in out
    _, out, _ = run(capsys, "list", "--dir", str(d), "--namespace", "alice", "--json")
    assert [(m["text"], m["date"]) for m in json.loads(out)] == [("Use pnpm, never npm.", "2026-02-15")]


def test_import_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "mem")
    code, _, err = run(capsys, "import", str(tmp_path / "nowhere"), "--dir", d)
    assert code == 2 and err == f"memwire: error: import: {tmp_path / 'nowhere'} does not exist\n"
    src = tmp_path / "src"
    src.mkdir()
    (src / "MEMORY.md").write_text("- Deploys on Tuesdays\n")
    (src / "broken.md").symlink_to(src / "missing.md")
    code, out, err = run(capsys, "import", str(src), "--dir", d)  # the rest is imported; the exit code says not all
    assert code == 1 and "broken.md: not imported: cannot read: No such file or directory" in out
    assert "MEMORY.md (claude): added 1" in out and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["import", str(src), "--dir", d, "--format", "obsidian"])
    assert exit_.value.code == 2 and "invalid choice: 'obsidian'" in capsys.readouterr().err


def test_forget_archives_and_restore_brings_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "mem")
    _, out, _ = run(capsys, "add", "--dir", d, "The staging database listens on port 5433", "--json")
    mid = json.loads(out)["id"]
    code, out, _ = run(capsys, "forget", "--dir", d, mid[:8])
    assert code == 0 and f"memwire restore {mid[:8]}" in out
    _, out, _ = run(capsys, "search", "--dir", d, "staging", "database", "--json")
    assert json.loads(out) == []
    _, out, _ = run(capsys, "search", "--dir", d, "--archive", "staging", "database", "--json")
    assert [(h["id"], h["tags"]) for h in json.loads(out)] == [(mid, ["forgotten"])]
    code, out, _ = run(capsys, "restore", "--dir", d, mid[:8])
    assert code == 0 and "restored" in out
    _, out, _ = run(capsys, "list", "--dir", d, "--json")
    assert [(m["id"], m["tags"]) for m in json.loads(out)] == [(mid, [])]
    code, _, err = run(capsys, "restore", "--dir", d, mid[:8])
    assert code == 2 and "no memory with id" in err and "archive" in err


def test_stats_and_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memwire import MemoryStore

    d = tmp_path / "mem"
    store = MemoryStore(d)
    store.add("Prefers tabs", ["preference"])
    old = store.add("Standup moved to 9:30", date="2020-01-02", cue="captured")
    store.add("Release notes live in docs/releases", date="2020-01-02")
    store.lifecycle.flush()
    _, out, _ = run(capsys, "stats", "--dir", str(d), "--json")
    rows = {r["category"]: r for r in json.loads(out)}
    assert rows["preference"]["active"] == 1 and rows["fact"]["count"] == 2 and rows["fact"]["cap"] == 500
    code, out, _ = run(capsys, "stale", "--dir", str(d))
    assert code == 0 and "Standup moved" in out and "a sweep archives it" in out
    assert "Release notes live in docs/releases  (yours: pin it, or forget it)" in out  # listed, never moved
    code, out, _ = run(capsys, "stale", "--dir", str(d), "--sweep")
    assert code == 0 and f"archived (decayed) {old.id}" in out
    assert [m.text for m in MemoryStore(d).memories()] == ["Prefers tabs", "Release notes live in docs/releases"]


def test_lifecycle_settings_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMWIRE_HALF_LIVES", "facts=3")
    code, _, err = run(capsys, "stats", "--dir", str(tmp_path))
    assert code == 2 and "half_lives: unknown key(s) facts" in err
    monkeypatch.setenv("MEMWIRE_HALF_LIVES", "fact=3,decision=x")
    code, _, err = run(capsys, "stats", "--dir", str(tmp_path))
    assert code == 2 and "half_lives" in err


def test_export_then_import_moves_a_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, dump = str(tmp_path / "mem"), tmp_path / "alice.jsonl"
    run(capsys, "add", "--dir", d, "--namespace", "alice", "Alice deploys with helm", "--tag", "infra")
    _, out, _ = run(capsys, "add", "--dir", d, "--namespace", "alice", "Alice's old laptop", "--json")
    run(capsys, "forget", "--dir", d, "--namespace", "alice", json.loads(out)["id"])
    code, out, err = run(capsys, "export", "--dir", d, "--namespace", "alice", "-o", str(dump))
    assert code == 0 and out == "" and "exported 1 memories, 1 archived" in err
    code, out, _ = run(capsys, "import", str(dump), "--dir", d, "--namespace", "bob")
    assert code == 0 and "memory: added 1, 0 already there" in out and "archive: added 1" in out
    code, out, _ = run(capsys, "import", str(dump), "--dir", d, "--namespace", "bob", "--json")
    assert json.loads(out)["added"] == {"memory": 0, "archive": 0, "inbox": 0}
    _, out, _ = run(capsys, "list", "--dir", d, "--namespace", "bob", "--json")
    assert [(m["text"], m["tags"]) for m in json.loads(out)] == [("Alice deploys with helm", ["infra"])]
    _, stdout_dump, _ = run(capsys, "export", "--dir", d, "--namespace", "bob")  # to standard output
    assert stdout_dump.splitlines()[1:] == dump.read_text().splitlines()[1:]


def test_a_damaged_export_is_refused_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, dump = str(tmp_path / "mem"), tmp_path / "dump.jsonl"
    dump.write_text('{"memwire_export": 1}\n{"kind": "memory", "text": "Fine"}\n{"kind": "memory", "text": ""}\n')
    code, _, err = run(capsys, "import", str(dump), "--dir", d)
    assert code == 2 and err == f"memwire: error: {dump}:3: a memory needs some text\n"
    assert not (tmp_path / "mem" / "MEMORY.md").exists()  # the good line was not written either


# Bytes a terminal acts on instead of showing: a colour, the window title (OSC), a bell, the C1
# CSI, a NUL, a bidirectional override that reorders what follows.
HOSTILE = "Build output is \x1b[31mred\x1b[0m \x1b]0;owned\x07 then \x9b2J and \x00 and \u202eevil"


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]


def test_listings_escape_control_characters_of_hand_edited_memories(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "mem"
    d.mkdir()
    (d / "MEMORY.md").write_text(f"# Notes\n- {HOSTILE}\n", encoding="utf-8")  # written by hand, not by memwire
    log = tmp_path / "requests.jsonl"
    log.write_text(json.dumps({"at": 1.0, "api": "openai.chat", "model": "m", "status": 200,
                               "mode": "contextPerTurn\x1b]0;owned\x07\x9b2J", "provider": "openai"}) + "\n")
    outputs = []
    for args in (["list"], ["list", "--json"], ["search", "build", "output"], ["search", "build", "--json"],
                 ["stale"], ["preview", "what", "is", "the", "build", "output?"], ["preview", "build", "--json"]):
        code, out, err = run(capsys, *args, "--dir", str(d))
        assert code == 0, err
        outputs.append(out + err)
    for args in (["stats", "--requests", "--log", str(log)], ["stats", "--requests", "--log", str(log), "--json"]):
        code, out, err = run(capsys, *args)
        assert code == 0, err
        outputs.append(out + err)
    for out in outputs:
        assert _raw_controls(out) == [], out
    assert "Build output is \\x1b[31mred\\x1b[0m \\x1b]0;owned\\x07 then \\x9b2J and \\x00 and \\u202eevil" in outputs[0]
    listed = json.loads(outputs[1])[0]["text"]
    assert listed == HOSTILE  # JSON escapes them and still reads back as the text on disk
    assert "contextPerTurn\\x1b]0;owned\\x07\\x9b2J" in outputs[7]


def test_add_refuses_control_characters_naming_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "add", "--dir", str(tmp_path / "mem"), "colours: \x1b[31mcrimson")
    assert code == 2 and out == "" and "control character, U+001B ESC" in err and "crimson" not in err
    code, _, err = run(capsys, "add", "--dir", str(tmp_path / "mem"), "the vault PIN is 4921")
    assert code == 2 and "secret (PIN)" in err and "4921" not in err
    assert not (tmp_path / "mem" / "MEMORY.md").exists()
