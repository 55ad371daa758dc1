"""Wrap litellm.completion / acompletion with memwire: same signature, any provider.

Runs without an API key: litellm talks to memwire's fake provider on 127.0.0.1 (OpenAI and
Anthropic wire formats), and the script prints what each provider was sent. Note the Anthropic
request: the system prompt stays in ``system`` unchanged, the memory is a text block of the user's
turn.

    python examples/litellm_completion.py
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before importing litellm: no download

import litellm

from memwire import MemoryStore, Middleware
from memwire.adapters.litellm import wrap
from memwire.testing import FakeProvider, serve_in_thread

litellm.suppress_debug_info = True


def show(title: str, body: dict[str, Any]) -> None:
    print(f"\n--- {title}: what the provider was sent ---")
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

    completion = wrap(litellm.completion, mw)    # <- the added lines
    acompletion = wrap(litellm.acompletion, mw)

    messages = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Which port is the staging database on?"},
    ]
    fake = FakeProvider(lambda body, api: f"(a {api} answer)")
    with serve_in_thread(fake) as server:
        reply = completion(model="openai/gpt-4o-mini", messages=messages,
                           api_base=server.base_url + "/v1", api_key="not-needed")
        show("openai/gpt-4o-mini", fake.last.body)
        print("reply:", reply.choices[0].message.content)

        reply = completion(model="anthropic/claude-sonnet-4-5", messages=messages,
                           api_base=server.base_url, api_key="not-needed", memwire_session="demo")
        show("anthropic/claude-sonnet-4-5", fake.last.body)
        print("reply:", reply.choices[0].message.content)

        async def streamed() -> str:
            stream = await acompletion(
                model="anthropic/claude-sonnet-4-5", stream=True, api_base=server.base_url, api_key="not-needed",
                messages=[*messages, {"role": "assistant", "content": "Port 5433."},
                          {"role": "user", "content": "When do deploys go out?"}],
            )
            return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])

        text = asyncio.run(streamed())
        show("acompletion, streaming, anthropic", fake.last.body)
        print("streamed reply:", text)


if __name__ == "__main__":
    main()
