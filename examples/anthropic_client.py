"""Wrap an Anthropic client with memwire: one added line, the rest of the code unchanged.

The wrapped client is still an ``Anthropic`` client; its HTTP transport adds the memory to every
Messages request (``create``, ``stream``, ``count_tokens``, ``beta.messages``). Runs without an API
key: the client talks to memwire's fake provider on 127.0.0.1, and the script prints what the model
was sent.

    python examples/anthropic_client.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from anthropic import Anthropic, AsyncAnthropic

from memwire import MemoryStore, Middleware
from memwire.adapters.anthropic import wrap
from memwire.testing import FakeProvider, serve_in_thread

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."


def show(title: str, body: dict[str, Any]) -> None:
    print(f"\n--- {title}: what the model was sent ---")
    if "system" in body:
        print("system:", json.dumps(body["system"], ensure_ascii=False))
    for message in body["messages"]:
        print(json.dumps(message, ensure_ascii=False))


def main() -> None:
    memory_dir = tempfile.mkdtemp(prefix="memwire-example-")
    store = MemoryStore(memory_dir)
    store.add("User prefers tabs over spaces, width 4, in every Python file", tags=["preference"])
    store.add("Deploys go out on Tuesdays only, via the GitHub Actions deploy workflow", tags=["process"])
    store.add("The staging database is Postgres 15 on port 5433", tags=["infra"])
    mw = Middleware(store=store, mode="contextPerTurn")

    fake = FakeProvider()
    with serve_in_thread(fake) as server:
        client = Anthropic(base_url=server.base_url, api_key="not-needed")
        client = wrap(client, mw, session="demo")  # <- the one added line (with a default session)
        print("still an Anthropic client:", isinstance(client, Anthropic))

        messages: list[Any] = [{"role": "user", "content": "Which port is the staging database on?"}]
        reply = client.messages.create(model=MODEL, max_tokens=256, system=SYSTEM, messages=messages)
        show("messages.create", fake.last.body)
        print("reply:", reply.content[0].text)  # type: ignore[union-attr]
        print("the caller's list still has", len(messages), "message")

        messages += [{"role": "assistant", "content": "Port 5433."},
                     {"role": "user", "content": "Tabs or spaces for this script?"}]
        with client.messages.stream(model=MODEL, max_tokens=256, system=SYSTEM, messages=messages) as stream:
            text = stream.get_final_text()
        show("messages.stream (the earlier block is replayed where it was)", fake.last.body)
        print("streamed reply:", text)

        count = client.messages.count_tokens(model=MODEL, system=SYSTEM, messages=messages)
        print("\ncount_tokens counts the request with its memory:", count.input_tokens, "tokens")

        async def async_client() -> None:
            aclient = wrap(AsyncAnthropic(base_url=server.base_url, api_key="not-needed"), mw)
            await aclient.messages.create(
                model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "When do deploys go out?"}],
                extra_headers={"x-memwire-session": "other"},  # per call: memwire reads and removes it
            )
            show("AsyncAnthropic messages.create", fake.last.body)
            print("memwire headers that reached the provider:",
                  [h for h in fake.last.headers if h.startswith("x-memwire")])

        asyncio.run(async_client())


if __name__ == "__main__":
    main()
