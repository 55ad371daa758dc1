"""The callback module that examples/litellm_proxy_config.yaml names:

    litellm_settings:
      callbacks: memwire_callback.proxy_handler_instance

The proxy imports this file from the config's directory. The middleware comes from the
configuration (MEMWIRE_* variables, ./memwire.toml once trusted; MEMWIRE_DIR is the memory
directory), and starts loading the memories and token encodings in the background as soon as the
proxy imports this file.

    LITELLM_MASTER_KEY=sk-... MEMWIRE_DIR=/srv/memwire litellm --config examples/litellm_proxy_config.yaml

Requests made with the master key use the default namespace (the files in MEMWIRE_DIR itself, where
`memwire add --dir /srv/memwire ...` writes); a virtual key uses its user's, else its alias's namespace.

Run it directly for a demo without the proxy server or an API key: it routes requests with the
config's model_list (litellm's Router, as the proxy does) to a fake provider on 127.0.0.1, calls the
hook exactly as the proxy does before each call, and prints what the provider was sent.

    python examples/memwire_callback.py
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before importing litellm: no download

from memwire.adapters.litellm import MemwireCallback  # noqa: E402

proxy_handler_instance = MemwireCallback()  # Middleware.from_config()


def demo() -> None:
    import asyncio
    import json
    import tempfile
    from pathlib import Path

    import litellm
    import yaml
    from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

    from memwire import MemoryStore
    from memwire.adapters.litellm import ADMIN_USER_ID, MASTER_KEY_ALIAS
    from memwire.testing import FakeProvider, serve_in_thread

    litellm.suppress_debug_info = True
    memory_dir = tempfile.mkdtemp(prefix="memwire-example-")
    default = MemoryStore(memory_dir)  # the master key's requests use this one (memwire add --dir memory_dir)
    default.add("The staging database is Postgres 15 on port 5433", tags=["infra"])
    default.add("Deploys go out on Tuesdays only", tags=["process"])
    default.add("The API server is FastAPI", tags=["build"])
    alice = MemoryStore.for_namespace(memory_dir, "alice")  # the proxy user "alice" sees only these
    alice.add("Alice prefers tabs over spaces, width 4, in every Python file", tags=["preference"])
    alice.add("Alice's team deploys on Thursdays", tags=["process"])
    alice.add("Alice's editor is Helix", tags=["tools"])

    config = yaml.safe_load((Path(__file__).parent / "litellm_proxy_config.yaml").read_text())
    fake = FakeProvider(lambda body, api: f"(a {api} answer)")
    with serve_in_thread(fake) as server:
        os.environ.update(
            MEMWIRE_DIR=memory_dir, ANTHROPIC_API_KEY="not-needed", OPENAI_API_KEY="not-needed",
            ANTHROPIC_API_BASE=server.base_url, OPENAI_API_BASE=server.base_url + "/v1",
        )
        callback = MemwireCallback()  # built from the configuration, as the proxy's instance is
        # what the proxy's auth hands the hook for the master key: litellm's admin user
        master_key = UserAPIKeyAuth(token=MASTER_KEY_ALIAS, user_id=ADMIN_USER_ID, user_role=LitellmUserRoles.PROXY_ADMIN)
        router = litellm.Router(model_list=config["model_list"])

        def show(title: str, body: dict) -> None:
            print(f"\n--- {title}: what the provider was sent ---")
            if "system" in body:
                print("system:", json.dumps(body["system"]))
            for message in body["messages"]:
                print(json.dumps(message))

        async def proxy_request(user: UserAPIKeyAuth, data: dict, call_type: str) -> None:
            data = await callback.async_pre_call_hook(user, None, data, call_type)  # what the proxy does
            if call_type == "anthropic_messages":
                await router.aanthropic_messages(**data)
            else:
                await router.acompletion(**data)

        async def run() -> None:
            question = [{"role": "system", "content": "You are a careful coding agent."},
                        {"role": "user", "content": "Tabs or spaces, and when do we deploy?"}]
            alice_key = UserAPIKeyAuth(api_key="sk-alice", user_id="alice")  # a virtual key of user alice
            await proxy_request(alice_key, {"model": "claude", "messages": question,
                                            "metadata": {"memwire_session": "alice-1"}}, "acompletion")
            show("POST /v1/chat/completions, model 'claude', a virtual key of user alice", fake.last.body)
            await proxy_request(master_key, {"model": "gpt", "messages": question}, "acompletion")
            show("POST /v1/chat/completions, model 'gpt', master key (default namespace)", fake.last.body)
            anthropic_format = {"model": "claude", "max_tokens": 256, "system": "You are a careful coding agent.",
                                "messages": [{"role": "user", "content": "Which port is staging on?"}]}
            await proxy_request(master_key, anthropic_format, "anthropic_messages")
            show("POST /v1/messages, model 'claude', master key", fake.last.body)

        asyncio.run(run())


if __name__ == "__main__":
    demo()
