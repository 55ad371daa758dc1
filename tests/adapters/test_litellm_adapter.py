"""The litellm adapter: wrapped completion/acompletion against respx-mocked OpenAI and Anthropic APIs,
and the LiteLLM proxy callback's pre-call hook."""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from memwire import MemoryStore, Middleware, UsageError
from memwire.adapters.litellm import (
    ADMIN_USER_ID,
    MASTER_KEY_ALIAS,
    proxy_namespace,
    proxy_session,
    wrap,
)
from memwire.policies.modes._render import OPEN

from .failing import BrokenMiddleware, BrokenStore, memwire_warnings
from .lazy_litellm import auth, callback, litellm, types


SYSTEM = "You are a careful coding agent."
QUESTION = "Should I indent this Python file with tabs or spaces?"
CLAUDE = "anthropic/claude-3-5-sonnet-20241022"

COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Tabs."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}
CLAUDE_REPLY = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-sonnet-20241022",
    "content": [{"type": "text", "text": "Tabs."}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 2},
}
# as OpenAI streams it: the last chunk carries the finish_reason (litellm >= 1.108 raises without it)
SSE = "".join(
    "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"
    for delta, finish in [({"content": "Use "}, None), ({"content": "tabs"}, None), ({"content": "."}, None),
                          ({}, "stop")]
) + "data: [DONE]\n\n"


def conversation() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello! What are we doing?"}, {"role": "user", "content": QUESTION}]


@pytest.fixture
def mw(store: MemoryStore) -> Middleware:
    # memory_role="system" on purpose: through litellm the adapter must still send a user message
    return Middleware(store=store, mode="contextPerTurn", memory_role="system")


@pytest.fixture
def api() -> Any:
    with respx.mock(assert_all_called=False) as router:
        router.post("https://api.openai.com/v1/chat/completions", name="openai").mock(
            return_value=httpx.Response(200, json=COMPLETION))
        router.post("https://api.anthropic.com/v1/messages", name="anthropic").mock(
            return_value=httpx.Response(200, json=CLAUDE_REPLY))
        yield router


def settle_warm_up() -> None:
    """Wait for the background warm-ups that wrap() and MemwireCallback() start (a failing one logs)."""
    for thread in threading.enumerate():
        if thread.name == "memwire-warm-up":
            thread.join(timeout=30)


def master_key() -> Any:
    """What the proxy's auth returns for the master key (litellm's user_api_key_auth)."""
    key = auth(token=MASTER_KEY_ALIAS, user_id=ADMIN_USER_ID, user_role=types().LitellmUserRoles.PROXY_ADMIN,
               end_user_id="end-user-1")
    key.api_key = MASTER_KEY_ALIAS  # set after validation: the validator would hash a key given here
    return key


def sent(api: Any, name: str) -> dict[str, Any]:
    return json.loads(api[name].calls.last.request.content)


def assert_user_memory_before_latest_user(messages: list[dict[str, Any]]) -> None:
    original = conversation()
    assert len(messages) == len(original) + 1
    assert messages[:-2] == original[:-1] and messages[-1] == original[-1]
    assert messages[-2]["role"] == "user" and messages[-2]["content"].startswith(OPEN)
    assert "tabs over spaces" in messages[-2]["content"]


# ---------------------------------------------------------------------- wrap(completion)


def test_wrap_keeps_the_signature() -> None:
    completion = wrap(litellm().completion, Middleware(store=MemoryStore("unused")))
    acompletion = wrap(litellm().acompletion, Middleware(store=MemoryStore("unused")))
    assert inspect.signature(completion) == inspect.signature(litellm().completion)
    assert inspect.iscoroutinefunction(acompletion) and not inspect.iscoroutinefunction(completion)
    assert completion.__name__ == "completion" and acompletion.__wrapped__ is litellm().acompletion  # type: ignore[attr-defined]


