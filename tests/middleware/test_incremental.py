"""Reading only what is new (``_incremental``) gives exactly what reading the whole request gives,
whatever the next request of the conversation does: grow, edit, remove or reorder earlier messages,
change them in place, change the system prompt, or be malformed."""

from __future__ import annotations

import copy
import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwire import MemoryStore, Middleware
from memwire._errors import RequestFormatError
from memwire.middleware._formats import FORMATS, Format, View
from memwire.middleware._incremental import Views
from memwire.policies.modes._replay import message_keys, user_keys

APIS = ["openai.chat", "anthropic.messages", "openai.responses"]
LONG = "Always run the linter and the whole test suite before you say a change is done."
TEXTS = ["How do I run the tests?", "ok", "Which database does staging use?", LONG, f"Fix it\n\n{LONG}",
         "<system-reminder>ctx</system-reminder>", "<system-reminder>ctx</system-reminder>How do I deploy?",
         "  ", "Thanks!", "Shall I add tests?"]
NUMBERS = st.sampled_from([1, 1.0, True, 0, False, -0.0, 0.0, "auto"])  # == but not the same JSON


def text_type(api: str) -> str:
    return "input_text" if api == "openai.responses" else "text"


def part(api: str) -> st.SearchStrategy[Any]:
    text = st.builds(lambda t: {"type": text_type(api), "text": t}, st.sampled_from(TEXTS))
    cached = st.builds(lambda t: {"type": text_type(api), "text": t, "cache_control": {"type": "ephemeral"}},
                       st.sampled_from(TEXTS))
    if api == "openai.chat":
        other = st.builds(lambda d: {"type": "image_url", "image_url": {"url": "data:x", "detail": d}}, NUMBERS)
    elif api == "anthropic.messages":
        other = st.builds(lambda e: {"type": "tool_result", "tool_use_id": "t1", "content": "out", "is_error": e}, NUMBERS)
    else:
        other = st.builds(lambda d: {"type": "input_image", "image_url": "data:x", "detail": d}, NUMBERS)
    return st.one_of(text, cached, other)


def content(api: str) -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(TEXTS), st.lists(part(api), min_size=1, max_size=3))


ROLES = {"openai.chat": ["user", "user", "assistant", "system", "developer", "tool"],
         "anthropic.messages": ["user", "user", "assistant", "system"],
         "openai.responses": ["user", "user", "assistant", "system", "developer"]}
BAD = [{"role": "bogus", "content": "x"}, {"role": "user", "content": 5}, "not an object", {"content": "no role"}]


def message(api: str) -> st.SearchStrategy[Any]:
    msg = st.builds(lambda r, c: {"role": r, "content": c}, st.sampled_from(ROLES[api]), content(api))
    options = [msg, msg, msg]
    if api == "openai.chat":
        options.append(st.just({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}))
    if api == "openai.responses":
        options.append(st.just({"type": "function_call", "call_id": "c", "name": "sh", "arguments": "{}"}))
    return st.one_of(*options)


def operation(api: str) -> st.SearchStrategy[tuple[Any, ...]]:
    """What happens to the conversation before the next request."""
    i = st.integers(0, 40)
    return st.one_of(
        st.tuples(st.just("append"), st.lists(message(api), min_size=1, max_size=3)),
        st.tuples(st.just("append"), st.lists(message(api), min_size=1, max_size=3)),
        st.tuples(st.just("edit"), i, message(api)),                  # a new object in place of one
        st.tuples(st.just("change in place"), i, content(api)),       # the caller changes its own dict
        st.tuples(st.just("change number"), i, NUMBERS),              # a nested number, in place
        st.tuples(st.just("remove"), i),
        st.tuples(st.just("swap"), i, i),
        st.tuples(st.just("truncate"), i),
        st.tuples(st.just("system"), st.sampled_from(["", "You are a coding agent.", f"Rules.\n\n{LONG}"])),
        st.tuples(st.just("bad"), st.sampled_from(BAD)),
        st.tuples(st.just("same"),),
        st.tuples(st.just("read-only"), i),                           # a Mapping that is not a dict
    )


def apply(op: tuple[Any, ...], items: list[Any], body: dict[str, Any], api: str) -> None:
    kind = op[0]
    n = len(items)
    if kind == "append":
        items.extend(copy.deepcopy(op[1]))
    elif kind == "edit" and n:
        items[op[1] % n] = copy.deepcopy(op[2])
    elif kind == "change in place" and n and isinstance(items[op[1] % n], dict):
        items[op[1] % n]["content"] = copy.deepcopy(op[2])
    elif kind == "change number":
        for item in items[op[1] % n:] if n else []:
            parts = item.get("content") if isinstance(item, dict) else None
            for p in parts if isinstance(parts, list) else []:
                for key in ("detail", "is_error"):
                    if key in p:
                        p[key] = op[2]
                        return
                if isinstance(p.get("image_url"), dict):
                    p["image_url"]["detail"] = op[2]
                    return
    elif kind == "remove" and n:
        del items[op[1] % n]
    elif kind == "swap" and n:
        a, b = op[1] % n, op[2] % n
        items[a], items[b] = items[b], items[a]
    elif kind == "truncate":
        del items[op[1] % (n + 1):]
    elif kind == "system" and api != "openai.chat":  # (chat: a system message is appended instead)
        body["system" if api == "anthropic.messages" else "instructions"] = op[1]
    elif kind == "read-only" and n and isinstance(items[op[1] % n], dict):
        items[op[1] % n] = MappingProxyType(items[op[1] % n])
    elif kind == "bad":
        items.append(copy.deepcopy(op[1]))


