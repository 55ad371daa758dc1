"""Near-duplicates merge through the review inbox (issue 33 item 3): ``memwire dedupe --apply``
proposes one merge per cluster as an inbox item; approving it (CLI, memory API, page) archives the
others as ``#merged`` linked to the one kept, each restorable; rejecting it leaves them, and that
cluster is not proposed again. ``--apply --yes`` approves at once, for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from memwire import MemoryStore, Middleware
from memwire.cli import main
from memwire.memory import _supersede
from memwire.memory._inbox import approve, inbox_of, is_merge, merge_members, propose_merges, read_log, reject
from memwire.memory._model import Memory
from tests.memory.test_supersede import _hand_written
from tests.stores import StoreSpec

TEXTS = ["The ledger runs on PostgreSQL 15.", "The deploy script is ship.sh.", "I like dark mode.",
         "The ledger database is PostgreSQL 15.", "User prefers dark mode.", "The staging Redis port is 6380."]


def _proposed(s: Any) -> list[Memory]:
    return [item for _, item in propose_merges(s, _supersede.duplicate_clusters(s)) if item is not None]


def test_a_merge_waits_in_the_inbox_and_approving_it_merges(make_store: StoreSpec) -> None:
    s = make_store()
    mems = _hand_written(s, TEXTS)
    items = _proposed(s)
    assert len(items) == 2 and all(is_merge(i) for i in items)
    assert len(s) == 6 and len(s.archive) == 0  # nothing merged before a person says so
    ledger, twin = mems[TEXTS[0]], mems[TEXTS[3]]
    item = next(i for i in items if ledger.id in merge_members(i))
    assert merge_members(item) == [ledger.id, twin.id]
    assert TEXTS[0] in item.text and TEXTS[3] in item.text  # the reviewer sees what is kept and what goes
    assert _proposed(make_store()) == items and len(inbox_of(make_store())) == 2  # asked again: the same items
    assert [e["event"] for e in read_log(make_store())] == ["proposed", "proposed"]  # left waiting, not anew

    s = make_store()
    assert approve(s, [item.id[:8]]) == [ledger]  # the memory kept, not the item
    assert item.id not in inbox_of(s) and len(inbox_of(s)) == 1
    assert sorted(m.text for m in s) == sorted(t for t in TEXTS if t != TEXTS[3])
    [gone] = s.archive.memories()
    assert gone.text == TEXTS[3] and "merged" in gone.tags
    assert s.lifecycle.links(ledger.id) == {"merged": [twin.id]}
    assert s.lifecycle.links(twin.id) == {"merged_into": ledger.id}
    assert s.lifecycle.get(ledger).evidence >= 2  # the twin counts as saying it again
    assert [st.memory.id for st in _supersede.history(s, ledger.id)] == [twin.id, ledger.id]
    assert [e["event"] for e in read_log(s)][-2:] == ["merged", "approved"]

    back = make_store().restore(twin.id)  # nothing lost: a merged original comes back as it was
    assert back.text == TEXTS[3] and back.tags == () and back.id in make_store()
    assert twin.id not in make_store().archive


def test_rejecting_a_merge_leaves_the_memories_and_it_is_not_proposed_again(make_store: StoreSpec) -> None:
    s = make_store()
    _hand_written(s, TEXTS[2:5])
    [item] = _proposed(s)
    assert reject(s, [item.id])[0].id == item.id
    assert len(make_store()) == 3 and len(inbox_of(make_store())) == 0  # both stay
    [(cluster, again)] = propose_merges(make_store(), _supersede.duplicate_clusters(make_store()))
    assert again is None and len(cluster) == 2 and len(inbox_of(make_store())) == 0


def test_a_merge_approved_late_merges_what_is_still_there(make_store: StoreSpec) -> None:
    s = make_store()
    mems = _hand_written(s, ["I like dark mode.", "User prefers dark mode.", "I prefer dark mode."])
    [item] = _proposed(s)
    assert len(merge_members(item)) == 3
    keep = merge_members(item)[0]
    s.forget(keep)  # the one it would keep went since: the first still there is kept
    left = [m for m in mems.values() if m.id != keep]
    assert approve(make_store(), [item.id]) == [left[0]]
    assert [m.id for m in make_store()] == [left[0].id]
    assert {m.id for m in make_store().archive if "merged" in m.tags} == {left[1].id}


def test_a_merge_whose_memories_all_went_only_leaves_the_inbox(make_store: StoreSpec) -> None:
    s = make_store()
    mems = _hand_written(s, ["I like dark mode.", "User prefers dark mode."])
    [item] = _proposed(s)
    for m in mems.values():
        s.forget(m.id)
    assert approve(make_store(), [item.id]) == [item]
    assert len(make_store()) == 0 and len(inbox_of(make_store())) == 0
    assert {m.text for m in make_store().archive} == set(mems)  # forgotten, as they were; nothing merged


def test_a_fresher_proposal_replaces_a_pending_one_of_the_same_memories(tmp_path: Path) -> None:
    s = MemoryStore(tmp_path / "mem")
    _hand_written(s, ["I like dark mode.", "User prefers dark mode."])
    [first] = _proposed(s)
    s = MemoryStore(tmp_path / "mem")
    with open(s.path / "MEMORY.md", "a") as fh:
        fh.write("- I prefer dark mode.\n")
    [second] = _proposed(MemoryStore(tmp_path / "mem"))
    assert second.id != first.id and len(merge_members(second)) == 3
    assert [m.id for m in inbox_of(MemoryStore(tmp_path / "mem")).memories()] == [second.id]


def test_cli_dedupe_proposes_in_the_inbox_and_approve_merges(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    d = str(tmp_path / "m")

    def run(*args: str) -> Any:
        assert main([*args, "--dir", d, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "MEMORY.md").write_text("## Notes\n- I like dark mode.\n- User prefers dark mode.\n- Use tabs.\n"
                                              "- The ledger runs on PostgreSQL 15.\n"
                                              "- The ledger database is PostgreSQL 15.\n")
    found = run("dedupe")
    assert [(c["keep"]["text"], [m["text"] for m in c["merge"]], c["proposed"], c["applied"]) for c in found] == [
        ("I like dark mode.", ["User prefers dark mode."], None, False),
        ("The ledger runs on PostgreSQL 15.", ["The ledger database is PostgreSQL 15."], None, False)]
    assert run("inbox") == []
    proposed = run("dedupe", "--apply")
    assert [c["applied"] for c in proposed] == [False, False] and all(c["proposed"] for c in proposed)
    assert len(run("list")) == 5  # waiting for a person
    waiting = run("inbox")
    assert [m["id"] for m in waiting] == [c["proposed"] for c in proposed]
    assert main(["inbox", "approve", proposed[0]["proposed"][:8], "--dir", d]) == 0
    assert "merged its duplicates into" in capsys.readouterr().out
    assert [m["text"] for m in run("list")] == ["I like dark mode.", "Use tabs.", "The ledger runs on PostgreSQL 15.",
                                               "The ledger database is PostgreSQL 15."]
    run("inbox", "reject", proposed[1]["proposed"])
    again = run("dedupe", "--apply")
    assert [(c["keep"]["text"], c["proposed"]) for c in again] == [("The ledger runs on PostgreSQL 15.", None)]
    assert main(["dedupe", "--apply", "--dir", d]) == 0
    assert "not proposed (rejected before)" in capsys.readouterr().out
    merged = run("search", "--archive", "dark", "mode")
    assert [(m["text"], m["tags"]) for m in merged] == [("User prefers dark mode.", ["merged"])]
    run("restore", merged[0]["id"])
    assert "User prefers dark mode." in [m["text"] for m in run("list")]


def test_cli_dedupe_yes_approves_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "m")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "MEMORY.md").write_text("## Notes\n- I like dark mode.\n- User prefers dark mode.\n- Use tabs.\n")
    assert main(["dedupe", "--yes", "--dir", d]) == 2  # --yes alone does nothing it could be mistaken for
    assert "--yes goes with --apply" in capsys.readouterr().err
    assert main(["dedupe", "--apply", "--yes", "--dir", d, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["applied"] is True and row["proposed"]
    store = MemoryStore(tmp_path / "m")
    assert [m.text for m in store] == ["I like dark mode.", "Use tabs."] and len(inbox_of(store)) == 0
    assert [m.text for m in store.archive] == ["User prefers dark mode."]
    with pytest.raises(SystemExit):
        main(["dedupe", "--help"])
    assert "--yes" in capsys.readouterr().out


async def test_the_memory_api_and_the_page_approve_a_merge(tmp_path: Path) -> None:
    from starlette.applications import Starlette

    from memwire.adapters.server._memory_api import memory_api

    store = MemoryStore(tmp_path / "mem")
    mems = _hand_written(store, TEXTS)
    items = _proposed(store)
    app = Starlette(routes=[memory_api(Middleware(store=store))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as http:
        listed = (await http.get("/memwire/v1/inbox")).json()["data"]
        assert sorted(m["id"] for m in listed) == sorted(i.id for i in items)
        r = await http.post(f"/memwire/v1/inbox/{items[0].id}/approve")
        assert r.status_code == 200 and r.json()["id"] == merge_members(items[0])[0]
        r = await http.post(f"/memwire/v1/inbox/{items[1].id}/reject")
        assert r.status_code == 200
    assert len(store.memories()) == 5 and len(inbox_of(store)) == 0
    assert merge_members(items[0]) == [mems[TEXTS[0]].id, mems[TEXTS[3]].id]
    assert [m.id for m in store.archive if "merged" in m.tags] == [mems[TEXTS[3]].id]
    assert mems[TEXTS[2]].id in store and mems[TEXTS[4]].id in store  # the rejected cluster stays whole


def test_the_page_approves_a_merge_as_proposed_and_refuses_an_edit(tmp_path: Path) -> None:
    from memwire._sim.fake_provider import serve_in_thread
    from memwire.adapters.server._proxy import create_app

    store = MemoryStore(tmp_path / "mem")
    _hand_written(store, TEXTS[2:5])
    [item] = _proposed(store)
    mw = Middleware(store=store)
    with serve_in_thread(create_app(mw, openai_upstream="http://127.0.0.1:9")) as p:
        post = lambda path, **data: httpx.post(p.base_url + path, data=data, headers={"origin": p.base_url})  # noqa: E731
        assert item.text in httpx.get(p.base_url + "/memwire/ui").text.replace("&quot;", '"')
        r = post(f"/memwire/ui/inbox/{item.id}/edit", text="Merge them all into one thing")
        assert r.status_code == 400 and "as proposed" in r.text
        assert len(store.memories()) == 3 and item.id in inbox_of(store)
        assert post(f"/memwire/ui/inbox/{item.id}/approve").status_code == 303
    assert [m.text for m in store.memories()] == ["I like dark mode.", "The ledger database is PostgreSQL 15."]
    assert [m.text for m in store.archive] == ["User prefers dark mode."]