def test_completion_openai(mw: Middleware, api: Any) -> None:
    messages = conversation()
    result = wrap(litellm().completion, mw)(model="gpt-4o-mini", messages=messages, api_key="test",
                                          memwire_session="s-1")
    assert messages == conversation()  # the caller's list is unchanged
    assert result.choices[0].message.content == "Tabs."
    body = sent(api, "openai")
    assert_user_memory_before_latest_user(body["messages"])
    assert "memwire_session" not in body


def test_completion_positional_model_and_messages(mw: Middleware, api: Any) -> None:
    wrap(litellm().completion, mw)("gpt-4o-mini", conversation(), api_key="test")
    assert_user_memory_before_latest_user(sent(api, "openai")["messages"])


def test_too_many_positional_arguments_is_a_usage_error_before_any_call(mw: Middleware, api: Any) -> None:
    with pytest.raises(UsageError, match=r"completion\(\) got \d+ positional arguments"):
        wrap(litellm().completion, mw)(*(["gpt-4o-mini", conversation()] + [None] * 200))
    assert not api["openai"].called


async def test_acompletion_openai(mw: Middleware, api: Any) -> None:
    result = await wrap(litellm().acompletion, mw)(model="gpt-4o-mini", messages=conversation(), api_key="test")
    assert result.choices[0].message.content == "Tabs."
    assert_user_memory_before_latest_user(sent(api, "openai")["messages"])


