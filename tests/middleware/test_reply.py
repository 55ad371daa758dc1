"""The reply reader: the text of a reply of the three APIs, JSON or server-sent events, fed in chunks
of any size. Real-shaped bodies come from the fake provider (what the SDKs parse) and from the
providers' documented shapes for what it does not produce (refusals, thinking, reasoning)."""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwire._sim.fake_provider import Reply
from memwire.middleware._reply import MAX_REPLY_BYTES, ReplyReader, reply_text

from ..replies import APIS, TEXT, recorded

SSE = {"content-type": "text/event-stream; charset=utf-8"}
JSON = {"content-type": "application/json"}


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def read(api: str, body: bytes, headers: dict[str, str], size: int | None = None, status: int = 200,
         ended: bool = True, **kw: Any) -> str | None:
    reader = ReplyReader(api, status, headers, **kw)
    for chunk in chunks(body, size or max(1, len(body))):
        reader.feed(chunk)
    return reader.text(ended)


# ---------------------------------------------------------------------- the fake provider's replies


@pytest.mark.parametrize("size", [None, 1, 7, 4096], ids=["whole", "1", "7", "4096"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_the_text_of_a_reply_in_chunks_of_any_size(api: str, stream: bool, size: int | None) -> None:
    status, headers, body = recorded(api, stream)
    assert status == 200 and headers["content-type"].startswith("text/event-stream" if stream else "application/json")
    assert read(api, body, headers, size) == TEXT


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_tool_calls_are_not_text(api: str, stream: bool) -> None:
    _, headers, body = recorded(api, stream, Reply.tool("Bash", {"command": "ls -la tabs.py"}, text="Let me look."))
    assert read(api, body, headers, 5) == "Let me look."
    _, headers, body = recorded(api, stream, Reply.tool("Bash", {"command": "ls -la tabs.py"}))
    assert read(api, body, headers) is None  # a reply of tool calls only has no text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_an_error_status_is_no_reply(api: str, stream: bool) -> None:
    _, headers, body = recorded(api, stream)
    for status in (400, 429, 500, 529):
        assert read(api, body, headers, status=status) is None


@pytest.mark.parametrize("api", APIS)
def test_a_token_count_is_no_reply(api: str) -> None:
    assert read(api, b'{"input_tokens": 42}', JSON) is None
    assert read(api, b'{"object": "response.input_tokens", "input_tokens": 42}', JSON) is None


# ---------------------------------------------------------------------- shapes the fake does not make


def sse(*events: Any, named: bool = False) -> bytes:
    out = b""
    for e in events:
        head = f"event: {e['type']}\n" if named and isinstance(e, dict) else ""
        out += f"{head}data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode()
    return out


def chat_chunk(*choices: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": i, "delta": d, "finish_reason": None} for i, d in choices]}


def test_chat_refusal_counts_as_text() -> None:
    body = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": None, "refusal": "I can't help with that."}}]}
    assert read("openai.chat", json.dumps(body).encode(), JSON) == "I can't help with that."
    stream = sse(chat_chunk((0, {"role": "assistant", "refusal": ""})), chat_chunk((0, {"refusal": "I can't "})),
                 chat_chunk((0, {"refusal": "help."})), "[DONE]")
    assert read("openai.chat", stream, SSE, 3) == "I can't help."


def test_chat_several_choices_are_joined_by_a_blank_line_in_index_order() -> None:
    body = {"choices": [{"index": 1, "message": {"content": "Spaces."}}, {"index": 0, "message": {"content": "Tabs."}}]}
    assert read("openai.chat", json.dumps(body).encode(), JSON) == "Tabs.\n\nSpaces."
    stream = sse(chat_chunk((1, {"content": "Spa"}), (0, {"content": "Ta"})), chat_chunk((0, {"content": "bs."})),
                 chat_chunk((1, {"content": "ces."})), chat_chunk(), "[DONE]")  # interleaved, and an empty chunk
    assert read("openai.chat", stream, SSE) == "Tabs.\n\nSpaces."


def test_chat_content_as_parts_and_a_prefilter_chunk_without_choices() -> None:
    body = {"choices": [{"index": 0, "message": {"content": [{"type": "text", "text": "Tabs."}]}}]}
    assert read("openai.chat", json.dumps(body).encode(), JSON) == "Tabs."
    stream = sse({"choices": [], "prompt_filter_results": []}, chat_chunk((0, {"content": "Tabs."})), "[DONE]")
    assert read("openai.chat", stream, SSE) == "Tabs."


def test_anthropic_thinking_and_tool_input_are_not_text() -> None:
    body = {"type": "message", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "The user likes tabs.", "signature": "sig"},
        {"type": "text", "text": "Tabs, "}, {"type": "text", "text": "width 4.", "citations": []},
        {"type": "tool_use", "id": "t", "name": "edit", "input": {"text": "not this"}}]}
    assert read("anthropic.messages", json.dumps(body).encode(), JSON) == "Tabs, width 4."
    stream = sse(
        {"type": "message_start", "message": {**body, "content": []}}, {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "likes tabs"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Tabs, width 4."}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {"cited_text": "x"}}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t", "name": "edit", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 1}"}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}, named=True)
    assert read("anthropic.messages", stream, SSE, 11) == "Tabs, width 4."


RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "output": [
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "tabs, as remembered"}]},
    {"type": "message", "id": "msg_1", "role": "assistant", "content": [
        {"type": "output_text", "text": "Tabs, ", "annotations": []}, {"type": "output_text", "text": "width 4."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "edit", "arguments": "{\"not\": \"this\"}"}]}


