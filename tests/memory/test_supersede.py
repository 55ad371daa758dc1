"""Memory that stays true (issue 33 items 1, 3, 5): the decision "same subject, new value", duplicates
in other words, look-alikes kept apart, conflicts; the store's add path on both backends; history,
dedupe, restore."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryNotFoundError, MemoryStore
from memwire.cli import main
from memwire.memory import _supersede
from memwire.memory._model import Memory
from memwire.memory._supersede import compare, decide
from tests.stores import StoreSpec

# (kind, older memory, newer memory, expected verdict)
UPDATES = [
    ("The staging database listens on port 5433.", "The staging database now listens on port 6543."),
    ("The staging database now listens on port 6543.", "The staging database listens on port 7000."),
    ("User's timezone is Europe/Paris.", "User's timezone is America/New_York."),
    ("My timezone is Europe/Paris.", "My timezone is America/New_York."),
    ("The deploy script is deploy.sh.", "The deploy script is ship.sh."),
    ("The release branch is called release-2025.", "The release branch is called release-2026."),
    ("The API server runs on port 8080.", "The API server runs on port 9090 now."),
    ("We use Python 3.11 in CI.", "We use Python 3.12 in CI."),
    ("The config file lives at ~/.config/app/old.toml.", "The config file lives at ~/.config/app/settings.toml."),
    ("The team lead is Alice.", "The team lead is Bob."),
    ("Carol lives in Berlin.", "Carol lives in Munich."),
    ("I have two cats.", "I have three cats."),
    ("The CI runs on GitHub Actions.", "The CI now runs on GitLab CI."),
    ("The logs are stored in /var/log/app.", "The logs are stored in /srv/logs/app instead."),
    ("The default branch is `master`.", "The default branch is `main`."),
    ("The staging database listens on port 5433.", "The staging database moved from port 5433 to port 6543."),
    ("Deploys happen on Fridays.", "Deploys happen on Mondays."),
    ("The Node version of the frontend is 18.", "The Node version of the frontend is 20."),
    ("Remember that the code freeze starts on 2026-11-29.", "The code freeze starts on 2026-12-03."),
    ("The max upload size is 10 MB.", "The max upload size is 25 MB."),
    ("We use Docker for local development.", "We no longer use Docker for local development."),
]
PREFERENCES = [
    ("I prefer npm for installing packages.", "I prefer pnpm over npm now."),
    ("User prefers npm for installing packages.", "User prefers pnpm over npm now."),
    ("Use tabs for indentation.", "Use spaces for indentation."),
    ("Indent with tabs.", "Indent with 4 spaces."),
    ("Always run the tests with pytest.", "Run the tests with unittest from now on."),
    ("I like dark mode.", "I prefer light mode."),
    ("Use yarn.", "We switched from yarn to pnpm."),
    ("Keep answers detailed.", "Keep answers concise."),
    ("Format Python with black.", "Format Python with ruff instead of black."),
]
LOOKALIKES = [
    # one subject word, values of other kinds: two facts about it, not a new value (a date note
    # from policies/_dates.py is a value too)
    ('The password is in 1Password under "Staging DB".', "The password was changed yesterday (2026-11-27)."),
    ("The staging Redis port is 6380.", "The production database port is 5432."),
    ("The production database port is 5432.", "The staging Redis port is 6380."),
    ("The staging Redis port is 6380.", "The staging Postgres port is 5432."),
    ("Alice's phone number is 555-1234.", "Bob's phone number is 555-9876."),
    ("The frontend runs on port 3000.", "The backend runs on port 8000."),
    ("Our Python version is 3.11.", "Our Node version is 20."),
    ("The staging database listens on port 5433.", "The staging database has 16 GB of RAM."),
    ("My sister's name is Anna.", "My brother's name is Tom."),
    ("Alice is on the platform team.", "Bob is on the platform team."),
    ("Carol lives in Berlin.", "Dave lives in Berlin."),
    ("I prefer npm for installing packages.", "I prefer dark mode in the editor."),
    ("Use tabs in Python files.", "Use spaces in YAML files."),
    ("The staging database port is 5432.", "The production database port is 5432."),
    ("The deploy script is ship.sh.", "The test script is run_tests.sh."),
    ("My timezone is Europe/Paris.", "My home office is in Europe/Berlin."),
    ("I prefer Python for scripts.", "I prefer Go for services."),
    ("The ledger runs on PostgreSQL 15.", "The billing service runs on MySQL 8."),
    ("Remember that Bob's birthday is 1990-04-12.", "Remember that Alice's birthday is 1992-07-30."),
    ("The staging server is down.", "The staging database is slow."),
    ("My favorite color is blue.", "My favorite food is ramen."),
    ("fact number 1 about things", "new fact 1"),
]
DUPLICATES = [
    ("The ledger runs on PostgreSQL 15.", "The ledger database is PostgreSQL 15."),
    ("The staging database listens on port 5433.", "Remember that the staging database listens on port 5433."),
    ("User prefers tabs for indentation.", "I prefer tabs for indentation."),
    ("I like dark mode.", "User prefers dark mode."),
    ("The deploy script is ship.sh.", "Keep in mind that the deploy script is ship.sh"),
    ("Use pnpm for installing packages.", "Always use pnpm to install packages."),
    ("Our Python version is 3.12.", "We are on Python version 3.12."),
]
CONFLICTS = [
    ("The API runs on port 8080.", "The API gateway runs on port 9090."),
    ("The staging database listens on port 5433.", "The staging database listens on a different port now."),
    ("The build takes 10 minutes.", "The full build takes 25 minutes."),
    ("My favorite color is blue.", "My favorite color is green."),
    ("The staging server is offline.", "The staging server is online again."),
]

CASES = ([("update", o, n, "supersede") for o, n in UPDATES]
         + [("preference", o, n, "supersede") for o, n in PREFERENCES]
         + [("look-alike", o, n, "separate") for o, n in LOOKALIKES]
         + [("duplicate", o, n, "duplicate") for o, n in DUPLICATES]
         + [("unsure", o, n, "conflict") for o, n in CONFLICTS])


def test_the_table_has_forty_cases_at_least() -> None:
    assert len(CASES) >= 40
    assert {k for k, *_ in CASES} == {"update", "preference", "look-alike", "duplicate", "unsure"}


@pytest.mark.parametrize(("kind", "old", "new", "expected"), CASES, ids=[f"{c[0]}:{c[2][:40]}" for c in CASES])
def test_compare(kind: str, old: str, new: str, expected: str) -> None:
    assert compare(new, old) == expected


def test_decide_prefers_a_duplicate_then_a_supersession_then_a_conflict() -> None:
    new = Memory.create("The staging database listens on port 6543.")
    dup = Memory.create("Remember that the staging database listens on port 6543.")
    old = Memory.create("The staging database listens on port 5433.")
    other = Memory.create("The staging Redis port is 6380.")
    assert decide(new, [other, old, dup]).verdict == "duplicate"
    assert decide(new, [other, old]) == _supersede.Decision("supersede", old)
    assert decide(new, [other]).verdict == "separate"
    assert decide(new, [new]).verdict == "separate"  # itself is not another memory


# ---------------------------------------------------------------- the store's add path, both backends


def _links(store: Any, mid: str) -> dict[str, Any]:
    store.lifecycle.flush()
    return store.lifecycle.links(mid)


def test_a_new_value_supersedes_the_old_one_archived_and_linked(make_store: StoreSpec) -> None:
    s = make_store()
    redis = s.add("The staging Redis port is 6380.")
    prod = s.add("The production database port is 5432.")
    old = s.add("The staging database listens on port 5433.")
    new = s.add("The staging database now listens on port 6543.")
    assert {m.text for m in s} == {redis.text, prod.text, new.text}  # look-alikes stay
    gone = s.archive.get(old.id)
    assert "superseded" in gone.tags and gone.text == old.text  # archived, as it was
    assert gone.date == old.date  # the day it was said (a restore brings it back); the day it left: below
    assert _links(s, new.id)["supersedes"] == [old.id]
    assert _links(s, old.id)["superseded_by"] == new.id
    assert s.lifecycle.get(old).forgotten is not None  # never injected again, its record kept
    third = s.add("The staging database listens on port 7000.")
    assert [m.text for m in s if "staging database" in m.text] == [third.text]
    assert _links(make_store(), new.id) == {"supersedes": [old.id], "superseded_by": third.id}  # saved
    assert [h.memory.id for h in s.search("staging database port", k=5)][:1] == [third.id]


def test_a_preference_switch_supersedes(make_store: StoreSpec) -> None:
    s = make_store()
    npm = s.add("I prefer npm for installing packages.", tags=["preference"])
    pnpm = s.add("I prefer pnpm over npm now.", tags=["preference"])
    assert [m.id for m in s] == [pnpm.id] and npm.id in s.archive


def test_the_same_thing_in_other_words_reinforces_instead_of_adding(make_store: StoreSpec) -> None:
    s = make_store()
    first = s.add("The ledger runs on PostgreSQL 15.")
    again = s.add("Keep in mind that the ledger database is PostgreSQL 15.")
    assert again == first and len(s) == 1
    s.lifecycle.flush()
    assert s.lifecycle.get(first).evidence == 2


def test_unsure_keeps_both_and_marks_a_conflict(make_store: StoreSpec) -> None:
    s = make_store()
    api = s.add("The API runs on port 8080.")
    gateway = s.add("The API gateway runs on port 9090.")
    assert {m.id for m in s} == {api.id, gateway.id}
    assert _links(s, gateway.id) == {"conflicts": [api.id]}
    assert _links(s, api.id) == {"conflicts": [gateway.id]}


def test_replaces_supersedes_whatever_the_words(make_store: StoreSpec) -> None:
    s = make_store()
    old = s.add("The deploy script is deploy.sh.")
    note = s.add("Deploys need a green build.")
    new = s.add("Ship with ship.sh.", replaces=old.id[:8])
    assert {m.id for m in s} == {note.id, new.id}
    assert _links(s, new.id) == {"supersedes": [old.id]}


def test_restoring_an_old_value_goes_back_to_it(make_store: StoreSpec) -> None:
    s = make_store()
    paris = s.add("My timezone is Europe/Paris.")
    ny = s.add("My timezone is America/New_York.")
    back = s.restore(paris.id)
    assert [m.id for m in s] == [back.id] == [paris.id]  # nothing lost either way
    assert ny.id in s.archive and paris.id not in s.archive
    assert _links(s, paris.id) == {"supersedes": [ny.id]}  # no longer superseded_by anything
    assert _links(s, ny.id)["superseded_by"] == paris.id


def test_the_archive_and_the_inbox_take_what_they_are_given(make_store: StoreSpec) -> None:
    s = make_store()
    s.inbox.add("The staging database listens on port 5433.")
    s.inbox.add("The staging database listens on port 6543.")
    assert len(s.inbox) == 2  # waiting for review as said; approving one settles it


def test_many_similar_writes_at_once_settle_on_one_current_value(make_store: StoreSpec) -> None:
    import threading

    s = make_store()
    s.add("The build cache lives at /var/cache/build-0.")
    threads = [threading.Thread(target=make_store().add, args=(f"The build cache lives at /var/cache/build-{i}.",))
               for i in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len([m for m in make_store() if "build cache" in m.text]) == 1  # decided under the write lock
    assert len(make_store().archive) == 5


# ---------------------------------------------------------------- history, dedupe, conflicts (library and CLI)


def test_history_follows_the_chain_both_ways_with_dates(make_store: StoreSpec) -> None:
    s = make_store()
    a = s.add("The staging database listens on port 5433.")
    b = s.add("The staging database now listens on port 6543.")
    c = s.add("The staging database listens on port 7000.")
    s.add("The staging Redis port is 6380.")  # a look-alike is not part of it
    for mid in (a.id, b.id[:8], c.id):
        steps = _supersede.history(s, mid)
        assert [st.memory.id for st in steps] == [a.id, b.id, c.id]
    assert [st.state for st in steps] == ["superseded", "superseded", "current"]
    assert steps[0].until and steps[1].until and steps[2].until is None
    assert steps[0].since <= steps[0].until <= steps[1].until  # type: ignore[operator]
    assert steps[1].to_json()["superseded_by"] == c.id and steps[1].to_json()["supersedes"] == [a.id]
    with pytest.raises(MemoryNotFoundError):
        _supersede.history(s, "ffffffffffff")


def test_dedupe_finds_clusters_and_merges_them_into_the_archive(make_store: StoreSpec) -> None:
    s = make_store()
    texts = ["The ledger runs on PostgreSQL 15.", "The deploy script is ship.sh.", "I like dark mode.",
             "The ledger database is PostgreSQL 15.", "User prefers dark mode.", "The staging Redis port is 6380."]
    mems = _hand_written(s, texts)
    clusters = _supersede.duplicate_clusters(s)
    assert [[m.text for m in c] for c in clusters] == [[texts[0], texts[3]], [texts[2], texts[4]]]
    for c in clusters:
        _supersede.merge(s, c)
    assert sorted(m.text for m in s) == sorted([texts[0], texts[1], texts[2], texts[5]])
    assert {m.text for m in s.archive} == {texts[3], texts[4]}
    assert all("merged" in m.tags for m in s.archive)
    ledger = mems[texts[0]]
    assert _links(s, ledger.id) == {"merged": [mems[texts[3]].id]}
    assert s.lifecycle.get(ledger).evidence >= 2
    assert [st.memory.id for st in _supersede.history(s, ledger.id)] == [mems[texts[3]].id, ledger.id]
    back = s.restore(mems[texts[3]].id)  # nothing lost: a merged twin comes back as it was
    assert back.text == texts[3] and back.tags == () and back.id in s


def _hand_written(s: Any, texts: list[str]) -> dict[str, Memory]:
    """Write ``texts`` as a person would by hand (the add path would merge the twins)."""
    if hasattr(s, "path"):
        s.path.mkdir(parents=True, exist_ok=True)
        (s.path / "MEMORY.md").write_text("# Memory\n\n## Notes\n" + "".join(f"- {t}\n" for t in texts))
    else:  # PostgreSQL: rows as an older memwire (no add-path settling) left them
        for t in texts:
            with s._writing() as w:
                w.merge(s.kind, [Memory.create(t, (), False, "Notes")])
    return {m.text: m for m in s.memories()}


def test_conflicts_are_listed_and_resolved_in_one_action(make_store: StoreSpec) -> None:
    s = make_store()
    api = s.add("The API runs on port 8080.")
    gateway = s.add("The API gateway runs on port 9090.")
    assert _supersede.conflicts(s) == [(gateway, api)]
    kept, gone = _supersede.resolve(s, api.id, both=True)
    assert kept == api and gone == [] and _supersede.conflicts(s) == [] and len(s) == 2
    assert _links(s, api.id) == {} and _links(s, gateway.id) == {}
    s2 = make_store()
    s2.add("The build takes 10 minutes.")
    full = s2.add("The full build takes 25 minutes.")
    [(newer, older)] = _supersede.conflicts(s2)
    assert newer == full
    kept, gone = _supersede.resolve(s2, full.id[:8])
    assert kept == full and gone == [older] and [m.id for m in s2 if "build" in m.text] == [full.id]
    assert _links(s2, full.id) == {"supersedes": [older.id]}
    assert _links(s2, older.id) == {"superseded_by": full.id}


def test_cli_history_dedupe_conflicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "m")

    def run(*args: str) -> Any:
        assert main([*args, "--dir", d, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    old = run("add", "My timezone is Europe/Paris.")
    new = run("add", "My timezone is America/New_York.")
    chain = run("history", new["id"][:8])
    assert [(s["text"], s["state"]) for s in chain] == [(old["text"], "superseded"), (new["text"], "current")]
    assert chain[0]["until"] and chain[1]["until"] is None and chain[0]["superseded_by"] == new["id"]
    assert main(["history", old["id"], "--dir", d]) == 0
    assert "superseded" in capsys.readouterr().out
    run("add", "The API runs on port 8080.")
    gw = run("add", "The API gateway runs on port 9090.")
    assert [p["newer"]["id"] for p in run("conflicts")] == [gw["id"]]
    run("conflicts", "--keep", gw["id"])
    assert run("conflicts") == []
    (tmp_path / "m" / "MEMORY.md").write_text("## Notes\n- I like dark mode.\n- User prefers dark mode.\n- Use tabs.\n")
    found = run("dedupe")
    assert [(c["keep"]["text"], [m["text"] for m in c["merge"]], c["applied"]) for c in found] == [
        ("I like dark mode.", ["User prefers dark mode."], False)]
    assert len(run("list")) == 3
    run("dedupe", "--apply")  # proposed in the inbox (tests/memory/test_dedupe_inbox.py): nothing merged yet
    assert len(run("list")) == 3 and len(run("inbox")) == 1
    run("dedupe", "--apply", "--yes")
    assert [m["text"] for m in run("list")] == ["I like dark mode.", "Use tabs."]
    assert run("dedupe") == []


async def test_the_memory_api_shows_a_memorys_history(tmp_path: Path) -> None:
    import httpx
    from starlette.applications import Starlette

    from memwire import MemoryStore, Middleware
    from memwire.adapters.server._memory_api import memory_api

    store = MemoryStore(tmp_path / "mem")
    app = Starlette(routes=[memory_api(Middleware(store=store))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as http:
        old = (await http.post("/memwire/v1/memories", json={"text": "I prefer npm for installing packages."})).json()
        new = (await http.post("/memwire/v1/memories", json={"text": "I prefer pnpm over npm now."})).json()
        assert [m["id"] for m in (await http.get("/memwire/v1/memories")).json()["data"]] == [new["id"]]
        for mid in (old["id"], new["id"][:6]):
            r = await http.get(f"/memwire/v1/memories/{mid}/history")
            assert r.status_code == 200
            body = r.json()
            assert body["count"] == 2
            assert [(s["id"], s["state"]) for s in body["data"]] == [(old["id"], "superseded"), (new["id"], "current")]
            assert body["data"][0]["superseded_by"] == new["id"] and body["data"][0]["until"]
            assert body["data"][1]["supersedes"] == [old["id"]] and body["data"][1]["until"] is None
        r = await http.get("/memwire/v1/memories/ffffffff/history")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_a_conflict_pair_is_never_injected_as_two_equal_facts(make_store: StoreSpec) -> None:
    from memwire import Middleware

    s = make_store()
    api = s.add("The API runs on port 8080.")
    gateway = s.add("The API gateway runs on port 9090.")
    s.add("The API is written in Go.")
    shown = _supersede.injected(s, [api, gateway])
    assert [m.id for m in shown] == [gateway.id]
    assert shown[0].text.startswith(gateway.text) and api.text in shown[0].text
    assert [m.id for m in _supersede.injected(s, [api])] == [gateway.id]  # the older alone: the newer instead
    mw = Middleware(store=s, mode="contextPerTurn")
    p = mw.prepare([{"role": "user", "content": "Which port does the API run on?"}], session_id="s")
    assert p.injection is not None and gateway.id in p.injection.memory_ids and api.id not in p.injection.memory_ids
    assert "9090" in p.injection.text and "newer than an earlier note" in p.injection.text
    _supersede.resolve(s, api.id, both=True)
    assert _supersede.injected(s, [api, gateway]) == [api, gateway]  # resolved: two facts again


def test_injected_fails_open(make_store: StoreSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    s = make_store()
    mems = [s.add("The API runs on port 8080."), s.add("The API gateway runs on port 9090.")]

    def broken(ids: Any) -> Any:
        raise OSError("disk")

    monkeypatch.setattr(s.lifecycle, "links_many", broken)
    assert _supersede.injected(s, mems) == mems


def test_the_decision_sees_another_writers_memory_its_cache_has_not_caught_up_with(make_store: StoreSpec) -> None:
    a, b = make_store(), make_store()
    assert a.memories() == []  # loaded
    a.ready = lambda: True  # type: ignore[method-assign]  # as if no change had been heard of yet
    old = b.add("The staging database listens on port 5433.")
    new = a.add("The staging database listens on port 6543.")
    assert [m.id for m in make_store()] == [new.id] and old.id in make_store().archive


def test_inbox_stale_and_stats_tell_of_conflicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "m")
    for cmd in ("inbox", "stale", "stats"):
        assert main([cmd, "--dir", d]) == 0
        assert "conflict" not in capsys.readouterr().out
    main(["add", "The API runs on port 8080.", "--dir", d])
    main(["add", "The API gateway runs on port 9090.", "--dir", d])
    capsys.readouterr()
    for cmd in ("inbox", "stale", "stats"):
        assert main([cmd, "--dir", d]) == 0
        out = capsys.readouterr().out
        assert "1 conflict(s) for you to resolve" in out and "The API gateway runs on port 9090." in out, cmd
        assert main([cmd, "--dir", d, "--json"]) == 0
        json.loads(capsys.readouterr().out)  # the JSON output keeps its shape


@pytest.mark.parametrize(("button", "kept"), [("keep newer", "gateway"), ("keep older", "api"), ("keep both", "both")])
async def test_the_page_shows_conflicts_and_resolves_one_in_one_action(tmp_path: Path, button: str, kept: str) -> None:
    import re

    import httpx
    from starlette.applications import Starlette

    from memwire import MemoryStore, Middleware
    from memwire.adapters.server._ui import ui_routes

    store = MemoryStore(tmp_path / "mem")
    api = store.add("The API runs on port 8080.")
    gateway = store.add("The API gateway runs on port 9090.")
    app = Starlette(routes=ui_routes(Middleware(store=store)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test",
                                 headers={"origin": "http://proxy.test"}, follow_redirects=True) as http:
        page = (await http.get("/memwire/ui")).text
        row = re.search(r'<table id="conflicts"[^>]*>.*?</table>', page, re.S)
        assert row is not None and api.text in row.group() and gateway.text in row.group()
        action = re.search(rf'action="([^"]+)"><input type="hidden" name="both" value="(\d)"><button>{button}<',
                           row.group())
        assert action is not None
        r = await http.post(action.group(1).replace("&amp;", "&"), data={"both": action.group(2)})
        assert r.status_code == 200 and 'id="conflicts"' not in r.text
    ids = {m.id for m in store.memories()}
    assert ids == {"gateway": {gateway.id}, "api": {api.id}, "both": {api.id, gateway.id}}[kept]
    assert _supersede.conflicts(store) == []


def test_a_captured_timezone_change_keeps_its_history(tmp_path: Path) -> None:
    from memwire import MemoryStore, Middleware
    from memwire.memory._inbox import read_log

    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn", capture="auto")
    for session, said in (("a", "My timezone is Europe/Paris."), ("b", "My timezone is America/New_York.")):
        mw.prepare([{"role": "user", "content": said}], session_id=session)
        mw.flush()
    [now] = store.memories()
    assert now.text == "User's timezone is America/New_York."
    steps = _supersede.history(store, now.id)
    assert [(s.memory.text, s.state) for s in steps] == [("User's timezone is Europe/Paris.", "superseded"),
                                                          ("User's timezone is America/New_York.", "current")]
    assert [e["event"] for e in read_log(store)].count("superseded") == 1


def test_an_export_carries_the_history_to_another_store(tmp_path: Path, make_store: StoreSpec) -> None:
    import io

    from memwire import MemoryStore
    from memwire.memory._transfer import export_store, import_export

    src = MemoryStore(tmp_path / "src")
    old = src.add("My timezone is Europe/Paris.")
    new = src.add("My timezone is America/New_York.")
    src.lifecycle.flush()
    out = io.StringIO()
    export_store(src, out)
    dst = make_store()
    import_export(dst, io.StringIO(out.getvalue()))
    dst.lifecycle.flush()
    steps = _supersede.history(make_store(), new.id)
    assert [(s.memory.id, s.state) for s in steps] == [(old.id, "superseded"), (new.id, "current")]


def test_an_older_dated_value_does_not_replace_a_newer_one(make_store: StoreSpec) -> None:
    s = make_store()
    now = s.add("The staging database listens on port 6543.", date="2026-11-20")
    old = s.add("The staging database listens on port 5433.", date="2026-10-01")  # an import of older notes
    assert {m.id for m in s} == {now.id, old.id}
    assert _links(s, old.id) == {"conflicts": [now.id]} and _links(s, now.id) == {"conflicts": [old.id]}
    assert [m.id for m in _supersede.injected(s, [old])] == [now.id]


def test_another_scopes_memory_is_not_removed_but_marked(tmp_path: Path) -> None:
    from memwire import MemoryStore

    home = MemoryStore(tmp_path / "home")
    mine = home.add("My timezone is Europe/Paris.")
    proj = MemoryStore(tmp_path / "proj", global_dir=tmp_path / "home")
    new = proj.add("My timezone is America/New_York.")
    assert {m.id for m in proj} == {mine.id, new.id} and mine.id in MemoryStore(tmp_path / "home")
    assert _links(proj, new.id) == {"conflicts": [mine.id]}


def test_restoring_never_merges_into_a_look_alike(make_store: StoreSpec) -> None:
    s = make_store()
    twin = s.add("The ledger database is PostgreSQL 15.")
    gone = s.forget(twin.id)
    kept = s.add("The ledger runs on PostgreSQL 15.")
    back = s.restore(gone.id)  # says the same as the active one: restored anyway, not merged and lost
    assert back.id == twin.id and {m.id for m in s} == {twin.id, kept.id} and twin.id not in s.archive


def test_the_startup_block_shows_a_conflict_pair_as_its_newer_memory(make_store: StoreSpec) -> None:
    from memwire import Middleware

    s = make_store()
    api = s.add("The API runs on port 8080.")
    gateway = s.add("The API gateway runs on port 9090.")
    other = s.add("Deploys go out on Tuesdays.")
    p = Middleware(store=s, mode="startup").prepare([{"role": "user", "content": "hello there, what's new?"}],
                                                     session_id="s")
    assert p.injection is not None
    assert set(p.injection.memory_ids) == {gateway.id, other.id}
    assert "newer than an earlier note it may replace" in p.injection.text and "8080" in p.injection.text
    assert api.id not in p.injection.memory_ids


def test_a_new_value_keeps_the_pin_of_the_one_it_replaces(make_store: StoreSpec) -> None:
    s = make_store()
    s.add("My timezone is Europe/Paris.", pinned=True)
    new = s.add("My timezone is America/New_York.")
    assert new.pinned and [m.id for m in make_store().pinned()] == [new.id]
    other = s.add("The staging Redis port is 6380.")
    assert not other.pinned


def test_a_search_that_fails_leaves_the_write_whole(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Settling needs a search; when it raises, the new memory is added as it is (one line, no text)."""
    class Broken(MemoryStore):
        def search(self, *a: Any, **k: Any) -> Any:
            raise OSError("index on fire")

    store = Broken(tmp_path / "mem")
    with caplog.at_level(logging.WARNING, logger="memwire"):
        store.add("The staging database listens on port 5433.")
        store.add("The staging database listens on port 6543.")
    assert sorted(m.text for m in MemoryStore(tmp_path / "mem")) == [
        "The staging database listens on port 5433.", "The staging database listens on port 6543."]
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "was not compared" in m and "OSError" in m]) == 2
    assert not any("staging" in m for m in said)