def fresh(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a proxy parses it."""
    return json.loads(json.dumps(body, default=dict))  # type: ignore[no-any-return]


def full_view(fmt: Format, body: dict[str, Any]) -> View | str:
    try:
        return fmt.view(fresh(body))
    except RequestFormatError as exc:
        return f"RequestFormatError: {exc}"


def full_keys(fmt: Format, v: View) -> dict[int, str]:
    return message_keys({i: fmt.identity(v.items[i], v.system_text) for i in v.user_indices})


@pytest.mark.parametrize("api", APIS)
@settings(deadline=None, max_examples=40)  # 150 caught no mutation more: see test_incremental_in_place
@given(data=st.data())
def test_incremental_view_equals_the_full_read(api: str, data: st.DataObject) -> None:
    fmt = FORMATS[api]
    items: list[Any] = data.draw(st.lists(message(api), max_size=6))
    body: dict[str, Any] = {"model": "m", ("input" if api == "openai.responses" else "messages"): items}
    views = Views()
    before: tuple[View | str, View | str] | None = None
    for op in data.draw(st.lists(operation(api), min_size=1, max_size=12)):
        apply(op, items, body, api)
        expected = full_view(fmt, body)
        # the same objects again (an SDK caller that appends to its list), or a fresh parse (the proxy)
        sent = body if data.draw(st.booleans()) else fresh(body)
        try:
            got: View | str = views.view(fmt, sent, "hint")
        except RequestFormatError as exc:
            got = f"RequestFormatError: {exc}"
        assert got == expected
        if isinstance(got, View) and data.draw(st.booleans()):  # replay asks for keys (not every request)
            keys = user_keys(fmt, got)
            assert keys == full_keys(fmt, got)
            assert keys.index == {k: i for i, k in keys.items()}  # kept alongside, not rebuilt
        if before is not None:  # a request's view stays as it was when the next request is read
            assert before[0] == before[1]
        # (its items are the caller's list: with the same objects they change with the caller's)
        before = (got, expected) if sent is not body else None
        if op[0] == "bad":  # the conversation goes on without the bad item
            items.pop()


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
def test_a_changed_system_prompt_changes_the_identities_of_earlier_messages(api: str) -> None:
    # a paragraph of a user message that the system prompt also holds is not part of its identity
    fmt = FORMATS[api]
    msgs: list[dict[str, Any]] = [{"role": "user", "content": f"Fix it\n\n{LONG}"}, {"role": "assistant", "content": "Done"}]
    body: dict[str, Any] = {"messages": msgs}
    views = Views()
    v = views.view(fmt, copy.deepcopy(body))
    assert user_keys(fmt, v) == full_keys(fmt, v)
    if api == "openai.chat":
        msgs.append({"role": "system", "content": f"Rules.\n\n{LONG}"})
    else:
        body["system"] = f"Rules.\n\n{LONG}"
    msgs.append({"role": "user", "content": "Fix it"})
    v = views.view(fmt, copy.deepcopy(body))
    keys = user_keys(fmt, v)
    assert keys == full_keys(fmt, v)
    assert keys[0] == message_keys({0: "Fix it"})[0]  # now the same message as "Fix it" (the first of two)


@pytest.mark.parametrize("api", APIS)
def test_an_earlier_item_whose_role_or_type_alone_changed_is_read_again(api: str) -> None:
    fmt = FORMATS[api]
    key = "input" if api == "openai.responses" else "messages"
    items: list[dict[str, Any]] = [{"role": "user", "content": "Which port?"}, {"role": "assistant", "content": "5433"},
                                   {"role": "user", "content": "And prod?"}]
    views = Views()
    views.view(fmt, {key: items})
    items[0] = {"role": "assistant", "content": "Which port?"}  # the same text, said by the other side
    items.append({"role": "assistant", "content": "5432"})      # (and the conversation grew)
    v = views.view(fmt, {key: copy.deepcopy(items)})
    assert v == fmt.view({key: items}) and v.user_indices == [2]
    if api == "openai.responses":  # an item that is no message (a reasoning item), then one again
        items[2] = {"type": "reasoning", "role": "user", "content": "And prod?"}
        v = views.view(fmt, {key: copy.deepcopy(items)})
        assert v == fmt.view({key: items}) and v.user_indices == []
        items[2] = {"type": "message", "role": "user", "content": "And prod?"}
        v = views.view(fmt, {key: copy.deepcopy(items)})
        assert v == fmt.view({key: items}) and v.user_indices == [2]


def test_leading_system_messages_after_an_earlier_one_is_removed() -> None:
    fmt = FORMATS["openai.chat"]
    views = Views()
    msgs = [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": "q"}]
    assert views.view(fmt, {"messages": msgs}).leading_system == 2
    del msgs[1]
    assert views.view(fmt, {"messages": msgs}).leading_system == 1
    msgs.insert(1, {"role": "user", "content": "first"})
    msgs.append({"role": "system", "content": "c"})
    v = views.view(fmt, {"messages": msgs})
    assert v == fmt.view({"messages": msgs}) and v.leading_system == 1


def test_a_long_conversation_reads_only_its_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    fmt = FORMATS["openai.chat"]
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for t in range(500):
        msgs += [{"role": "user", "content": f"question {t}"}, {"role": "assistant", "content": f"answer {t}"}]
    views = Views()
    first = views.view(fmt, {"messages": json.loads(json.dumps(msgs))})
    assert user_keys(fmt, first) == full_keys(fmt, first)
    read: list[int] = []
    hashed: list[Any] = []
    role, identity = Format.role, Format.identity
    monkeypatch.setattr(Format, "role", lambda self, item, i: read.append(i) or role(self, item, i))
    monkeypatch.setattr(Format, "identity", lambda self, item, s="": hashed.append(item) or identity(self, item, s))
    msgs.append({"role": "user", "content": "and now?"})
    v = views.view(fmt, {"messages": json.loads(json.dumps(msgs))})
    keys = user_keys(fmt, v)
    assert read == [1001]                       # one message validated, not 1,002
    assert hashed == [msgs[-1]]                 # one identity hashed, not 501
    monkeypatch.undo()
    assert v == fmt.view({"messages": msgs}) and keys == full_keys(fmt, v)


def test_an_earlier_message_changed_in_place_is_read_again() -> None:
    fmt = FORMATS["openai.chat"]
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Which database?"}, {"role": "assistant", "content": "Postgres"},
                                  {"role": "user", "content": [{"type": "text", "text": "And the port?"},
                                                               {"type": "image_url", "image_url": {"url": "x", "detail": 1}}]}]
    views = Views()
    user_keys(fmt, views.view(fmt, {"messages": msgs}))
    msgs[2]["content"][1]["image_url"]["detail"] = True  # == 1, but not the same identity
    msgs.append({"role": "user", "content": "ok"})
    v = views.view(fmt, {"messages": msgs})
    assert user_keys(fmt, v) == full_keys(fmt, v)
    assert user_keys(fmt, v)[2] != message_keys({2: fmt.identity({"content": [
        {"type": "text", "text": "And the port?"}, {"type": "image_url", "image_url": {"url": "x", "detail": 1}}]})})[2]
    msgs[0]["content"] = "Which cache?"  # the caller edits its own first message
    v = views.view(fmt, {"messages": msgs})
    assert v == fmt.view({"messages": copy.deepcopy(msgs)}) and v.first_user_text == "Which cache?"


def test_kept_conversations_are_bounded() -> None:
    fmt = FORMATS["openai.chat"]
    views = Views(maxsize=8)
    for s in range(50):
        views.view(fmt, {"messages": [{"role": "user", "content": f"conversation {s}"}]})
    assert len(views._previous) == 8


class _FullRead:
    """The middleware's views without the incremental read: every request read whole."""

    def view(self, fmt: Format, body: dict[str, Any], hint: str = "") -> View:
        return fmt.view(body)


@pytest.mark.parametrize("api", APIS)
@settings(deadline=None, max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_prepare_gives_the_same_bytes_as_reading_every_request_whole(
    tmp_path_factory: pytest.TempPathFactory, api: str, data: st.DataObject
) -> None:
    history = data.draw(st.sampled_from(["replay", "drop"]))
    mws = []
    for _ in range(2):  # each with a store of its own (replay ledgers live beside the memories)
        store = MemoryStore(tmp_path_factory.mktemp("mem"))
        store.add_many(["Run the tests with make test", "The staging database is Postgres 15 on port 5433",
                        "Deploys go out on Tuesdays", "User prefers tabs over spaces"])
        # a budget no load reaches: a retrieval timed out on one side only would send other bytes
        mws.append(Middleware(store=store, mode="contextPerTurn", history=history, capture="off", timeout_ms=600_000))
    mws[1]._views = _FullRead()  # type: ignore[assignment]
    items: list[Any] = []
    body: dict[str, Any] = {"model": "gpt-4o", ("input" if api == "openai.responses" else "messages"): items}
    for op in data.draw(st.lists(operation(api), min_size=1, max_size=10)):
        apply(op, items, body, api)
        out = []
        for mw in mws:
            try:
                p = mw.prepare_request(fresh(body), api=api, session_id="s")
                out.append((json.dumps(p.body), p.injection and (p.injection.memory_ids, p.injection.skipped,
                                                                 p.injection.replayed, p.injection.position)))
            except RequestFormatError as exc:
                out.append(("error", str(exc)))
        assert out[0] == out[1]
        if op[0] == "bad":
            items.pop()
    for mw in mws:
        mw.flush()
