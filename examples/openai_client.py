"""Wrap an OpenAI client with memwire: one added line, the rest of the code unchanged.

The wrapped client is still an ``OpenAI`` client (instructor, the Agents SDK and your own code take
it as it is); its HTTP transport adds the memory. Runs without an API key: the client talks to
memwire's fake provider on 127.0.0.1, and the script prints what the model was sent.

    python examples/openai_client.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from openai import AsyncOpenAI, OpenAI

from memwire import MemoryStore, Middleware
from memwire.adapters.openai import wrap
from memwire.testing import FakeProvider, serve_in_thread


def show(title: str, body: dict[str, Any], key: str) -> None:
    print(f"\n--- {title}: what the model was sent ({key}) ---")
    for item in body[key]:
        print(json.dumps(item, ensure_ascii=False))


def main() -> None:
    memory_dir = tempfile.mkdtemp(prefix="memwire-example-")
    store = MemoryStore(memory_dir)
    store.add("User prefers tabs over spaces, width 4, in every Python file", tags=["preference"])
    store.add("Deploys go out on Tuesdays only, via the GitHub Actions deploy workflow", tags=["process"])
    store.add("The staging database is Postgres 15 on port 5433", tags=["infra"])
    mw = Middleware(store=store, mode="contextPerTurn")

    fake = FakeProvider()
    with serve_in_thread(fake) as server:
        client = OpenAI(base_url=server.base_url + "/v1", api_key="not-needed")
        client = wrap(client, mw)  # <- the one added line
        print("still an OpenAI client:", isinstance(client, OpenAI))

        messages: list[Any] = [
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Which port is the staging database on?"},
        ]
        # the session (and the namespace) of one call: headers memwire reads and removes
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                               extra_headers={"x-memwire-session": "demo"})
        show("chat.completions.create", fake.last.body, "messages")
        print("reply:", reply.choices[0].message.content)
        print("the caller's list still has", len(messages), "messages")

        # every path goes through the transport: here the stream() helper
        with client.chat.completions.stream(
            model="gpt-4o-mini", extra_headers={"x-memwire-session": "demo"},
            messages=[*messages, {"role": "assistant", "content": "Port 5433."},
                      {"role": "user", "content": "Tabs or spaces for this script?"}],
        ) as stream:
            text = stream.get_final_completion().choices[0].message.content
        show("chat.completions.stream()", fake.last.body, "messages")
        print("streamed reply:", text)
        print("memwire headers that reached the provider:", [h for h in fake.last.headers if h.startswith("x-memwire")])

        async def responses_api() -> None:
            aclient = wrap(AsyncOpenAI(base_url=server.base_url + "/v1", api_key="not-needed"), mw)
            await aclient.responses.create(model="gpt-4o-mini", instructions="Be brief.",
                                           input="When do deploys go out?")
            print(f"\ninstructions sent: {fake.last.body['instructions']!r} (unchanged)")
            show("AsyncOpenAI responses.create", fake.last.body, "input")

        asyncio.run(responses_api())


if __name__ == "__main__":
    main()
