"""The fake provider, exercised by the real openai and anthropic SDKs (in-process and over a socket)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import anthropic
import httpx
import httpx2
import openai
import pytest

from memwire._sim import ErrorReply, FakeProvider, Reply, ToolCall, default_reply, last_user_text, serve_in_thread
from memwire._sim.fake_provider import (
    ToolLoop,
    json_schema_of,
    schema_example,
    structured_reply,
    tool_names,
    tool_result_pending,
)

LONG = "You are a careful assistant who answers with precision. " * 300  # ~3,000 tokens


@pytest.fixture
def app() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
async def http(app: FakeProvider) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fake") as client:
        yield client


@pytest.fixture
def oai(http: httpx.AsyncClient) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://fake/v1", api_key="sk-test", http_client=http, max_retries=0)


@pytest.fixture
async def claude(app: FakeProvider) -> AsyncIterator[anthropic.AsyncAnthropic]:
    # This anthropic SDK is built on httpx2 (httpx's successor), so it needs an httpx2 client.
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)) as http2:
        yield anthropic.AsyncAnthropic(base_url="http://fake", api_key="sk-ant-test", http_client=http2, max_retries=0)


WEATHER = Reply.tool("get_weather", {"city": "Paris", "unit": "c"})
OAI_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "strict": True, "parameters": {"type": "object", "properties": {}, "additionalProperties": False}},
}


# -- OpenAI chat completions ---------------------------------------------------------------------


async def test_chat_text_usage_and_recording(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    messages = [{"role": "system", "content": LONG}, {"role": "user", "content": "What is the capital of France?"}]
    first = await oai.chat.completions.create(
        model="gpt-4o-mini", messages=messages, extra_headers={"x-memwire-session": "s1"}
    )
    assert first.choices[0].message.content == "ok: What is the capital of France?"
    assert first.choices[0].finish_reason == "stop"
    assert first.usage and first.usage.prompt_tokens > 1024
    assert first.usage.prompt_tokens_details and first.usage.prompt_tokens_details.cached_tokens == 0
    second = await oai.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert second.usage and second.usage.prompt_tokens_details
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached and cached >= 1024 and cached % 128 == 0
    rec = app.requests[0]
    assert (rec.method, rec.path, rec.api) == ("POST", "/v1/chat/completions", "openai.chat")
    assert rec.headers["x-memwire-session"] == "s1" and rec.headers["authorization"] == "Bearer sk-test"
    assert rec.body["messages"] == messages
    assert app.last.usage and app.last.usage.cached_tokens == cached
    assert [u.cached_tokens for u in app.usages("openai")] == [0, cached]


async def test_chat_stream_text_and_usage(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    app.reply = lambda body, api: "The capital of France is Paris."
    stream = await oai.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "capital?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "The capital of France is Paris."
    assert chunks[-1].choices == [] and chunks[-1].usage and chunks[-1].usage.completion_tokens > 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


async def test_chat_stream_helper_accumulates_tool_calls(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    app.reply = lambda body, api: WEATHER
    async with oai.chat.completions.stream(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "weather?"}], tools=[OAI_TOOL]
    ) as stream:
        final = await stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "c"}  # type: ignore[union-attr]
    assert final.choices[0].finish_reason == "tool_calls"


async def test_chat_tool_call_non_streaming(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    app.reply = lambda body, api: Reply(text="", tool_calls=(ToolCall("a", '{"x": 1}', id="call_1"), ToolCall("b")))
    resp = await oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "go"}], tools=[OAI_TOOL])
    msg = resp.choices[0].message
    assert msg.content is None and [c.id for c in msg.tool_calls or []][0] == "call_1"
    assert [c.function.name for c in msg.tool_calls or []] == ["a", "b"]  # type: ignore[union-attr]


# -- OpenAI Responses ----------------------------------------------------------------------------


async def test_responses_text_tool_call_and_cache(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    first = await oai.responses.create(model="gpt-4.1", instructions=LONG, input="hello there")
    assert first.output_text == "ok: hello there" and first.status == "completed"
    assert first.usage and first.usage.input_tokens > 1024 and first.usage.input_tokens_details.cached_tokens == 0
    app.reply = lambda body, api: WEATHER
    second = await oai.responses.create(model="gpt-4.1", instructions=LONG, input="weather?", tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}])
    call = second.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris", "unit": "c"}
    assert app.requests[-1].path == "/v1/responses"


async def test_responses_stream_helper_and_event_types(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    async with oai.responses.stream(model="gpt-4.1", input="stream me please") as stream:
        final = await stream.get_final_response()
    assert final.output_text == "ok: stream me please"
    raw = await oai.responses.create(model="gpt-4.1", input="again", stream=True)
    kinds = [event.type async for event in raw]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds and "response.output_text.done" in kinds
    app.reply = lambda body, api: WEATHER
    async with oai.responses.stream(model="gpt-4.1", input="weather?") as stream:
        final = await stream.get_final_response()
    assert final.output[0].type == "function_call" and json.loads(final.output[0].arguments)["city"] == "Paris"


async def test_responses_previous_response_id_keeps_the_prefix(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    first = await oai.responses.create(model="gpt-4.1", input=LONG)
    follow = await oai.responses.create(model="gpt-4.1", input="and then?", previous_response_id=first.id)
    assert follow.usage and follow.usage.input_tokens > first.usage.input_tokens  # type: ignore[union-attr]
    assert follow.usage.input_tokens_details.cached_tokens >= 1024
    with pytest.raises(openai.NotFoundError):
        await oai.responses.create(model="gpt-4.1", input="x", previous_response_id="resp_missing")


# -- Anthropic messages --------------------------------------------------------------------------


def claude_kwargs(question: str = "hello", **extra: object) -> dict:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": question}],
        **extra,
    }


async def test_messages_cache_write_then_read(app: FakeProvider, claude: anthropic.AsyncAnthropic) -> None:
    first = await claude.messages.create(**claude_kwargs("first question"))
    assert first.content[0].type == "text" and first.content[0].text == "ok: first question"
    assert first.stop_reason == "end_turn"
    assert first.usage.cache_creation_input_tokens and first.usage.cache_creation_input_tokens > 1024
    assert first.usage.cache_read_input_tokens == 0 and first.usage.input_tokens > 0
    second = await claude.messages.create(**claude_kwargs("second question"))
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    headers = app.last.headers  # SDK versions differ: x-api-key or a bearer token
    assert "sk-ant-test" in (headers.get("x-api-key", ""), headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in headers


async def test_messages_stream_text_and_tool_use(app: FakeProvider, claude: anthropic.AsyncAnthropic) -> None:
    await claude.messages.create(**claude_kwargs())
    async with claude.messages.stream(**claude_kwargs("tell me a story")) as stream:
        texts = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(texts) == "ok: tell me a story" == final.content[0].text  # type: ignore[union-attr]
    assert final.usage.cache_read_input_tokens and final.usage.cache_read_input_tokens > 1024
    assert final.usage.output_tokens > 1

    app.reply = lambda body, api: Reply.tool("get_weather", {"city": "Paris"}, text="Let me check.")
    async with claude.messages.stream(**claude_kwargs("weather?")) as stream:
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Paris"} and final.stop_reason == "tool_use"  # type: ignore[union-attr]


async def test_messages_tool_use_non_streaming(app: FakeProvider, claude: anthropic.AsyncAnthropic) -> None:
    app.reply = lambda body, api: WEATHER
    msg = await claude.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "w?"}])
    block = msg.content[0]
    assert block.type == "tool_use" and block.name == "get_weather" and block.input == {"city": "Paris", "unit": "c"}


async def test_messages_more_than_four_breakpoints_is_a_400(claude: anthropic.AsyncAnthropic) -> None:
    cc = {"type": "ephemeral"}
    content = [{"type": "text", "text": f"part {i}", "cache_control": cc} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4"):
        await claude.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": content}])


async def test_messages_count_tokens_and_models(claude: anthropic.AsyncAnthropic, oai: openai.AsyncOpenAI) -> None:
    count = await claude.messages.count_tokens(model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}], system=LONG)
    assert count.input_tokens > 1024
    assert "claude-sonnet-4-6" in [m.id async for m in claude.models.list()]
    assert "gpt-4o-mini" in [m.id async for m in oai.models.list()]


# -- errors --------------------------------------------------------------------------------------


async def test_scripted_errors_in_each_format(app: FakeProvider, oai: openai.AsyncOpenAI, claude: anthropic.AsyncAnthropic) -> None:
    app.reply = lambda body, api: ErrorReply(429, "slow down")
    with pytest.raises(openai.RateLimitError, match="slow down"):
        await oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    app.reply = lambda body, api: ErrorReply(500, "boom")
    with pytest.raises(anthropic.InternalServerError, match="boom"):
        await claude.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert [r.status for r in app.requests] == [429, 500]


async def test_malformed_requests_are_400(http: httpx.AsyncClient) -> None:
    bad_json = await http.post("/v1/chat/completions", content=b"{nope")
    assert bad_json.status_code == 400 and "error" in bad_json.json()
    no_max = await http.post("/v1/messages", json={"model": "claude-sonnet-4-6", "messages": []})
    assert no_max.status_code == 400 and no_max.json()["error"]["message"] == "max_tokens: Field required"


# -- replies -------------------------------------------------------------------------------------


def test_default_reply_uses_the_last_user_text_not_tool_results() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris today, and tomorrow, please?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "w", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "sunny"}]},
        ]
    }
    assert last_user_text(body, "anthropic.messages").startswith("What is the weather")
    assert default_reply(body, "anthropic.messages").text == "ok: What is the weather in Paris today, and "
    responses = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hey"}]}]}
    assert last_user_text(responses, "openai.responses") == "hey"


# -- agent loops, structured side requests, unknown paths ----------------------------------------


def test_tool_result_pending_in_each_format() -> None:
    ask = {"role": "user", "content": "run it"}
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "hi"}]}
    note = {"role": "system", "content": "Available agents: ..."}  # Claude Code's mid-conversation system message
    assert not tool_result_pending({"messages": [ask]}, "anthropic.messages")
    assert tool_result_pending({"messages": [ask, use, result]}, "anthropic.messages")
    assert tool_result_pending({"messages": [ask, use, result, note]}, "anthropic.messages")
    assert not tool_result_pending({"messages": [ask, use, result, {"role": "user", "content": "next"}]}, "anthropic.messages")

    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    assert tool_result_pending({"messages": [ask, call, {"role": "tool", "tool_call_id": "c", "content": "x"}]}, "openai.chat")
    assert not tool_result_pending({"messages": [ask, call]}, "openai.chat")

    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
             {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"}]
    assert not tool_result_pending({"input": items}, "openai.responses")
    assert tool_result_pending({"input": [*items, {"type": "function_call_output", "call_id": "c", "output": "hi"}]}, "openai.responses")
    assert tool_result_pending({"input": [*items, {"type": "custom_tool_call_output", "call_id": "c", "output": "hi"}]}, "openai.responses")
    assert not tool_result_pending({"input": "just text"}, "openai.responses")


def test_tool_names_in_each_format() -> None:
    assert tool_names({"tools": [{"name": "Bash"}, {"name": "Read"}]}, "anthropic.messages") == ["Bash", "Read"]
    assert tool_names({"tools": [OAI_TOOL]}, "openai.chat") == ["get_weather"]
    assert tool_names({"tools": [{"type": "function", "name": "exec_command"}, {"type": "web_search"}]},
                      "openai.responses") == ["exec_command", "web_search"]
    assert tool_names({}, "openai.chat") == []


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "kind": {"enum": ["bug", "feature"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "done": {"type": "boolean"},
        "size": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
        "owner": {"$ref": "#/$defs/person"},
    },
    "$defs": {"person": {"type": "object", "properties": {"name": {"type": "string"}}}},
}


def test_json_schema_requests_are_recognized_and_answered_with_a_matching_value() -> None:
    example = schema_example(SCHEMA)
    assert example == {"title": "example", "kind": "bug", "tags": ["example"], "done": False, "size": 1,
                       "owner": {"name": "example"}}
    anthropic_body = {"output_config": {"effort": "low", "format": {"type": "json_schema", "schema": SCHEMA}}}
    assert json_schema_of(anthropic_body, "anthropic.messages") == SCHEMA
    assert json_schema_of({"output_format": {"type": "json_schema", "schema": SCHEMA}}, "anthropic.messages") == SCHEMA
    assert json_schema_of({"output_config": {"effort": "high"}}, "anthropic.messages") is None
    assert json_schema_of({"text": {"format": {"type": "json_schema", "name": "t", "schema": SCHEMA}}}, "openai.responses") == SCHEMA
    assert json_schema_of({"text": {"format": {"type": "text"}}}, "openai.responses") is None
    chat = {"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": SCHEMA}}}
    assert json_schema_of(chat, "openai.chat") == SCHEMA
    assert json_schema_of({"response_format": {"type": "json_object"}}, "openai.chat") is None
    reply = structured_reply(anthropic_body, "anthropic.messages")
    assert reply is not None and json.loads(reply.text) == example
    assert structured_reply({"messages": []}, "anthropic.messages") is None


def bash_call(body: dict, api: str) -> Reply | None:
    return Reply.tool("Bash", {"command": "echo hi"}) if "Bash" in tool_names(body, api) else None


async def test_tool_loop_calls_once_then_answers_after_the_result(app: FakeProvider, claude: anthropic.AsyncAnthropic) -> None:
    app.reply = ToolLoop(bash_call, text=lambda body, api: "it printed hi")
    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
    messages: list = [{"role": "user", "content": "say hi"}]
    first = await claude.messages.create(model="claude-sonnet-4-6", max_tokens=50, tools=tools, messages=messages)
    assert first.stop_reason == "tool_use" and first.content[0].type == "tool_use"
    messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "hi"}]}]
    second = await claude.messages.create(model="claude-sonnet-4-6", max_tokens=50, tools=tools, messages=messages)
    assert second.stop_reason == "end_turn" and second.content[0].text == "it printed hi"  # type: ignore[union-attr]
    no_tools = await claude.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "title?"}])
    assert no_tools.content[0].text == "it printed hi"  # type: ignore[union-attr]
    titled = await claude.messages.create(
        model="claude-haiku-4-5", max_tokens=50, tools=tools, messages=[{"role": "user", "content": "name this chat"}],
        extra_body={"output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}})
    assert json.loads(titled.content[0].text) == {"title": "example"}  # type: ignore[union-attr]


async def test_tool_loop_default_text_and_responses_format(app: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    app.reply = ToolLoop(lambda body, api: Reply.tool("exec_command", {"cmd": "echo hi"}))
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    first = await oai.responses.create(model="gpt-4.1", input="say hi", tools=tools)  # type: ignore[arg-type]
    call = first.output[0]
    assert call.type == "function_call" and call.name == "exec_command"
    second = await oai.responses.create(model="gpt-4.1", tools=tools, input=[  # type: ignore[arg-type]
        {"role": "user", "content": "say hi"}, call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "hi"}])
    assert second.output_text == "ok: say hi"  # default_reply once the result is back


async def test_other_paths_are_recorded_and_answered_404_or_405(app: FakeProvider, http: httpx.AsyncClient) -> None:
    r = await http.post("/api/event_logging/batch?x=1", json={"events": []}, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 404 and r.json()["type"] == "error"
    rec = app.last
    assert (rec.method, rec.path, rec.api, rec.status, rec.body) == ("POST", "/api/event_logging/batch", None, 404, {"events": []})
    r = await http.get("/v1/responses")
    assert r.status_code == 405 and r.json()["error"]["type"]
    assert (app.last.method, app.last.path, app.last.status) == ("GET", "/v1/responses", 405)
    assert (await http.get("/v1/models")).status_code == 200  # the served routes still win


# -- over a real socket --------------------------------------------------------------------------


def test_serve_in_thread_with_sync_clients_and_chunk_delay() -> None:
    app = FakeProvider(chunk_delay=0.02)
    with serve_in_thread(app) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        oai = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        assert oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}]).choices[0].message.content == "ok: hi"
        app.reply = lambda body, api: "one two three four five six seven eight"
        started = time.monotonic()
        arrivals = []
        stream = oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic() - started)
        assert len(arrivals) == 8 and arrivals[-1] - arrivals[0] > 0.1  # chunks arrive over time

        claude = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
        with claude.messages.stream(model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            assert s.get_final_message().content[0].text == app.reply({}, "")  # type: ignore[union-attr]
        port = server.port
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