def test_responses_reasoning_and_function_calls_are_not_text_and_a_refusal_is() -> None:
    assert read("openai.responses", json.dumps(RESPONSE).encode(), JSON) == "Tabs, width 4."
    refused = {"output": [{"type": "message", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]}
    assert read("openai.responses", json.dumps(refused).encode(), JSON) == "I can't help with that."
    stream = sse({"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "I can't."})
    assert read("openai.responses", stream, SSE) == "I can't."


def test_responses_stream_the_completed_copy_wins_and_the_deltas_stand_in_for_it() -> None:
    deltas = [{"type": "response.output_text.delta", "output_index": 1, "content_index": c, "delta": d}
              for c, d in [(0, "Tabs, "), (1, "width "), (1, "4.")]]
    deltas.insert(1, {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"not\""})
    completed = {"type": "response.completed", "response": RESPONSE}
    assert read("openai.responses", sse(*deltas, completed, named=True), SSE, 2) == "Tabs, width 4."
    assert read("openai.responses", sse(completed), SSE) == "Tabs, width 4."  # no deltas: the copy
    assert read("openai.responses", sse(*deltas), SSE) == "Tabs, width 4."  # cut before its end: the deltas
    empty = {"type": "response.completed", "response": {"output": []}}
    assert read("openai.responses", sse(*deltas, empty), SSE) == "Tabs, width 4."  # a server that leaves it out


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_sse_with_other_line_endings_and_multi_line_data(newline: str) -> None:
    event = json.dumps(chat_chunk((0, {"content": "Tabs."})), indent=1)  # JSON over several data: lines
    body = "".join(f"data:{line}{newline}" for line in event.split("\n")) + newline + f"data: [DONE]{newline}{newline}"
    assert read("openai.chat", body.encode(), SSE, 1) == "Tabs."


# ---------------------------------------------------------------------- when the caller closed it first


@pytest.mark.parametrize("api", APIS)
def test_a_stream_closed_before_its_end_counts_only_with_its_end_marker(api: str) -> None:
    _, headers, body = recorded(api, True)
    assert read(api, body, headers, ended=False) == TEXT  # [DONE], message_stop, response.completed read
    marker = {"openai.chat": b"data: [DONE]", "anthropic.messages": b"event: message_stop",
              "openai.responses": b"event: response.completed"}[api]
    cut = body[: body.index(marker)]
    assert read(api, cut, headers, ended=False) is None  # the caller left mid-reply: no verdict on half a reply
    assert read(api, cut, headers, ended=True) is not None  # the body ended there: what was said counts


def test_a_json_body_closed_before_its_end_counts_when_it_parses() -> None:
    _, headers, body = recorded("openai.chat", False)
    assert read("openai.chat", body, headers, ended=False) == TEXT
    assert read("openai.chat", body[:-5], headers, ended=False) is None


# ---------------------------------------------------------------------- garbage, the cap, compression


GARBAGE = [b"", b"not json", b"\xff\xfe\x00", b"[]", b"null", b"42", b'"text"', b'{"choices": "x"}',
           b'{"choices": [null, 1, "x", {"index": "a", "message": 5}]}', b'{"choices": [{"message": {"content": 7}}]}',
           b'{"content": {"type": "text"}}', b'{"content": [{"type": ["text"], "text": "x"}]}',
           b'{"output": [{"type": "message", "content": [{"type": {"a": 1}, "text": "x"}]}]}',
           b'{"output": [{"type": "message", "content": "x"}]}', b"data: {\n\n", b"data: [1, 2]\n\ndata: \"x\"\n\n",
           b'data: {"type": "response.completed", "response": 5}\n\n', b'data: {"choices": [{"delta": []}]}\n\n',
           b'{"a": ' * 100_000]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("headers", [JSON, SSE], ids=["json", "sse"])
def test_garbage_is_no_reply(api: str, headers: dict[str, str]) -> None:
    for body in GARBAGE:
        assert read(api, body, headers, 3) is None, body[:60]


@settings(deadline=None)  # an example on a loaded machine is no failure
@given(body=st.binary(max_size=300), api=st.sampled_from(APIS), stream=st.booleans())
def test_any_bytes_never_raise(body: bytes, api: str, stream: bool) -> None:
    text = read(api, body, SSE if stream else JSON, 7)
    assert text is None or isinstance(text, str)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.sampled_from(
        ["text", "message", "output_text", "content_block_delta", "text_delta", "response.output_text.delta"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["choices", "message", "delta", "content", "text", "type", "index", "output", "refusal", "delta",
         "content_block", "response", "output_index", "content_index"]), inner, max_size=5),
    max_leaves=20)


@settings(deadline=None)
@given(value=JSON_VALUES, api=st.sampled_from(APIS))
def test_any_json_never_raises(value: Any, api: str) -> None:
    for body in (json.dumps(value).encode(), sse(value)):
        for headers in (JSON, SSE):
            text = read(api, body, headers)
            assert text is None or isinstance(text, str)
    reader = ReplyReader(api)
    reader.feed_event(value)
    assert reply_text(api, value) is None or isinstance(reply_text(api, value), str)


def test_past_the_cap_the_text_is_read_from_what_was_kept(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memwire")
    words = [f"w{i} " for i in range(400)]
    body = sse(*(chat_chunk((0, {"content": w})) for w in words), "[DONE]")
    cap = len(body) // 2
    reader = ReplyReader("openai.chat", 200, SSE, cap=cap)
    for chunk in chunks(body, 100):
        reader.feed(chunk)
    assert len(reader._body) == cap  # a copy of the first cap bytes, no more
    text = reader.text()
    assert text and "".join(words).startswith(text) and 100 < len(text) < len("".join(words))
    assert len([r for r in caplog.records if "longer than" in r.getMessage()]) == 1  # once, however many chunks follow
    _, headers, json_body = recorded("openai.chat", False)
    assert read("openai.chat", json_body, headers, cap=len(json_body) - 1) is None  # a cut JSON body: no reply
    assert read("openai.chat", json_body, headers, cap=len(json_body)) == TEXT


def test_events_past_the_cap_are_not_read() -> None:
    reader = ReplyReader("openai.chat", cap=10)
    for word in ["Use ", "tabs ", "always ", "and ", "forever"]:
        reader.feed_event(chat_chunk((0, {"content": word})))
    assert reader.text() == "Use tabs always "  # the event that passed the cap is the last one read


def test_the_default_cap_is_one_mib() -> None:
    assert MAX_REPLY_BYTES == 1 << 20 and ReplyReader("openai.chat").cap == MAX_REPLY_BYTES


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("encoding, compress", [
    ("gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
], ids=["gzip", "deflate", "raw-deflate"])
def test_a_compressed_body_is_read_from_a_decompressed_copy(stream: bool, encoding: str, compress: Any) -> None:
    _, headers, body = recorded("anthropic.messages", stream)
    assert read("anthropic.messages", compress(body), {**headers, "content-encoding": encoding}, 1) == TEXT


def test_a_cut_gzip_stream_is_read_as_far_as_it_goes_and_a_bomb_stops_at_the_cap() -> None:
    _, headers, body = recorded("openai.chat", True)
    packed = gzip.compress(body)
    text = read("openai.chat", packed[: len(packed) * 2 // 3], {**headers, "content-encoding": "gzip"})
    assert text and TEXT.startswith(text) and text != TEXT
    bomb = gzip.compress(b"data: " + b" " * 50_000_000)
    assert read("openai.chat", bomb, {**SSE, "content-encoding": "gzip"}) is None


def test_other_encodings_are_not_read(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="memwire")
    _, headers, body = recorded("openai.chat", False)
    assert read("openai.chat", body, {**headers, "content-encoding": "br"}) is None
    assert "'br' encoding is not read" in caplog.text


# ---------------------------------------------------------------------- SDK objects


def test_sdk_objects_read_like_their_json() -> None:
    from anthropic.types import Message
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    for api, cls in [("openai.chat", ChatCompletion), ("anthropic.messages", Message), ("openai.responses", Response)]:
        _, _, body = recorded(api, False)
        sdk_object = cls.model_validate({**json.loads(body), "usage": None} if api == "openai.responses" else json.loads(body))
        assert reply_text(api, sdk_object) == TEXT


def test_an_unknown_api_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown api 'openai.completions'"):
        ReplyReader("openai.completions")


# ---------------------------------------------------------------------- the tap


def test_the_tap_hands_the_text_over_once_and_parses_a_big_body_off_the_callers_thread(tmp_path: Any) -> None:
    import threading

    from memwire import MemoryStore, Middleware
    from memwire.middleware._core import Injection
    from memwire.middleware._reply import INLINE_BYTES, tap_reply

    mw = Middleware(store=MemoryStore(tmp_path / "mem"))
    seen: list[tuple[str, str]] = []
    done = threading.Event()
    mw.observe_reply = lambda injection, text: (seen.append((threading.current_thread().name, text)), done.set())  # type: ignore[method-assign]
    assert tap_reply(mw, None, "openai.chat") is None and tap_reply(mw, Injection("startup"), "openai.chat") is None
    injection = Injection("contextPerTurn", memory_ids=("m1",))
    for text in ("small", "big " * (INLINE_BYTES // 4)):
        done.clear()
        tap = tap_reply(mw, injection, "openai.chat", 200, JSON)
        assert tap is not None
        tap.feed(json.dumps({"choices": [{"index": 0, "message": {"content": text}}]}).encode())
        tap.finish()
        tap.finish(ended=False)  # a close after the end: nothing more
        assert done.wait(5)
    small, big = seen
    assert small == (threading.current_thread().name, "small")
    assert big[0].startswith("memwire-reply") and big[1].startswith("big big")
    assert len(seen) == 2
