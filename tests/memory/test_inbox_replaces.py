"""A review-mode correction of an active memory goes through the supersession protocol (issue 33):
it waits in the inbox naming the memory it replaces (a ``replaces-<id>`` tag), that memory stays
active (and injected) until a person approves, approving supersedes it in one write (archived,
linked both ways, in its history), rejecting leaves it; one forgotten meanwhile does not make the
approval fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from memwire import MemoryStore, Middleware
from memwire._errors import MemoryNotFoundError
from memwire.adapters.server._proxy import create_app
from memwire.memory._inbox import added, approve, inbox_of, read_log, reject, replaced, replaces_tag
from memwire.memory._model import Memory
from memwire.memory._supersede import history
from memwire.testing import serve_in_thread
from tests.middleware.test_corrections import PORT, middleware, talk
from tests.stores import StoreSpec

OLD, NEW = "The staging database listens on port 5433.", "The staging database listens on port 6543."


def corrected_for_review(make_store: StoreSpec) -> tuple[Memory, Memory]:
    """The port captured (approved earlier), then corrected in review mode: (the old memory, the item)."""
    store = make_store()
    talk(middleware(store, "auto"), "s1", PORT)
    [old] = [m for m in store.memories() if m.text == OLD]
    talk(middleware(store, "review"), "s1", PORT, "I meant 6543.")
    [item] = inbox_of(store).memories()
    return old, item


def test_a_correction_waits_and_the_memory_it_corrects_stays_active(make_store: StoreSpec) -> None:
    old, item = corrected_for_review(make_store)
    store = make_store()
    assert item.text == NEW and replaced(item) == old.id and replaces_tag(old.id) in item.tags
    assert [m.text for m in store.memories() if "port" in m.text] == [OLD] and len(store.archive) == 0
    assert [e["event"] for e in read_log(store)] == ["captured", "reinforced", "captured-for-review"]
    p = middleware(store).prepare([{"role": "user", "content": "Which port does staging listen on?"}])
    assert p.injection.injected and "5433" in p.injection.text  # still what the user gets until approved


def test_approving_the_correction_supersedes_linked_both_ways(make_store: StoreSpec) -> None:
    old, item = corrected_for_review(make_store)
    [new] = approve(make_store(), [item.id[:8]])
    store = make_store()
    assert [m.text for m in store.memories() if "port" in m.text] == [NEW] and len(inbox_of(store)) == 0
    assert "superseded" in store.archive.get(old.id).tags
    assert new.tags == ("fact", "captured")  # the bookkeeping tag stays in the inbox
    assert store.lifecycle.links(new.id).get("supersedes") == [old.id]
    assert store.lifecycle.links(old.id).get("superseded_by") == new.id
    assert [(st.memory.id, st.state) for st in history(store, new.id)] == [(old.id, "superseded"), (new.id, "current")]
    assert [(e["event"], e["id"], e.get("by")) for e in read_log(store)][-2:] == [
        ("superseded", old.id, new.id), ("approved", new.id, None)]


def test_rejecting_the_correction_leaves_the_memory(make_store: StoreSpec) -> None:
    old, item = corrected_for_review(make_store)
    reject(make_store(), [item.id])
    store = make_store()
    assert [m.id for m in store.memories() if "port" in m.text] == [old.id] and store.lifecycle.links(old.id) == {}
    [gone] = store.archive.memories()
    assert (gone.text, replaced(gone)) == (NEW, None) and "rejected" in gone.tags


def test_the_corrected_memory_forgotten_meanwhile_approval_still_adds(make_store: StoreSpec) -> None:
    old, item = corrected_for_review(make_store)
    make_store().forget(old.id)
    [new] = approve(make_store(), [item.id])
    store = make_store()
    assert [m.text for m in store.memories() if "port" in m.text] == [NEW] and new.tags == ("fact", "captured")
    assert store.lifecycle.links(new.id) == {} and "forgotten" in store.archive.get(old.id).tags
    assert "superseded" not in [e["event"] for e in read_log(store)]


def test_the_corrected_memory_forgotten_during_the_approval_still_adds(make_store: StoreSpec,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Forgotten between the approval's look and its write (another process): a plain add."""
    old, item = corrected_for_review(make_store)
    store = make_store()
    real = store.add

    def add(*args: Any, replaces: str | None = None, **kw: Any) -> Memory:
        if replaces is not None:
            make_store().forget(replaces)
        return real(*args, replaces=replaces, **kw)

    monkeypatch.setattr(store, "add", add)
    [new] = approve(store, [item.id])
    assert new.text == NEW and new.id in make_store() and old.id not in make_store()
    assert make_store().lifecycle.links(new.id) == {}


def test_an_item_naming_no_memory_is_added_as_it_is(make_store: StoreSpec) -> None:
    store = make_store()
    item = inbox_of(store).add("The linter is ruff", ["fact", "captured", replaces_tag("0" * 20)])
    assert added(store, item).tags == ("fact", "captured") and replaced(item) == "0" * 20


def test_an_item_replacing_a_memory_with_its_own_words_leaves_it(make_store: StoreSpec) -> None:
    store = make_store()
    mem = store.add(OLD, ["fact", "captured"])
    item = inbox_of(store).add(OLD, ["fact", "captured", replaces_tag(mem.id)])
    assert approve(store, [item.id]) == [mem]
    assert mem.id in make_store() and len(make_store().archive) == 0
    assert [e["event"] for e in read_log(store)] == ["approved"]  # nothing superseded


def test_the_page_shows_what_an_item_replaces_and_its_edit_replaces_it(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    old, item = corrected_for_review(StoreSpec("markdown", str(store.path)))
    mw = Middleware(store=store, mode="contextPerTurn", capture="review")
    with serve_in_thread(create_app(mw, openai_upstream="http://127.0.0.1:9")) as p:
        page = httpx.get(p.base_url + "/memwire/ui").text
        row = page.split('id="inbox"', 1)[1].split("</table>", 1)[0]
        assert f'replaces <a href="/memwire/ui/memories/{old.id}">{old.id[:8]}</a>' in row
        [listed] = httpx.get(p.base_url + "/memwire/v1/inbox").json()["data"]
        assert replaces_tag(old.id) in listed["tags"]
        r = httpx.post(p.base_url + f"/memwire/ui/inbox/{item.id}/edit", data={"text": "Staging listens on 6543."},
                       headers={"origin": p.base_url})
        assert r.status_code == 303
    store = MemoryStore(store.path)
    [new] = [m for m in store.memories() if "6543" in m.text]
    assert new.text == "Staging listens on 6543." and new.tags == ("fact", "captured")
    assert old.id not in store and store.lifecycle.links(new.id).get("supersedes") == [old.id]


def test_a_missing_id_is_not_found_before_anything_moves(make_store: StoreSpec) -> None:
    store = make_store()
    with pytest.raises(MemoryNotFoundError):
        approve(store, ["ffffffffff"])
