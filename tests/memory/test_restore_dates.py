"""A restored memory keeps its text as it was made absolute the day it was said (issue 33 item 4):
restoring is no new saying, so nothing in it is dated again from the restore's day."""

from __future__ import annotations

from tests.stores import StoreSpec


def test_a_restored_memory_is_not_dated_again_from_the_restore_day(make_store: StoreSpec) -> None:
    s = make_store()
    # said on a Monday: "since Monday" is left (today, or a week ago?), "tomorrow" gets its date
    mem = s.add("CI has been red since Monday; the freeze starts tomorrow.", date="2026-11-23")
    assert mem.text == "CI has been red since Monday; the freeze starts tomorrow (2026-11-24)."
    s.forget(mem.id)
    back = make_store().restore(mem.id)
    assert back.text == mem.text and back.id == mem.id
    assert [m.text for m in make_store()] == [mem.text]