def test_completion_stream(mw: Middleware, api: Any) -> None:
    api["openai"].mock(return_value=httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"}))
    stream = wrap(litellm().completion, mw)(model="gpt-4o-mini", messages=conversation(), api_key="test", stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream)
    assert text == "Use tabs."
    assert_user_memory_before_latest_user(sent(api, "openai")["messages"])


async def test_acompletion_stream(mw: Middleware, api: Any) -> None:
    api["openai"].mock(return_value=httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"}))
    stream = await wrap(litellm().acompletion, mw)(model="gpt-4o-mini", messages=conversation(), api_key="test",
                                                 stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == "Use tabs."
    assert_user_memory_before_latest_user(sent(api, "openai")["messages"])


def _anthropic_memory_then_question(body: dict[str, Any]) -> None:
    # the memory is a text block of the user's turn, before the question (litellm merges
    # consecutive user messages into one Anthropic user message)
    last = body["messages"][-1]
    assert last["role"] == "user"
    texts = [b["text"] for b in last["content"] if b.get("type") == "text"]
    assert texts[-1] == QUESTION
    assert any(t.startswith(OPEN) and "tabs over spaces" in t for t in texts[:-1])


@pytest.mark.parametrize("mode", ["contextPerTurn", "startup"])
def test_completion_anthropic_system_is_byte_identical(store: MemoryStore, api: Any, mode: str) -> None:
    litellm().completion(model=CLAUDE, messages=conversation(), api_key="test")
    plain = sent(api, "anthropic")
    mw = Middleware(store=store, mode=mode, memory_role="system")
    wrap(litellm().completion, mw)(model=CLAUDE, messages=conversation(), api_key="test")
    with_memory = sent(api, "anthropic")
    assert json.dumps(with_memory["system"]) == json.dumps(plain["system"])
    assert with_memory["system"] == [{"type": "text", "text": SYSTEM}]
    if mode == "contextPerTurn":
        _anthropic_memory_then_question(with_memory)
        assert with_memory["messages"][:-1] == plain["messages"][:-1]  # history before the turn untouched
    else:  # startup: the session block follows the system prompt, still outside the system field
        first = with_memory["messages"][0]
        assert first["role"] == "user" and first["content"][0]["text"].startswith(OPEN)


def test_replayed_blocks_also_leave_the_system_field_alone(store: MemoryStore, api: Any) -> None:
    completion = wrap(litellm().completion, Middleware(store=store, history="replay", memory_role="system"))
    first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which port is the staging database on?"}]
    completion(model=CLAUDE, messages=first, api_key="test", memwire_session="r")
    second = [*first, {"role": "assistant", "content": "5433."}, {"role": "user", "content": QUESTION}]
    completion(model=CLAUDE, messages=second, api_key="test", memwire_session="r")
    body = sent(api, "anthropic")
    assert body["system"] == [{"type": "text", "text": SYSTEM}]
    blocks = [b["text"] for m in body["messages"] for b in m["content"] if b.get("text", "").startswith(OPEN)]
    assert len(blocks) == 2 and "port 5433" in blocks[0] and "tabs over spaces" in blocks[1]


def test_litellm_message_objects_passed_back(mw: Middleware, api: Any) -> None:
    # tool loops append the response's own Message object; it reaches litellm as the caller gave it
    completion = wrap(litellm().completion, mw)
    reply = completion(model=CLAUDE, messages=[{"role": "user", "content": "hi"}], api_key="test")
    message = reply.choices[0].message
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}, message,
                {"role": "user", "content": QUESTION}]
    litellm().completion(model=CLAUDE, messages=messages, api_key="test")
    plain = sent(api, "anthropic")
    completion(model=CLAUDE, messages=messages, api_key="test")
    body = sent(api, "anthropic")
    assert body["system"] == plain["system"] and body["messages"][:2] == plain["messages"][:2]
    _anthropic_memory_then_question(body)
    assert messages[2] is message


async def test_acompletion_anthropic(mw: Middleware, api: Any) -> None:
    result = await wrap(litellm().acompletion, mw)(model=CLAUDE, messages=conversation(), api_key="test")
    assert result.choices[0].message.content == "Tabs."
    body = sent(api, "anthropic")
    assert body["system"] == [{"type": "text", "text": SYSTEM}]
    _anthropic_memory_then_question(body)


# ---------------------------------------------------------------------- fail open


def test_completion_fails_open_when_search_raises(tmp_path: Path, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    MemoryStore(tmp_path / "mem").add("User prefers tabs over spaces")  # written whole; then its search breaks
    store = BrokenStore(tmp_path / "mem")
    completion = wrap(litellm().completion, Middleware(store=store))
    settle_warm_up()  # its search fails too, and logs
    caplog.clear()
    result = completion(model="gpt-4o-mini", messages=conversation(), api_key="test")
    assert result.choices[0].message.content == "Tabs."
    assert sent(api, "openai")["messages"] == conversation()
    assert len(memwire_warnings(caplog)) == 1


async def test_acompletion_fails_open_when_middleware_raises(store: MemoryStore, api: Any,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    fn = wrap(litellm().acompletion, BrokenMiddleware(store=store))
    result = await fn(model=CLAUDE, messages=conversation(), api_key="test", memwire_namespace="bob")
    assert result.choices[0].message.content == "Tabs."
    body = sent(api, "anthropic")
    assert [m["content"] for m in body["messages"]][-1] == [{"type": "text", "text": QUESTION}]
    assert not any(OPEN in json.dumps(m) for m in body["messages"])
    assert len(memwire_warnings(caplog)) == 1


def _warmed(store: MemoryStore) -> bool:
    deadline = time.monotonic() + 30
    while not store.ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("fn_name", ["completion", "acompletion"])
def test_wrap_warms_up_in_the_background(store: MemoryStore, fn_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn = getattr(litellm(), fn_name)
    # the store loads with no call made (a cold store is not ready() until something reads it)
    reader = MemoryStore(store.path)
    wrap(fn, Middleware(store=reader))
    assert _warmed(reader)
    calls: list[dict[str, Any]] = []
    mw = Middleware(store=MemoryStore(store.path))
    monkeypatch.setattr(mw, "warm_up", lambda *a, **kw: calls.append(kw))
    wrap(fn, mw)
    assert calls == [{"background": True}]  # never on the caller's thread


def test_callback_warms_up_at_construction(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    reader = MemoryStore(store.path)
    callback(middleware=Middleware(store=reader))
    assert _warmed(reader)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(Middleware, "warm_up", lambda self, *a, **kw: calls.append(kw))
    monkeypatch.setenv("MEMWIRE_DIR", str(store.path))
    callback()  # the proxy's own instance, from the configuration
    assert calls == [{"background": True}]


class SlowEncoding:
    """A token encoding that loads until the test says so, as a cold one does on a busy machine: the
    warm-up and a call both wait for it (each load waits on ``loaded``, as tiktoken's on its lock)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from memwire.policies import _tokens

        self.loaded = threading.Event()
        real = _tokens._load.__wrapped__  # the loader itself, not its cache of loaded encodings

        @functools.lru_cache(maxsize=8)
        def load(name: str) -> Any:
            self.loaded.wait(60)
            return real(name)

        monkeypatch.setattr(_tokens, "_load", load)


def _first_call(fn: Any, mw: Middleware) -> tuple[threading.Thread, dict[str, Any]]:
    """``wrap(fn, mw)`` (which starts the warm-up), then its first call, in a thread."""
    completion = wrap(fn, mw)
    out: dict[str, Any] = {}

    def call() -> None:
        kwargs = {"model": "gpt-4o-mini", "messages": conversation(), "api_key": "test"}
        out["reply"] = asyncio.run(completion(**kwargs)) if fn is litellm().acompletion else completion(**kwargs)

    thread = threading.Thread(target=call)
    thread.start()
    return thread, out


@pytest.mark.parametrize("fn_name", ["completion", "acompletion"])
def test_the_first_call_waits_for_the_warm_up_under_way(store: MemoryStore, api: Any, fn_name: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fn = getattr(litellm(), fn_name)
    # issue 34 item 6: a warm-up slower than the retrieval budget; the first call arrives meanwhile
    encoding = SlowEncoding(monkeypatch)
    mw = Middleware(store=MemoryStore(store.path), mode="contextPerTurn", timeout_ms=50)
    thread, out = _first_call(fn, mw)
    thread.join(timeout=1.0)  # 20 budgets: a call that did not wait has gone out by now, without memory
    encoding.loaded.set()
    thread.join(timeout=60)
    assert "reply" in out
    body = sent(api, "openai")
    assert_user_memory_before_latest_user(body["messages"])  # the first call got its memory


@pytest.mark.parametrize("fn_name", ["completion", "acompletion"])
def test_a_warm_up_that_hangs_delays_the_first_call_a_bounded_time(store: MemoryStore, api: Any, fn_name: str,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    fn = getattr(litellm(), fn_name)
    encoding = SlowEncoding(monkeypatch)
    mw = Middleware(store=MemoryStore(store.path), mode="contextPerTurn", timeout_ms=50)
    mw.warm_up_wait = 0.2
    thread, out = _first_call(fn, mw)
    try:
        thread.join(timeout=60)  # the encoding never loads while the call runs: it goes out without memory
        assert not thread.is_alive() and "reply" in out
    finally:
        encoding.loaded.set()  # the warm-up and the abandoned retrieval end
        settle_warm_up()
    assert not any(OPEN in json.dumps(m) for m in sent(api, "openai")["messages"])
    assert any("warm-up still running" in r.getMessage() for r in memwire_warnings(caplog))


def test_importing_the_adapter_does_not_import_litellm() -> None:
    code = "import sys, memwire.adapters.litellm as m; assert 'litellm' not in sys.modules; print(m.wrap.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "wrap"


# ---------------------------------------------------------------------- the proxy callback


def test_callback_is_a_custom_logger_the_proxy_will_call(mw: Middleware) -> None:
    from litellm.integrations.custom_logger import CustomLogger

    cb = callback(middleware=mw)
    assert isinstance(cb, CustomLogger)
    # the proxy only calls a hook defined on the instance's own class (proxy/utils.py pre_call_hook)
    assert "async_pre_call_hook" in vars(type(cb))
    assert type(cb).async_pre_call_hook is not CustomLogger.async_pre_call_hook


def _proxy_data(**extra: Any) -> dict[str, Any]:
    return {"model": "claude", "messages": conversation(), "metadata": {"headers": {}, "user_api_key": "hashed"},
            "proxy_server_request": {"headers": {"x-memwire-session": "sess-7"}}, **extra}


async def test_callback_chat_request(mw: Middleware) -> None:
    data = _proxy_data()
    before = copy.deepcopy(data)
    # no key, no user: the default namespace
    out = await callback(middleware=mw).async_pre_call_hook(auth(), None, data, "acompletion")
    assert data == before
    assert_user_memory_before_latest_user(out["messages"])
    assert {k: v for k, v in out.items() if k != "messages"} == {k: v for k, v in data.items() if k != "messages"}


async def test_callback_namespace_from_the_key_user(store: MemoryStore, mw: Middleware) -> None:
    alice = MemoryStore.for_namespace(store.path, "alice")
    alice.add("Alice indents with two spaces in YAML files only")
    alice.add("Alice deploys from her laptop on Fridays")
    alice.add("Alice's editor is Helix")
    out = await callback(middleware=mw).async_pre_call_hook(
        auth(api_key="sk-1", user_id="alice"), None, _proxy_data(), "completion")
    memory = out["messages"][-2]["content"]
    assert "Alice indents" in memory and "tabs over spaces" not in memory


async def test_callback_master_key_uses_the_default_namespace(store: MemoryStore, mw: Middleware) -> None:
    # the master key's requests get the memories `memwire add --dir DIR` wrote: the files in DIR itself
    MemoryStore.for_namespace(store.path, ADMIN_USER_ID).add("Tabs are forbidden in the default_user_id namespace")
    data = _proxy_data(user="end-user-1")
    out = await callback(middleware=mw).async_pre_call_hook(master_key(), None, data, "acompletion")
    assert_user_memory_before_latest_user(out["messages"])
    assert "forbidden" not in out["messages"][-2]["content"]


async def test_callback_virtual_key_alias_has_its_own_namespace(store: MemoryStore, mw: Middleware) -> None:
    MemoryStore.for_namespace(store.path, "ci-bot").add("The CI bot indents with tabs, width 8")
    key = auth(api_key="sk-ci", key_alias="ci-bot")
    out = await callback(middleware=mw).async_pre_call_hook(key, None, _proxy_data(), "acompletion")
    memory = out["messages"][-2]["content"]
    assert "width 8" in memory and "width 4" not in memory


async def test_callback_hands_the_request_headers_to_the_middleware(mw: Middleware,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    real = mw.aprepare_request

    async def spy(body: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return await real(body, **kwargs)

    monkeypatch.setattr(mw, "aprepare_request", spy)
    data = _proxy_data()
    data["proxy_server_request"]["headers"] = {"X-Claude-Code-Session-Id": "cc-1", "User-Agent": "claude-cli"}
    await callback(middleware=mw).async_pre_call_hook(auth(), None, data, "acompletion")
    assert seen["headers"] == {"x-claude-code-session-id": "cc-1", "user-agent": "claude-cli"}  # client session signals


async def test_callback_key_namespace_does_not_see_default_memories(store: MemoryStore, mw: Middleware) -> None:
    data = _proxy_data()
    key = auth(api_key="sk-1")
    MemoryStore.for_namespace(store.path, proxy_namespace(key, data)).add("This key's user indents with tabs, width 2")
    out = await callback(middleware=mw).async_pre_call_hook(key, None, data, "acompletion")
    memory = out["messages"][-2]["content"]
    assert memory.startswith(OPEN) and "width 2" in memory  # the key's own namespace is searched (no fail-open pass)
    assert "width 4" not in memory  # and the default namespace's memory is not in it


async def test_callback_anthropic_messages(mw: Middleware) -> None:
    data = {"model": "claude", "system": SYSTEM, "max_tokens": 100, "litellm_metadata": {},
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"},
                         {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]}
    before = copy.deepcopy(data)
    out = await callback(middleware=mw).async_pre_call_hook(auth(), None, data, "anthropic_messages")
    assert data == before and out["system"] == SYSTEM
    assert out["messages"][:2] == before["messages"][:2] and out["messages"][-1] == before["messages"][-1]
    memory = out["messages"][-2]
    assert memory["role"] == "user" and memory["content"][0]["text"].startswith(OPEN)


async def test_callback_responses_request(mw: Middleware) -> None:
    data = {"model": "claude", "instructions": SYSTEM, "input": QUESTION, "litellm_metadata": {}}
    out = await callback(middleware=mw).async_pre_call_hook(auth(), None, data, "aresponses")
    assert out["instructions"] == SYSTEM and data["input"] == QUESTION
    memory, question = out["input"]
    assert memory["role"] == "user" and memory["content"][0]["text"].startswith(OPEN)  # not the configured "system"
    assert question == {"role": "user", "content": QUESTION}


@pytest.mark.parametrize("call_type, data", [
    ("aembedding", {"model": "text-embedding-3-small", "input": ["tabs or spaces?"]}),
    ("aimage_generation", {"model": "dall-e-3", "prompt": "tabs or spaces?"}),
    ("atext_completion", {"model": "gpt-3.5-turbo-instruct", "prompt": "tabs or spaces?"}),
])
async def test_callback_leaves_other_call_types_alone(mw: Middleware, call_type: str, data: dict[str, Any]) -> None:
    out = await callback(middleware=mw).async_pre_call_hook(auth(), None, data, call_type)
    assert out is data


async def test_callback_fails_open(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    data = _proxy_data()
    out = await callback(middleware=BrokenMiddleware(store=store)).async_pre_call_hook(
        auth(), None, data, "acompletion")
    assert out is data and len(memwire_warnings(caplog)) == 1


async def test_callback_builds_its_middleware_from_config(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMWIRE_DIR", str(store.path))
    monkeypatch.setenv("MEMWIRE_MEMORY_ROLE", "developer")
    cb = callback()
    assert cb.middleware.store.path == store.path
    out = await cb.async_pre_call_hook(auth(), None, _proxy_data(), "acompletion")
    assert_user_memory_before_latest_user(out["messages"])


def test_litellm_names_of_the_master_key() -> None:
    from litellm.constants import LITELLM_PROXY_ADMIN_NAME, LITELLM_PROXY_MASTER_KEY_ALIAS

    assert (ADMIN_USER_ID, MASTER_KEY_ALIAS) == (LITELLM_PROXY_ADMIN_NAME, LITELLM_PROXY_MASTER_KEY_ALIAS)


def test_proxy_namespace_rule() -> None:
    # the master key, whatever end user the request names: the default namespace
    assert proxy_namespace(master_key(), {"user": "end-user-1"}) is None
    assert proxy_namespace(auth(user_id=ADMIN_USER_ID), {}) is None  # an admin's key without an alias
    assert proxy_namespace(auth(token=MASTER_KEY_ALIAS), {}) is None
    # an admin's key with an alias has the alias's namespace, never "default_user_id"
    assert proxy_namespace(auth(user_id=ADMIN_USER_ID, key_alias="ops"), {}) == "ops"
    assert proxy_namespace(auth(user_id="alice@example.com", key_alias="ci"), {}) == "alice@example.com"
    assert proxy_namespace(auth(key_alias="ci-bot", api_key="sk-1"), {"user": "x"}) == "ci-bot"
    by_key = proxy_namespace(auth(api_key="sk-1"), {"user": "x"})
    assert by_key is not None and by_key.startswith("key-") and "sk-1" not in by_key
    assert by_key == proxy_namespace(auth(api_key="sk-1"), {})  # stable per key
    assert by_key != proxy_namespace(auth(api_key="sk-2"), {})
    assert proxy_namespace(auth(), {"user": "end-user-1"}) == "end-user-1"
    odd = proxy_namespace(auth(user_id="../etc passwd"), {})
    assert odd is not None and odd.startswith("user-") and "/" not in odd
    assert proxy_namespace(auth(), {}) is None


def test_proxy_session_rule() -> None:
    assert proxy_session({"metadata": {"headers": {"X-Memwire-Session": "a"}}}) == "a"
    assert proxy_session({"litellm_metadata": {"memwire_session": "b"}}) == "b"
    assert proxy_session({"proxy_server_request": {"headers": {"x-litellm-session-id": "c"}}}) == "c"
    assert proxy_session({"messages": []}) is None
