"""A restore brings back what was forgotten as it was (issue 33 items 4 and 5), on both backends:
its text (relative dates are not made absolute from the restore's day: restoring is no new
saying) and the date it was said (the archive keeps it), and a rejected merge proposal goes back
to the inbox it came from, never into the memories."""

from __future__ import annotations

from typing import Any

from memwire.memory import _supersede
from memwire.memory._inbox import approve, inbox_of, is_merge, propose_merges, reject
from memwire.memory._model import Memory
from tests.stores import StoreSpec


def _hand_written(s: Any, *mems: Memory) -> list[Memory]:
    """``mems`` written as a person would by hand: the add path would date a "tomorrow" and merge
    look-alikes."""
    if hasattr(s, "path"):
        s.path.mkdir(parents=True, exist_ok=True)
        lines = "".join(f"- {m.text}" + (f" <!-- date: {m.date} -->" if m.date else "") + "\n" for m in mems)
        (s.path / "MEMORY.md").write_text(f"# Memory\n\n## Notes\n{lines}")
    else:  # PostgreSQL: rows as an older memwire (no date rewrite, no settling) left them
        with s._writing() as w:
            w.merge(s.kind, list(mems))
    return s.memories()  # type: ignore[no-any-return]


def test_a_restored_memory_keeps_its_text_and_the_day_it_was_said(make_store: StoreSpec) -> None:
    s = make_store()
    [said] = _hand_written(s, Memory.create("The code freeze starts tomorrow.", (), False, "Notes", "2026-11-23"))
    assert (said.text, said.date) == ("The code freeze starts tomorrow.", "2026-11-23")
    s.forget(said.id)
    [kept] = make_store().archive.memories()
    assert (kept.text, kept.date) == (said.text, "2026-11-23")  # the archive keeps the day it was said
    back = make_store().restore(said.id)  # days later: "tomorrow" is not dated from today
    assert (back.id, back.text, back.date) == (said.id, "The code freeze starts tomorrow.", "2026-11-23")
    assert [(m.text, m.date) for m in make_store()] == [(said.text, "2026-11-23")]
    assert make_store().archive.memories() == []


def test_a_dateless_memory_comes_back_dateless_and_unchanged(make_store: StoreSpec) -> None:
    s = make_store()
    [said] = _hand_written(s, Memory.create("CI has been red since Monday.", (), False, "Notes"))
    s.forget(said.id)
    back = make_store().restore(said.id)
    assert (back.id, back.text, back.date) == (said.id, "CI has been red since Monday.", None)


def test_restoring_an_older_dated_value_still_goes_back_to_it(make_store: StoreSpec) -> None:
    """Its own date, before the value that replaced it, does not make it the older value of the two
    (which would keep both, in conflict): the restore is going back to it now."""
    s = make_store()
    paris = s.add("My timezone is Europe/Paris.", date="2026-11-20")
    ny = s.add("My timezone is America/New_York.", date="2026-11-25")
    assert [m.id for m in s] == [ny.id]
    back = make_store().restore(paris.id)
    assert (back.id, back.date) == (paris.id, "2026-11-20")
    assert [m.id for m in make_store()] == [paris.id] and ny.id in make_store().archive
    assert make_store().lifecycle.links(paris.id).get("supersedes") == [ny.id]


def test_a_rejected_merge_proposal_is_restored_to_the_inbox(make_store: StoreSpec) -> None:
    s = make_store()
    _hand_written(s, *(Memory.create(t, (), False, "Notes") for t in ("I like dark mode.", "User prefers dark mode.")))
    [(cluster, item)] = propose_merges(s, _supersede.duplicate_clusters(s))
    assert item is not None and is_merge(item)
    reject(s, [item.id])
    assert [m.id for m in s.archive.memories()] == [item.id]

    back = make_store().restore(item.id)  # not a memory: back where it waits for review
    assert back.id == item.id and is_merge(back) and back.text == item.text
    assert sorted(m.text for m in make_store()) == sorted(m.text for m in cluster)  # no proposal among them
    assert [m.id for m in inbox_of(make_store()).memories()] == [item.id]
    assert make_store().archive.memories() == []
    s = make_store()
    assert approve(s, [item.id]) == [cluster[0]]  # approved now: the merge is carried out
    assert [m.id for m in s] == [cluster[0].id]
