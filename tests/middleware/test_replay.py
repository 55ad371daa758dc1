"""history="replay": earlier turns' blocks are re-inserted byte-identical, so the prompt only grows."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from memwire import MemoryStore, Middleware
from memwire.policies.modes._ledger import flush
from memwire.policies.modes._render import OPEN

from .conftest import MEMORIES
from .test_properties import ITEMS, apis, build, conversation, fixed_parts

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def is_block(item: Any) -> bool:
    c = item.get("content") if isinstance(item, dict) else None
    if isinstance(c, list) and c and isinstance(c[0], dict):
        c = c[0].get("text")
    return isinstance(c, str) and c.startswith(OPEN)


def make_store(path: Path) -> MemoryStore:
    s = MemoryStore(path)
    s.add_many([t for t, _ in MEMORIES])
    return s


@pytest.mark.parametrize("profile", [False, True])
@SETTINGS
@given(spec=conversation, api=apis)
def test_every_request_extends_the_previous_one(tmp_path_factory: Any, spec: Any, api: str, profile: bool) -> None:
    store = make_store(tmp_path_factory.mktemp("replay"))
    # a profile smaller than the store, so that turns still retrieve memories of their own
    mw = Middleware(store=store, mode="contextPerTurn", history="replay", profile=profile, startup_max_tokens=150)
    previous: list[Any] | None = None
    for body in build(spec, api):
        original = copy.deepcopy(body)
        p = mw.prepare_request(body, api=api, session_id="s")
        assert body == original
        assert fixed_parts(p.body, api) == fixed_parts(body, api)
        items = p.body[ITEMS[api]]
        caller_items = [m for m in items if not is_block(m)]
        assert caller_items == body[ITEMS[api]]  # only whole blocks were added
        if p.injection is not None:
            assert bool(p.injection.profile_ids) == profile
        if previous is not None and not (p.injection and p.injection.compacted):
            assert items[: len(previous)] == previous, "the prompt must be an append-only log"
        previous = items


def chat(*texts: str) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i, t in enumerate(texts):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": t})
    return msgs


TURNS = ["How do I run the tests?", "Use make test.", "Which database does staging use?", "Postgres 15.",
         "How do I create a migration?", "Use alembic.", "And how do deploys work?"]


def run_session(mw: Middleware, upto: int) -> list[Any]:
    out = None
    for n in range(1, upto + 1, 2):
        out = mw.prepare(chat(*TURNS[:n]), session_id="sess").messages
    assert out is not None
    return out


def test_blocks_replayed_in_place_and_only_new_memories_injected(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    mw = Middleware(store=store, history="replay")
    first = mw.prepare(chat(*TURNS[:1]), session_id="sess")
    second = mw.prepare(chat(*TURNS[:3]), session_id="sess")
    assert second.messages[: len(first.messages)] == first.messages
    assert second.injection.replayed == 1
    assert not set(first.injection.memory_ids) & set(second.injection.memory_ids)  # new memories only
    assert sum(is_block(m) for m in second.messages) == 2
    # the reported position is where this turn's block is, counting the replayed block before it
    at = second.injection.position
    assert is_block(second.messages[at]) and second.messages[at + 1] == second.messages[-1]
    assert second.messages[at]["content"] == second.injection.text


def test_restart_continues_the_ledger_with_identical_bytes(tmp_path: Path) -> None:
    store_dir = tmp_path / "mem"
    make_store(store_dir)
    a = run_session(Middleware(store=MemoryStore(store_dir), history="replay"), 5)
    assert [p.suffix for p in (store_dir / ".ledger").iterdir() if p.name != ".pruned"] == [".jsonl"]
    # a new process: new Middleware, new store object, same directory
    b = Middleware(store=MemoryStore(store_dir), history="replay").prepare(chat(*TURNS[:7]), session_id="sess").messages
    assert b[: len(a)] == a


def test_edited_history_never_shifts_a_block_onto_another_message(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), history="replay")
    full = run_session(mw, 7)
    blocks_before = {json.dumps(full[i + 1]): full[i]["content"] for i, m in enumerate(full) if is_block(m)}
    # the caller drops the second exchange and edits the first user message
    edited = chat("How do I run the tests quickly?", "Use make test.", "How do I create a migration?",
                  "Use alembic.", "And how do deploys work?")
    out = mw.prepare(edited, session_id="sess").messages
    for i, m in enumerate(out):
        if is_block(m):
            following = json.dumps(out[i + 1])
            if following in blocks_before and i + 1 < len(out) - 1:
                assert blocks_before[following] == m["content"]  # the same block before the same message
    assert not is_block(out[1])  # the edited message lost its block: it was for another text


def test_compaction_is_reported_once_then_stable(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), history="replay", replay_max_tokens=200, top_k=3)
    reports = []
    previous = None
    for n in range(1, 8, 2):
        p = mw.prepare(chat(*TURNS[:n]), session_id="cap")
        if previous is not None and not (p.injection and p.injection.compacted):
            assert p.messages[: len(previous)] == previous
        reports.append(p.injection.compacted)
        previous = p.messages
        blocks = [m for m in p.messages[:-2] if is_block(m)]
        total = sum(len(m["content"]) for m in blocks)
        assert total < 200 * 8  # bounded
    assert reports.count(True) == 1 and reports[-1] is False  # one compaction, reported on its request only
    again = mw.prepare(chat(*TURNS[:7]), session_id="cap")  # the same request again: stable, not re-reported
    assert again.messages == previous and not again.injection.compacted


def test_forgotten_memory_never_reaches_the_model_again(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    mw = Middleware(store=store, history="replay")
    first = mw.prepare(chat(*TURNS[:1]), session_id="f")
    victim = first.injection.memory_ids[0]
    text = store.get(victim).text
    store.forget(victim)
    later = mw.prepare(chat(*TURNS[:3]), session_id="f")
    assert later.injection.compacted
    assert not any(text.replace("<", "&lt;") in json.dumps(m) for m in later.messages)


def test_closer_turn_keeps_replayed_blocks(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), history="replay")
    first = mw.prepare(chat("How do I run the tests?"), session_id="c").messages
    closer = mw.prepare(chat("How do I run the tests?", "make test", "thanks!"), session_id="c")
    assert closer.messages[: len(first)] == first and closer.injection.skipped == "gate"
    again = mw.prepare(chat("How do I run the tests?", "make test", "thanks!"), session_id="c")
    assert again.injection.reused and again.injection.skipped == "gate" and again.messages == closer.messages


@pytest.mark.parametrize("content", [
    "[]\n", "null\n", "42\n", '"text"\n', "{not json\n", "",
    '{"version": 3, "session": "s"}\n[1, 2]\n', '{"version": 3, "session": "s"}\n{"ids": 5}\n',
    '{"version": 3, "session": "s"}\n{"key": "k", "tokens": "many"}\n', "\x00\xff binary",
])
def test_a_corrupted_ledger_of_any_shape_is_rebuilt_not_trusted(tmp_path: Path, content: str) -> None:
    from memwire.policies.modes._ledger import Ledger

    store = make_store(tmp_path / "mem")
    path = Ledger.load(store.path, "s").path
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8", errors="surrogateescape")
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    first = mw.prepare(chat("How do I run the test suite?"), session_id="s")
    assert first.injection.injected and first.injection.skipped is None
    flush()
    again = Middleware(store=store, mode="contextPerTurn", history="replay")  # a restart reads the rebuilt file
    second = again.prepare(chat("How do I run the test suite?", "Use make test.", "And the staging port?"), session_id="s")
    assert second.injection.replayed == 1 and second.messages[1] == first.messages[1]


def test_a_stateful_responses_call_keeps_no_ledger(tmp_path: Path) -> None:
    # the provider keeps the history and the blocks sent with it: there is nothing to replay
    mw = Middleware(store=make_store(tmp_path / "mem"), mode="contextPerTurn", history="replay")
    mw.warm_up()
    for i, text in enumerate(["How do I run the tests?", "And the deploys?"]):
        body = {"model": "gpt-4o", "previous_response_id": f"resp_{i}", "input": text}
        p = mw.prepare_request(body, api="openai.responses", session_id="stateful")
        assert p.injection.injected and p.injection.replayed == 0
    mw.flush()
    assert mw.mode_for().replay.ledgers.get(("", "stateful")) is None
    assert not (tmp_path / "mem" / ".ledger").exists()


# ------------------------------------------------------------------ several processes, one directory
# Two Middleware objects over one directory, each with its own MemoryStore, are two proxy workers:
# nothing is shared between them but the files.

MODES = [("contextPerTurn", "replay", False), ("contextPerTurn", "replay", True), ("contextPerTurn", "drop", False),
         ("contextPerTurn", "drop", True), ("startup", "replay", False), ("systemPromptPerTurn", "drop", False)]


def worker(path: Path, mode: str, history: str, profile: bool) -> Middleware:
    return Middleware(store=MemoryStore(path), mode=mode, history=history, profile=profile, startup_max_tokens=150,
                      shared_memos=True)


@pytest.mark.parametrize(("mode", "history", "profile"), MODES)
def test_a_conversation_alternating_between_workers_gets_the_bytes_of_one(
        tmp_path: Path, mode: str, history: str, profile: bool) -> None:
    import shutil

    make_store(tmp_path / "one")
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    single = worker(tmp_path / "one", mode, history, profile)
    a, b = worker(tmp_path / "two", mode, history, profile), worker(tmp_path / "two", mode, history, profile)
    # who serves each turn's requests: a turn's tool-loop retry on the other worker, and new turns
    # on a worker that has not seen the previous one
    schedule = [(a, b), (a,), (b,), (a, b)]
    previous: list[Any] | None = None
    for turn, workers in zip(range(1, len(TURNS) + 1, 2), schedule):
        msgs = chat(*TURNS[:turn])
        alone = single.prepare(msgs, session_id="s").messages
        for w in workers:
            served = w.prepare(msgs, session_id="s").messages
            assert served == alone
        if previous is not None and mode == "contextPerTurn" and history == "replay":
            assert served[: len(previous)] == previous, "every request a prefix-extension of the previous one"
        previous = served


@pytest.mark.parametrize(("mode", "history", "profile"), MODES)
def test_a_turn_keeps_its_block_on_another_worker_when_the_store_changed(
        tmp_path: Path, mode: str, history: str, profile: bool) -> None:
    make_store(tmp_path)
    a, b = worker(tmp_path, mode, history, profile), worker(tmp_path, mode, history, profile)
    msgs = chat("Which database does staging use, and on which port?")
    first = a.prepare(msgs, session_id="s")
    assert first.injection.injected or first.injection.profile_ids
    MemoryStore(tmp_path).add("The staging database moved to Postgres 16 on port 6543 last week")
    assert b.prepare(msgs, session_id="s").messages == first.messages  # rule 4, across workers


def test_an_empty_turn_is_looked_at_again_by_any_worker(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("Deploys go out on Tuesdays")
    question = [{"role": "user", "content": "Which database does staging use?"}]
    a, b = (Middleware(store=MemoryStore(tmp_path), history="drop", shared_memos=True) for _ in range(2))
    assert a.prepare(question, session_id="s").injection.skipped == "nothing_relevant"
    assert b.prepare(question, session_id="s").injection.skipped == "nothing_relevant"
    store.add("The staging database is Postgres 16 on port 5433")
    found = b.prepare(question, session_id="s")
    assert found.injection.injected
    assert a.prepare(question, session_id="s").messages == found.messages  # settled: a takes b's block


def test_shared_memos_off_writes_no_memo(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), mode="startup")  # the library default: memos in this process
    assert mw.prepare(chat(TURNS[0]), session_id="s").injection.injected
    assert not (tmp_path / ".ledger").exists()


def _commit_many(path: str, who: int, n: int, start: Any) -> None:
    from memwire.policies.modes import _ledger

    _ledger.MAX_LINES, _ledger.MAX_ENTRIES = 25, 10_000  # rewrites (a new file renamed over) all along
    ledger = _ledger.Ledger.load(Path(path), "s")
    start.wait(60)  # a barrier: go once all four have loaded the ledger
    for i in range(n):
        ledger.sync()
        base = ledger.snapshot()
        key = f"{who}-{i}"
        entry = _ledger.LedgerEntry(key, ("m",), ("- m",), f"<memory>{key}</memory>", 3)
        assert ledger.commit(key, (*base, entry))
        shared = _ledger.LedgerEntry("shared", (str(who),), ("- w",), f"<memory>{who}</memory>", 3)
        ledger.commit("shared", (*ledger.entries, shared))  # every process commits one turn: one wins
        assert ledger.get("shared") == _ledger.Ledger.load(Path(path), "s").get("shared")


def test_no_ledger_write_is_lost_when_processes_commit_at_once(tmp_path: Path) -> None:
    import multiprocessing

    from memwire.policies.modes._ledger import Ledger

    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(4)  # all four commit at once, once the three children have started (not a fixed 3 s)
    procs = [spawn.Process(target=_commit_many, args=(str(tmp_path), w, 80, start)) for w in range(3)]
    for p in procs:
        p.start()
    _commit_many(str(tmp_path), 9, 80, start)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    keys = [e.key for e in Ledger.load(tmp_path, "s").entries]
    assert sorted(keys) == sorted([f"{w}-{i}" for w in (0, 1, 2, 9) for i in range(80)] + ["shared"])


def test_a_concurrent_writer_s_change_to_an_earlier_entry_is_kept(tmp_path: Path) -> None:
    from memwire.policies.modes._ledger import Ledger, LedgerEntry, _Entries

    a, b = Ledger.load(tmp_path, "s"), Ledger.load(tmp_path, "s")
    assert a.commit("t1", (LedgerEntry("t1"),))
    b.sync()
    stale = b.snapshot()  # b computes turn 2 from here ...
    a.commit("t1", (LedgerEntry("t1", ("m",), ("- m",), "<memory>m</memory>", 3),), relook=True)  # ... a fills turn 1
    mine = _Entries((*stale, LedgerEntry("t2")))
    mine.gen = stale.gen  # as Replay._new_turn hands it over
    assert b.commit("t2", mine)
    for ledger in (b, Ledger.load(tmp_path, "s")):
        assert ledger.get("t1").ids == ("m",) and ledger.get("t2") is not None


# ---------------------------------------------------------------- the incremental path equals a full recomputation

class FakeStore:
    """What the ledger asks of a store: its ``version`` and ``missing``."""

    def __init__(self, ids: set[str]) -> None:
        self.ids, self.version, self.asked = set(ids), 0, 0

    def missing(self, ids: Any, *, refresh: bool = True, wait: bool = True) -> set[str]:
        ids = set(ids)
        self.asked += len(ids)
        return {mid for mid in ids if mid not in self.ids}


def full_new_turn(entries: Any, present: set[str], latest: str, block: Any, gone: set[str], max_tokens: int) -> Any:
    """``Replay._new_turn`` as it was before the ledger kept indexes: every entry, every time."""
    from memwire.policies.modes._ledger import LedgerEntry

    entries, compacted = list(entries), False
    for j, e in enumerate(entries):
        if gone.intersection(e.ids):
            entries[j] = e.without(gone, None)
            compacted = compacted or e.key in present
    total = sum(e.tokens for e in entries if e.key in present and e.text)
    if total + block.tokens > max_tokens:
        budget = max_tokens // 2 - block.tokens
        for j, e in enumerate(entries):
            if total <= budget:
                break
            if e.key in present and e.text:
                entries[j] = LedgerEntry(e.key)
                total -= e.tokens
                compacted = True
    new = LedgerEntry(latest, block.ids, block.lines, block.text, block.tokens, block.skipped)
    return [e for e in entries if e.key != latest] + [new], compacted


def full_earlier(users: list[int], keys: dict[int, str], entries: Any) -> dict[int, str]:
    by_key = {e.key: e for e in entries}
    return {i: by_key[keys[i]].text for i in users[:-1] if keys[i] in by_key and by_key[keys[i]].text}


def check_indexes(ledger: Any, store: FakeStore) -> None:
    from collections import Counter

    shown = [(k, e) for k, e in ledger._entries.items() if e.ids or e.text]
    assert list(ledger._shown.items()) == shown
    assert ledger._ids == dict(Counter(mid for _, e in shown for mid in e.ids))
    assert ledger.gone(store, ledger.snapshot()) == store.missing({mid for e in ledger.entries for mid in e.ids})


KEYS = [f"k{i}" for i in range(8)]
MIDS = [f"m{i}" for i in range(8)]
from hypothesis import strategies as st  # noqa: E402

ops = st.lists(st.one_of(
    st.tuples(st.just("turn"), st.sets(st.sampled_from(KEYS)), st.sampled_from(KEYS), st.lists(st.sampled_from(MIDS), max_size=4, unique=True)),
    st.tuples(st.just("forget"), st.sampled_from(MIDS)),
    st.tuples(st.just("restore"), st.sampled_from(MIDS)),
    st.tuples(st.just("other"), st.sampled_from(KEYS), st.lists(st.sampled_from(MIDS), max_size=3, unique=True)),
    st.tuples(st.just("sync"),),
), max_size=60)


@settings(SETTINGS, max_examples=300)
@given(steps=ops, max_tokens=st.sampled_from([40, 120, 4000]))
def test_the_ledger_s_indexes_give_what_reading_every_entry_gives(tmp_path_factory: Any, monkeypatch: Any,
                                                                  steps: Any, max_tokens: int) -> None:
    """A new turn reads only the entries that hold a block and asks the store only about ids it has
    not checked at the store's version: its exclusions, its changes, the ledger they leave and the
    blocks put back are those of reading every entry (across another process's commits, rewrites,
    forgotten memories)."""
    from types import SimpleNamespace

    from memwire.policies.modes import _ledger
    from memwire.policies.modes._ledger import Ledger, LedgerEntry, _Entries
    from memwire.policies.modes._render import Block, render_lines
    from memwire.policies.modes._replay import Replay

    monkeypatch.setattr(_ledger, "MAX_LINES", 8)  # rewrites all along
    monkeypatch.setattr(_ledger, "MAX_ENTRIES", 4)
    d, copy_dir = tmp_path_factory.mktemp("ledger"), tmp_path_factory.mktemp("copy")
    _ledger.ledger_path(copy_dir, "s").parent.mkdir()
    store = FakeStore(set(MIDS))
    mine, other = Ledger.load(d, "s"), Ledger.load(d, "s")
    replay = Replay(max_tokens, 8)

    def block_of(ids: list[str]) -> Any:
        if not ids:
            return Block(skipped="nothing_relevant")
        lines = tuple(f"- {mid}" for mid in ids)
        return Block(tuple(ids), lines, render_lines(lines), 10 * len(ids))

    for step in steps:
        if step[0] == "turn":
            _, present, latest, ids = step
            present.discard(latest)
            order = [k for k in KEYS if k in present] + [latest]
            keys = {2 * n: k for n, k in enumerate(order)}
            users = sorted(keys)
            turn = SimpleNamespace(view=SimpleNamespace(latest_user=users[-1], user_indices=users), store=store, model=None)
            mine.sync()
            before = mine.snapshot()
            seen: list[frozenset[str]] = []
            block = block_of(ids)
            got = replay._new_turn(mine, turn, keys, lambda fresh, ex: seen.append(ex) or block, True)  # type: ignore[arg-type]
            gone = store.missing({mid for e in before for mid in e.ids})
            want, compacted = full_new_turn(before, present, latest, block, gone, max_tokens)
            assert seen == [frozenset(mid for e in before if e.key in present for mid in e.ids)]
            assert got.compacted == compacted
            shadow = Ledger(None, "s", before)  # the same entries, and the same file (its rewrites)
            if _ledger.ledger_path(d, "s").exists():
                shutil.copyfile(_ledger.ledger_path(d, "s"), _ledger.ledger_path(copy_dir, "s"))
                shadow = Ledger.load(copy_dir, "s")
                assert list(shadow.entries) == list(before)
            full = _Entries(want)
            full.gen = shadow.snapshot().gen
            assert mine.commit(latest, got.extra, relook=True) == shadow.commit(latest, full, relook=True)
            assert list(mine.entries) == list(shadow.entries)
            for extra, entries in ((mine.entries, mine.entries), (got.extra, want)):  # in message order
                want_earlier = full_earlier(users, keys, entries)
                assert list(replay.earlier(turn, keys, Block(extra=extra)).items()) == list(want_earlier.items())
        elif step[0] == "forget":
            store.ids.discard(step[1])
            store.version += 1
        elif step[0] == "restore":
            store.ids.add(step[1])
            store.version += 1
        elif step[0] == "other":
            _, key, ids = step
            b = block_of(ids)
            other.sync()
            other.commit(key, (LedgerEntry(key, b.ids, b.lines, b.text, b.tokens, b.skipped),), relook=True)
        else:
            mine.sync()
        check_indexes(mine, store)
        check_indexes(other, store)


def test_a_new_turn_asks_the_store_only_about_ids_it_has_not_checked(tmp_path: Path) -> None:
    from memwire.policies.modes._ledger import Ledger, LedgerEntry

    store = FakeStore({"a", "b", "c"})
    ledger = Ledger(None, "s", [LedgerEntry("t1", ("a", "b"), ("- a", "- b"), "x", 2)])
    assert ledger.gone(store, ledger.snapshot()) == set() and store.asked == 2
    ledger.commit("t2", (LedgerEntry("t2", ("b", "c"), ("- b", "- c"), "y", 2),))
    assert ledger.gone(store, ledger.snapshot()) == set() and store.asked == 3  # only "c" is new
    assert ledger.gone(store, ledger.snapshot()) == set() and store.asked == 3
    store.ids.discard("a")
    store.version += 1  # the memory set changed: every id shown is looked at again
    assert ledger.gone(store, ledger.snapshot()) == {"a"} and store.asked == 6
    assert ledger.gone(store, ledger.snapshot()) == {"a"} and store.asked == 6
