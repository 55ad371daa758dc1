"""A wire format owns its API (issue 31 item 3): adding one is a module in
``memwire/middleware/formats/`` plus its line in the registry (docs/architecture.md, "A new wire
format"). Checked two ways: a toy fourth format, registered here the same way, is served by
everything that asks the registry (prepare, the proxy's routes and upstream, usage, replies, a
distillation call); and the API names appear in no module that should not know them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memwire
from memwire import Middleware
from memwire.middleware import formats
from memwire.middleware._reply import ReplyReader, read_reply
from memwire.middleware._usage import Usage, usage_of
from memwire.middleware.formats import FORMATS, Format, ReplyText, format_for, format_for_path
from memwire.middleware.formats._base import count, get, listed

ROOT = Path(memwire.__file__).parent
FORMATS_DIR = ROOT / "middleware" / "formats"

# Modules outside the formats package that still name a wire API, and why: each belongs to another
# engineer's work of issue 31 or is a caller choosing an API on purpose (a default argument, a CLI
# choice, the simulator playing a provider). The list may only shrink: a module that starts naming
# an API fails the test below.
STILL_NAMING = {
    "cli.py": "memwire replay --api: the choices and the echo of system text",
    "_sim/serialize.py": "the simulator's cache model: how each provider serializes a prompt",
    "_sim/fake_provider.py": "the simulator plays the provider of each API",
    "_sim/demo.py": "the demo picks an API for its provider",
    "_sim/cache.py": "the simulator infers an API from a body",
    "middleware/_core.py": "prepare_request(api=\"openai.chat\"), the default the public API keeps",
    "middleware/_prepared.py": "Prepared.api's default and its items (to ask the format)",
    "adapters/openai.py": "the SDK wrapper's paths (to take from the formats)",
    "adapters/anthropic.py": "the SDK wrapper's paths (to take from the formats)",
    "adapters/litellm.py": "litellm's call names -> API, and its chat-only wrapper",
    "adapters/_http.py": "a comment naming an example route",
}


def _names_in(path: Path) -> int:
    apis = "|".join(re.escape(api) for api in FORMATS)
    return len(re.findall(apis, path.read_text(encoding="utf-8")))


def test_no_module_names_a_format_but_its_own() -> None:
    """Inside the formats package a name appears only in its own module (the registry names none);
    outside it, only in the modules listed in STILL_NAMING."""
    own = {fmt.api: Path(type(fmt).__module__.replace(".", "/") + ".py").name for fmt in FORMATS.values()}
    for path in sorted(FORMATS_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for api, module in own.items():
            if path.name != module:
                assert api not in text, f"formats/{path.name} names {api!r}: only formats/{module} may"
    outside = {str(p.relative_to(ROOT)): n for p in sorted(ROOT.rglob("*.py"))
               if FORMATS_DIR not in p.parents and (n := _names_in(p))}
    new = sorted(set(outside) - set(STILL_NAMING))
    assert not new, f"modules that now name a wire API (ask formats.format_for instead): {new}"


# ---------------------------------------------------------------------- a fourth format


class Toy(Format):
    """A Gemini-like API, as small as it can be: ``contents`` of user and model turns whose text
    is in ``parts``; usage in ``usageMetadata``; the reply in ``candidates``."""

    api = "toy.generate"
    paths = ("/v1beta/toy:generateContent",)
    upstream = "openai"
    roles = frozenset({"user", "model"})
    items_key = "contents"

    def text(self, item: Any) -> str:
        return "\n".join(p["text"] for p in listed(item.get("parts")) if isinstance(p.get("text"), str))

    def text_parts(self, item: Any) -> list[str]:
        return [self.text(item)]

    def is_human(self, item: Any) -> bool:
        return bool(self.text(item))

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": "user", "parts": [{"text": text}]}

    def usage(self, usage: Any) -> Usage | None:
        prompt = count(usage, "promptTokenCount")
        return None if prompt is None else Usage(prompt, count(usage, "cachedContentTokenCount") or 0)

    def read_reply(self, out: ReplyText, body: Any) -> None:
        out.usage = get(body, "usageMetadata")
        for i, candidate in enumerate(listed(get(body, "candidates"))):
            for part in listed(get(get(candidate, "content"), "parts")):
                out.add(i, get(part, "text"))

    def read_event(self, out: ReplyText, event: Any) -> None:
        self.read_reply(out, event)

    def distill_call(self, model: str, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        return f"/v1beta/models/{model}:generateContent", {"contents": [{"role": "user", "parts": [{"text": m["content"]}]}
                                                                        for m in messages]}

    def distill_text(self, data: Any) -> str:
        out = ReplyText("")
        self.read_reply(out, data)
        return out.text()


@pytest.fixture
def toy() -> Iterator[Format]:
    fmt = formats.register(Toy())  # the one line a new format adds to formats/__init__.py
    try:
        yield fmt
    finally:
        FORMATS.pop(fmt.api)
        for path in fmt.paths:
            formats._BY_PATH.pop(path)


def test_a_fourth_format_is_served_by_its_registration(toy: Format, tmp_path: Path) -> None:
    assert format_for("toy.generate") is toy and format_for_path("/v1beta/toy:generateContent") is toy

    from memwire.memory._store import MemoryStore
    store = MemoryStore(tmp_path / "mem")
    store.add("The deploy script lives in ops/deploy.sh")
    mw = Middleware(store=store, mode="contextPerTurn")
    body = {"contents": [{"role": "user", "parts": [{"text": "where is the deploy script?"}]}]}
    prepared = mw.prepare_request(body, api="toy.generate", session_id="s")
    contents = prepared.body["contents"]
    assert len(contents) == 2 and "ops/deploy.sh" in contents[0]["parts"][0]["text"]
    assert contents[-1] == body["contents"][0] and len(body["contents"]) == 1  # the caller's body untouched

    reply = {"candidates": [{"content": {"parts": [{"text": "In ops/deploy.sh."}]}}],
             "usageMetadata": {"promptTokenCount": 120, "cachedContentTokenCount": 100}}
    assert read_reply("toy.generate", reply).text == "In ops/deploy.sh."
    assert usage_of("toy.generate", reply["usageMetadata"]) == Usage(120, 100)
    reader = ReplyReader("toy.generate", 200, {"content-type": "text/event-stream"})
    reader.feed(b'data: {"candidates": [{"content": {"parts": [{"text": "In ops/"}]}}]}\n\n'
                b'data: {"candidates": [{"content": {"parts": [{"text": "deploy.sh."}]}}]}\n\n')
    assert reader.text() == "In ops/deploy.sh."


def test_the_proxy_routes_a_fourth_format(toy: Format, tmp_path: Path) -> None:
    from memwire.adapters.server._proxy import create_app, upstream_family
    from memwire.memory._store import MemoryStore

    assert upstream_family("/v1beta/toy:generateContent", {}) == "openai"
    app = create_app(Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn"),
                     openai_upstream="http://upstream.invalid")
    paths = {getattr(route, "path", None) for route in app.routes}
    assert "/v1beta/toy:generateContent" in paths and "/v1/messages" in paths


def test_each_format_shapes_its_distillation_call() -> None:
    messages = [{"role": "system", "content": "extract"}, {"role": "user", "content": "the exchange"}]
    path, body = format_for("anthropic.messages").distill_call("m", messages)
    assert path == "/v1/messages" and body["system"] == "extract" and body["messages"] == messages[1:]
    for api in ("openai.chat", "openai.responses"):  # a Responses caller's upstream is asked in chat completions
        assert format_for(api).distill_call("m", messages) == (
            "/v1/chat/completions", {"model": "m", "temperature": 0, "messages": messages})
    assert format_for("openai.responses").distill_text({"choices": [{"message": {"content": "[]"}}]}) == "[]"
    assert format_for("anthropic.messages").distill_text({"content": [{"type": "text", "text": "[]"}]}) == "[]"


def test_only_anthropic_marks_the_cache() -> None:
    from memwire.middleware._prepared import Injection

    body = {"messages": [{"role": "user", "content": "before"}, {"role": "user", "content": "memory"},
                         {"role": "user", "content": "question"}]}
    injection = Injection("contextPerTurn", ("m1",), text="memory", position=1, placement="message")
    assert format_for("openai.chat").cache_breakpoint(body, injection) is body
    marked = format_for("anthropic.messages").cache_breakpoint(body, injection)
    assert marked["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
