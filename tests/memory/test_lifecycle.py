"""Lifecycle: the stability score on worked examples, states over simulated time, the sidecar
(batched, merged across processes, surviving hand edits), archive and restore, the ranking prior,
sweeps and caps. What does not look at files runs on both stores (``make_store``)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memwire import MemoryStore
from memwire.memory._lifecycle import META_NAME, Lifecycle, Meta, Scoring, category_of
from memwire.memory._model import Memory, memory_id
from memwire.memory._upkeep import stale, stats, sweep
from tests.stores import StoreSpec

DAY = 86_400.0
T0 = 1_790_000_000.0  # 2026-09-21


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def days(self, n: float) -> None:
        self.now += n * DAY


@pytest.fixture
def clock() -> Clock:
    return Clock()


def store_at(path: Path, clock: Clock, **kw: object) -> MemoryStore:
    s = MemoryStore(path, **kw)  # type: ignore[arg-type]
    s._lifecycle = Lifecycle(path, scoring=s.scoring, clock=clock)
    return s


def open_at(make_store: StoreSpec, clock: Clock, **kw: object) -> MemoryStore:
    """A store of either backend whose metadata runs on ``clock``."""
    s = make_store(**kw)
    s.lifecycle.clock = clock
    return s  # type: ignore[no-any-return]


# ---------------------------------------------------------------- the formula


def test_stability_on_worked_examples() -> None:
    sc = Scoring()
    fact = Memory.create("The staging database listens on port 5433", ("fact",))
    assert sc.stability(fact, Meta(T0, T0, 1, "explicit"), T0) == pytest.approx(3.0 * math.log(2))
    # a captured fact 90 days (its half-life) after it was last reinforced: half of 2.5 × ln 2
    assert sc.stability(fact, Meta(T0, T0, 1, "captured"), T0 + 90 * DAY) == pytest.approx(0.5 * 2.5 * math.log(2))
    # evidence 3, a decision (half-life 60) after 120 days: a quarter
    decision = Memory.create("We use Postgres 16", ("decision",))
    assert sc.stability(decision, Meta(T0, T0, 3, "distilled"), T0 + 120 * DAY) == pytest.approx(
        1.5 * 0.25 * math.log(4))
    pinned = Memory.create("Never push to main", ("instruction",), pinned=True)
    assert sc.stability(pinned, Meta(T0, T0, 1, "captured"), T0 + 3650 * DAY) == pytest.approx(2.5 * math.log(2))
    assert sc.stability(fact, Meta(T0, T0, 9, "explicit", forgotten=T0), T0) == 0.0


def test_states_and_thresholds() -> None:
    sc = Scoring()
    assert [sc.state(x) for x in (2.0, 1.5, 1.0, 0.7, 0.5, 0.4, 0.39, 0.0)] == [
        "active", "active", "provisional", "provisional", "candidate", "candidate", "dropped", "dropped"]


def test_categories_come_from_tags_with_fact_as_default() -> None:
    assert category_of(Memory.create("x", ("infra", "preferences"))) == "preference"
    assert category_of(Memory.create("x", ("lesson", "decision"))) == "lesson"  # the first tag that names one
    assert category_of(Memory.create("x", ("done",))) == "completion"
    assert category_of(Memory.create("x", ("infra",))) == "fact"


def test_weights_are_configurable_and_checked() -> None:
    sc = Scoring(half_lives={"fact": 10}, cue_weights={"captured": 1.0})
    fact = Memory.create("x")
    assert sc.stability(fact, Meta(T0, T0, 1, "captured"), T0 + 10 * DAY) == pytest.approx(0.5 * math.log(2))
    assert sc.half_lives["decision"] == 60.0  # the rest keep their defaults
    with pytest.raises(ValueError, match="half_lives: unknown key"):
        Scoring(half_lives={"facts": 10})
    with pytest.raises(ValueError, match="cue_weights: captured must be a positive number"):
        Scoring(cue_weights={"captured": 0})
    with pytest.raises(ValueError, match="rank_prior"):
        Scoring(rank_prior=2)


# ---------------------------------------------------------------- over time


def test_a_captured_fact_fades_through_the_states(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    mem = s.add("The staging database listens on port 5433", ["fact"], cue="captured")
    seen = []
    for day in (0, 30, 90, 120, 200):
        clock.now = T0 + day * DAY
        seen.append(s.lifecycle.state(mem))
    assert seen == ["active", "provisional", "provisional", "candidate", "dropped"]


def test_reinforcement_restarts_the_decay_and_adds_evidence(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    mem = s.add("The staging database listens on port 5433", cue="captured")
    clock.days(100)
    before = s.lifecycle.score(mem)
    s.lifecycle.reinforce([mem.id], used=True)
    after = s.lifecycle.get(mem)
    assert after.evidence == 2 and after.uses == 1 and after.reinforced == clock.now
    assert s.lifecycle.score(mem) == pytest.approx(2.5 * math.log(3))
    assert s.lifecycle.score(mem) > before
    # saying it again (adding the same text) reinforces too
    s.add("the staging database listens on port 5433")
    assert s.lifecycle.get(mem).evidence == 3


def test_a_person_written_memory_never_seen_counts_from_its_date(tmp_path: Path, clock: Clock) -> None:
    (tmp_path / "MEMORY.md").write_text("## Notes\n- Tabs, not spaces <!-- date: 2026-06-23 -->\n- Deploy on Tuesdays\n")
    s = store_at(tmp_path, clock)
    dated, undated = sorted(s.memories(), key=lambda m: m.text)[::-1]
    assert s.lifecycle.get(dated).created == datetime(2026, 6, 23, tzinfo=timezone.utc).timestamp()
    assert not s.lifecycle.get(undated).recorded and s.lifecycle.get(undated).cue == "explicit"
    assert not (tmp_path / META_NAME).exists()  # reading records nothing


# ---------------------------------------------------------------- the sidecar


def test_metadata_is_saved_beside_the_markdown_not_in_it(tmp_path: Path, clock: Clock) -> None:
    s = store_at(tmp_path, clock)
    mem = s.add("Prefers pytest over unittest", ["preference"], cue="captured")
    s.lifecycle.injected([mem.id])
    s.lifecycle.flush()
    data = json.loads((tmp_path / META_NAME).read_text())["memories"][mem.id]
    assert data == {"created": "2026-09-21T14:13:20Z", "reinforced": "2026-09-21T14:13:20Z", "evidence": 1,
                    "cue": "captured", "uses": 0, "injected": 1}
    assert "captured" not in (tmp_path / "MEMORY.md").read_text().split("Prefers")[0]
    again = store_at(tmp_path, clock)
    assert again.lifecycle.get(mem) == s.lifecycle.get(mem)


def test_metadata_does_not_make_a_removed_directory_again(tmp_path: Path, clock: Clock) -> None:
    import shutil

    d = tmp_path / "mem"
    s = store_at(d, clock)
    mem = s.add("Prefers pytest over unittest")
    s.lifecycle.flush()
    s.lifecycle.injected([mem.id])  # a change pending as the directory goes (memwire demo's temporary one)
    shutil.rmtree(d)
    s.lifecycle.flush()
    assert not d.exists()


def test_two_processes_add_up_their_counts(make_store: StoreSpec, clock: Clock) -> None:
    a = open_at(make_store, clock)
    mem = a.add("Prefers pytest over unittest")
    a.lifecycle.flush()
    b = open_at(make_store, clock)
    a.lifecycle.injected([mem.id])
    b.lifecycle.injected([mem.id])
    b.lifecycle.reinforce([mem.id], used=True)
    a.lifecycle.reinforce([mem.id], used=True)
    b.lifecycle.flush()
    a.lifecycle.flush()
    meta = open_at(make_store, clock).lifecycle.get(mem)
    assert (meta.injected, meta.uses, meta.evidence) == (2, 2, 3)


def test_a_hand_edit_that_keeps_the_words_keeps_the_history(tmp_path: Path, clock: Clock) -> None:
    s = store_at(tmp_path, clock)
    mem = s.add("Prefers pytest over unittest", ["testing"], cue="captured")
    s.lifecycle.reinforce([mem.id])
    s.lifecycle.flush()
    path = tmp_path / "MEMORY.md"
    path.write_text(path.read_text().replace("#testing", "#testing #preference") + "\n## Other\n")
    edited = s.get(mem.id)
    assert edited.tags == ("testing", "preference")
    assert s.lifecycle.get(edited).evidence == 2 and s.lifecycle.get(edited).cue == "captured"
    path.write_text(path.read_text().replace("Prefers pytest", "Prefers plain pytest"))
    reworded = next(m for m in s.memories() if "plain" in m.text)
    assert not s.lifecycle.get(reworded).recorded  # other words: another memory


def test_a_damaged_sidecar_is_kept_aside_and_metadata_starts_over(tmp_path: Path, clock: Clock) -> None:
    s = store_at(tmp_path, clock)
    mem = s.add("Prefers pytest over unittest")
    (tmp_path / META_NAME).write_text("{not json")
    fresh = store_at(tmp_path, clock)
    assert not fresh.lifecycle.get(mem).recorded
    assert (tmp_path / (META_NAME + ".damaged")).read_text() == "{not json"


# ---------------------------------------------------------------- archive and restore


def test_forget_moves_to_the_archive_and_restore_brings_it_back(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    mem = s.add("Deploys go out on Tuesdays", ["process"], cue="captured")
    s.forget(mem.id)
    assert mem.id not in s and s.lifecycle.score(mem) == 0.0
    archived = s.archive.get(mem.id)
    assert archived.tags == ("process", "forgotten")
    assert s.archive.search("deploys tuesdays")[0].memory.id == mem.id
    back = s.restore(mem.id[:8])
    assert back.tags == ("process",) and mem.id in s and mem.id not in s.archive
    meta = s.lifecycle.get(back)
    assert meta.forgotten is None and meta.cue == "captured" and meta.evidence == 2


def test_forget_without_a_reason_deletes_outright(make_store: StoreSpec) -> None:
    s = make_store()
    mem = s.add("Scratch note")
    s.forget(mem.id, reason=None)
    assert mem.id not in s and len(s.archive) == 0
    with pytest.raises(ValueError, match="reason must be one of"):
        s.forget(s.add("x").id, reason="bored")


# ---------------------------------------------------------------- ranking


def test_the_prior_orders_equally_relevant_memories_by_strength(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    # two databases (one database's new version would supersede its old one: memory/_supersede)
    weak = s.add("The staging orders database runs Postgres 15", cue="distilled")
    strong = s.add("The staging billing database runs Postgres 16", cue="captured")
    clock.days(60)
    s.lifecycle.reinforce([strong.id], used=True)
    s.lifecycle.flush()  # the prior reads the metadata as saved (tests/memory/test_lifecycle_shared.py)
    assert [h.memory.id for h in s.search("staging database postgres", k=2)] == [strong.id, weak.id]
    s.lifecycle.reinforce([weak.id] * 5, used=True)
    s.lifecycle.flush()
    assert [h.memory.id for h in s.search("staging database postgres", k=2)] == [weak.id, strong.id]
    off = open_at(make_store, clock, scoring=Scoring(rank_prior=0))
    assert {h.score for h in off.search("staging database postgres", k=2)} == {
        h.score for h in make_store(scoring=Scoring(rank_prior=0)).search("staging database postgres", k=2)}
    assert [h.memory.id for h in open_at(make_store, clock).search("staging database postgres", k=2)] == [
        weak.id, strong.id]  # the metadata as saved ranks the same in another process


def test_priors_read_from_ids_and_kinds_are_the_memories_stability_priors(tmp_path: Path, clock: Clock) -> None:
    # a search ranks its hits from (tags, pinned, topic, date) without building them: the factors
    # must be those of the memories' own stability, for every kind of metadata
    s = store_at(tmp_path, clock)
    mems = [s.add("A fact from long ago", date="2025-01-02"), s.add("A lesson", tags=["lessons"], cue="captured"),
            s.add("A pinned rule", tags=["rule"], pinned=True, cue="distilled"), s.add("Forgotten soon")]
    s.lifecycle.flush()
    (tmp_path / "MEMORY.md").write_text((tmp_path / "MEMORY.md").read_text() + "- Written by hand <!-- date: 2026-03-01 -->\n")
    mems.append(next(m for m in s.memories() if m.text == "Written by hand"))  # nobody recorded it
    clock.days(40)
    s.lifecycle.reinforce([mems[1].id], used=True)
    s.lifecycle.forgotten([mems[3].id])
    s.lifecycle.flush()  # the prior reads the metadata as saved
    clock.days(3)
    lc, sc = s.lifecycle, s.lifecycle.scoring
    expected = [sc.prior(sc.stability(m, meta, clock.now)) for m, meta in zip(mems, lc.get_many(mems))]
    assert lc.priors([m.id for m in mems], [(m.tags, m.pinned, m.topic, m.date) for m in mems]) == expected
    assert len(set(expected)) == len(expected)


def test_the_prior_never_makes_an_irrelevant_memory_relevant(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    mem = s.add("Lunch is at noon")
    s.lifecycle.reinforce([mem.id] * 50, used=True)
    assert s.search("staging database port") == []


# ---------------------------------------------------------------- sweeps and caps


def test_a_sweep_archives_what_decayed_but_never_a_persons_own(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    captured = s.add("The standup moved to 9:30", cue="captured")
    mine = s.add("Deploys go out on Tuesdays")
    pinned = s.add("Never force-push to main", pinned=True, cue="captured")
    clock.days(2000)
    assert {m.memory.id: why for m, why in stale(s)} == {captured.id: "decayed", mine.id: "kept"}
    moved = sweep(s)
    assert [(m.id, why) for m, why in moved] == [(captured.id, "decayed")]
    assert {m.id for m in s.memories()} == {mine.id, pinned.id}
    assert "decayed" in s.archive.get(captured.id).tags


def test_a_category_over_its_cap_archives_its_weakest(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock, scoring=Scoring(caps={"completion": 2}))
    old = s.add("Shipped the login page", ["done"], cue="captured")
    clock.days(5)
    mid = s.add("Shipped the search page", ["done"], cue="captured")
    clock.days(2)
    new = s.add("Shipped the billing page", ["done"], cue="captured")
    mine = s.add("Shipped the admin page", ["done"])  # counts, never moves
    moved = sweep(s)
    assert [(m.id, why) for m, why in moved] == [(old.id, "capped"), (mid.id, "capped")]
    assert {m.id for m in s.memories()} == {new.id, mine.id}
    rows = {r.category: r for r in stats(s)}
    assert rows["completion"].count == 2 and rows["completion"].capacity == 1.0


def test_stats_count_states_injections_and_uses(make_store: StoreSpec, clock: Clock) -> None:
    s = open_at(make_store, clock)
    a = s.add("Prefers tabs", ["preference"])
    b = s.add("Prefers dark mode", ["preference"], cue="distilled")
    s.add("Port 5433 for staging")
    s.lifecycle.injected([a.id, b.id, a.id])
    s.lifecycle.reinforce([a.id], used=True)
    rows = {r.category: r for r in stats(s)}
    pref = rows["preference"]
    assert pref.states == {"active": 1, "provisional": 1, "candidate": 0, "dropped": 0}
    assert (pref.injected, pref.used, pref.usage_rate) == (3, 1, 1 / 3)
    assert rows["fact"].count == 1 and set(rows) == {"preference", "fact"}


def test_the_middleware_sweeps_in_the_background(tmp_path: Path) -> None:
    from memwire import Middleware

    s = MemoryStore(tmp_path)
    old = s.add("The standup moved to 9:30", date="2020-01-02", cue="captured")
    mine = s.add("Release notes live in docs/releases", date="2020-01-02")
    mw = Middleware(store=s, mode="contextPerTurn", capture="auto")
    mw.prepare([{"role": "user", "content": "Remember that the staging database listens on port 5433."}])
    mw.flush()
    assert old.id not in s and "decayed" in s.archive.get(old.id).tags
    assert mine.id in s and any("5433" in m.text for m in s.memories())


def test_merges_are_linked_both_ways_and_add_to_earlier_ones(make_store: StoreSpec, clock: Clock) -> None:
    """One rule for ``dedupe``, the memory tool and import (``Lifecycle.link_merges``): the kept
    memory lists every memory merged into it, each once, the earlier ones first; each merged
    memory points at the one kept, unless it never was a memory (an import's text)."""
    s = open_at(make_store, clock)
    keep, other, a, b, c, d = (s.add(f"Memory number {i}").id for i in range(6))
    lc = s.lifecycle
    lc.link_merges([(a, keep), (b, keep)])
    lc.link_merges([(b, keep), (c, keep), (d, other)])
    assert lc.links(keep) == {"merged": [a, b, c]} and lc.links(other) == {"merged": [d]}
    assert [lc.links(m) for m in (a, b, c, d)] == [{"merged_into": keep}] * 3 + [{"merged_into": other}]
    text = memory_id("an imported text said again")
    lc.link_merges([(text, keep)], back=False)
    assert lc.links(keep)["merged"] == [a, b, c, text] and lc.links(text) == {}
    assert open_at(make_store, clock).lifecycle.links(keep)["merged"] == [a, b, c, text]  # saved
