"""Processes sharing one store rank alike (issue 34 item 9): the stability prior depends only on the
metadata as saved, and saving it does not depend on which process got there first.

Each ``make_store()`` is the store as another process sees it (its own metadata and unsaved
changes). The failure this guards: ``memwire proxy --workers 2`` gave a turn another block than
one process would, because a memory another process's sweep had recorded (``seen``) was counted
again when its adder saved (evidence 2, a higher prior), which reordered it among memories of equal
relevance; and each process ranked by its own unsaved counts.
"""

from __future__ import annotations

from memwire.memory._lifecycle import SAVE_INTERVAL_S
from memwire.memory._upkeep import sweep
from tests.stores import StoreSpec

# equally relevant to QUERY (the same words, one number each): only the prior, then the id, orders them
NOTES = [f"Staging database and test suite and migrations and deploys: note {i}" for i in (1, 3, 5)]
QUERY = "And how do deploys work?"


def ranked(store: object) -> list[str]:
    return [h.memory.id for h in store.search(QUERY, k=5)]  # type: ignore[attr-defined]


def test_a_memory_recorded_first_by_another_processs_sweep_counts_once(make_store: StoreSpec) -> None:
    adder, worker = make_store(), make_store()
    mem = adder.add(NOTES[0])  # its record waits for the adder's next save
    sweep(worker)  # the worker's upkeep sees it first: a record of its own, saved at once
    adder.lifecycle.flush()
    assert make_store().lifecycle.get(mem).evidence == 1  # not 2: its existence is counted once


def test_two_processes_first_seeing_a_memory_count_it_once(make_store: StoreSpec) -> None:
    make_store().add(NOTES[0]).id  # noqa: B018 - written; its adder's record is never saved here
    a, b = make_store(), make_store()
    a.lifecycle.seen(a.memories())
    b.lifecycle.seen(b.memories())
    a.lifecycle.flush()
    b.lifecycle.flush()
    (meta,) = make_store().lifecycle.get_many(make_store().memories())
    assert meta.evidence == 1 and meta.recorded


def test_what_is_said_again_still_adds_evidence(make_store: StoreSpec) -> None:
    a, b = make_store(), make_store()
    mem = a.add(NOTES[0])
    a.add(NOTES[0])  # said twice before a save: 2
    sweep(b)
    a.lifecycle.flush()
    assert make_store().lifecycle.get(mem).evidence == 2
    c = make_store()
    c.add(NOTES[0])  # said again in a process that knows the record: 3
    c.lifecycle.flush()
    assert make_store().lifecycle.get(mem).evidence == 3


def test_equally_relevant_memories_rank_alike_whichever_process_recorded_them_first(make_store: StoreSpec) -> None:
    """The proxy test's sequence: a note is added, a worker's sweep records it, more notes are
    added, then the adders save; the notes tie, so they rank by id as in a store nobody swept."""
    adders = []
    for i, text in enumerate(NOTES):
        adder = make_store()
        adder.add(text)
        adders.append(adder)
        if i == 0:
            sweep(make_store())
    for adder in adders:
        adder.lifecycle.flush()
    expected = sorted(m.id for m in make_store().memories())
    assert ranked(make_store()) == expected


def test_every_process_ranks_by_what_is_saved(make_store: StoreSpec) -> None:
    """Unsaved counts of one process do not reorder its searches (another process cannot see them);
    once saved, every process ranks by them at once, not a second later."""
    writer = make_store()
    mems = [writer.add(text) for text in NOTES]
    writer.lifecycle.flush()
    a, b = make_store(), make_store()
    by_id = ranked(b)
    assert by_id == sorted(m.id for m in mems)
    last = by_id[-1]
    a.lifecycle.reinforce([last] * 5, used=True)  # unsaved: a used it
    assert ranked(a) == ranked(b) == by_id
    assert a.lifecycle.get(next(m for m in mems if m.id == last)).evidence == 6  # its own figures see it
    a.lifecycle.flush()
    assert ranked(b) == ranked(a) == [last, *by_id[:-1]]  # b looked less than a second ago: looks again
    assert SAVE_INTERVAL_S <= 5.0  # how long a count waits to rank at most (besides a save at exit)


def test_a_first_record_kept_after_a_failed_save_still_counts_what_was_said_again(make_store: StoreSpec) -> None:
    s = make_store()
    mem = s.add(NOTES[0])
    s.add(NOTES[0])  # said twice: evidence 2 once saved
    lc, save = s.lifecycle, s.lifecycle._save

    def failing(delta: object) -> object:
        lc.injected([mem.id])  # a change made while the save runs: merged with what is kept
        raise OSError("disk full")

    lc._save = failing
    try:
        lc.flush()
    except OSError:
        pass
    lc._save = save
    lc.flush()
    meta = make_store().lifecycle.get(mem)
    assert (meta.evidence, meta.injected) == (2, 1)
