"""Processes sharing one store rank alike (issue 34 item 9): the stability prior depends only on the
metadata as saved, and what is saved does not depend on which process saved first.

Each ``make_store()`` is the store as another process sees it (its own metadata and unsaved
changes). The failure this guards: ``memwire proxy --workers 2`` gave a turn another block than
one process would. A worker's sweep recorded a memory the test had just added (``seen``: evidence
1) before the adder saved its own record (evidence 1 more): evidence 2, a higher prior, and the
memory moved ahead of memories of equal relevance that no sweep had seen.
"""

from __future__ import annotations

import time

from memwire.memory._upkeep import sweep
from tests.stores import StoreSpec

# equally relevant to QUERY (the same words, one number each): only the prior, then the id, orders them
NOTES = [f"Staging database and test suite and migrations and deploys: note {i}" for i in (1, 3, 5)]
QUERY = "And how do deploys work?"


def ranked(store: object) -> list[str]:
    return [h.memory.id for h in store.search(QUERY, k=5)]  # type: ignore[attr-defined]


def test_a_memory_another_processs_sweep_recorded_first_counts_what_was_said(make_store: StoreSpec) -> None:
    adder = make_store()
    mem = adder.add(NOTES[0])  # its record waits for the adder's next save
    workers = [make_store(), make_store()]
    for w in workers:  # two workers' upkeep at once (``sweep``): each records it as first seen now...
        w.lifecycle.seen(w.memories())
    for w in workers:  # ...and saves before the adder does
        w.lifecycle.flush()
    adder.lifecycle.flush()
    assert make_store().lifecycle.get(mem).evidence == 1  # said once: not 2 or 3


def test_a_record_an_injection_made_first_counts_no_saying(make_store: StoreSpec) -> None:
    adder, worker = make_store(), make_store()
    mem = adder.add(NOTES[0])
    worker.memories()
    worker.lifecycle.injected([mem.id])  # telemetry: the worker's reply carried it
    worker.lifecycle.flush()
    adder.lifecycle.flush()
    meta = make_store().lifecycle.get(mem)
    assert (meta.evidence, meta.injected) == (1, 1)


def test_what_each_process_says_still_adds_up_in_either_order(make_store: StoreSpec) -> None:
    for adder_first in (True, False):
        a = make_store()
        mem = a.add(NOTES[int(adder_first)])
        b = make_store()
        b.add(mem.text)  # said again in another process (it finds the line: a reinforcement)
        sweep(make_store())
        first, second = (a, b) if adder_first else (b, a)
        first.lifecycle.flush()
        second.lifecycle.flush()
        assert make_store().lifecycle.get(mem).evidence == 2


def test_equally_relevant_memories_rank_alike_whichever_process_recorded_them_first(make_store: StoreSpec) -> None:
    """The proxy test's sequence: a note is added, a worker's sweep records it, more notes are
    added, then the adders save: the notes tie, so they rank by id, as in a store nobody swept."""
    adders = []
    for i, text in enumerate(NOTES):
        adder = make_store()
        adder.add(text)
        adders.append(adder)
        if i == 0:
            sweep(make_store())
    for adder in adders:
        adder.lifecycle.flush()
    assert ranked(make_store()) == sorted(m.id for m in make_store().memories())


def test_every_process_ranks_by_what_is_saved(make_store: StoreSpec) -> None:
    """Unsaved counts of one process do not reorder its searches (another process cannot see them);
    once saved, every process ranks by them (a markdown store's at once, not a second later)."""
    writer = make_store()
    mems = {m.id: m for m in (writer.add(text) for text in NOTES)}
    writer.lifecycle.flush()
    a, b = make_store(), make_store()
    by_id = ranked(b)
    assert by_id == sorted(mems)
    last = by_id[-1]
    a.lifecycle.reinforce([last] * 5, used=True)  # unsaved: a's reply used it
    assert ranked(a) == ranked(b) == by_id
    assert a.lifecycle.get(mems[last]).evidence == 6  # its own figures see it at once
    a.lifecycle.flush()
    assert ranked(a) == [last, *by_id[:-1]]
    if make_store.backend == "postgres":  # another replica learns of it by a notification
        deadline = time.monotonic() + 10  # a hang guard, not a timing
        while ranked(b) != ranked(a) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert ranked(b) == ranked(a)  # markdown: b looked less than a second ago, and looks again
