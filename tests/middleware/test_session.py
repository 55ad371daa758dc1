"""Session identity: the caller's key, then the client's own signals, then a derived key."""

from __future__ import annotations

from typing import Any

import pytest

from memwire.middleware._session import resolve_session

SYS, FIRST = "You are a helpful assistant.", "Plan the migration"
CC_USER = "user_ab12cd34_account_1f2e3d4c-0000-4000-8000-000000000001_session_9a8b7c6d-1111-4222-8333-444455556666"


def resolve(headers: dict[str, str] | None = None, body: dict[str, Any] | None = None, given: str | None = None,
            first: str = FIRST) -> str:
    return resolve_session(given, headers, body or {}, SYS, first)


def test_the_order_of_signals() -> None:
    body = {"metadata": {"user_id": CC_USER}, "prompt_cache_key": "pck", "user": "u1"}
    headers = {"X-Memwire-Session": "mine", "x-claude-code-session-id": "cc", "session_id": "codex"}
    assert resolve(headers, body, given="arg") == "arg"
    assert resolve(headers, body) == "mine"
    headers.pop("X-Memwire-Session")
    assert resolve(headers, body) == "claude-code:cc"
    assert resolve({**headers, "x-claude-code-agent-id": "a7"}, body) == "claude-code:cc:agent:a7"
    headers.pop("x-claude-code-session-id")
    assert resolve(headers, body) == "session:codex"
    assert resolve({"session-id": "0199", "thread-id": "0199"}, body) == "session:0199"  # Codex 0.169
    assert resolve({"conversation_id": "old-codex"}, body) == "conversation:old-codex"
    assert resolve({}, body) == "anthropic-user:" + CC_USER
    as_json = '{"device_id":"511b","account_uuid":"","session_id":"45bf-6b7"}'  # Claude Code 2.1
    assert resolve({}, {"metadata": {"user_id": as_json}}) == "anthropic-user:session:45bf-6b7"
    no_session = '{"device_id":"511b","account_uuid":""}'
    assert resolve({}, {"metadata": {"user_id": no_session}}).startswith("user_id:")
    assert resolve({}, {"conversation": {"id": "conv_1"}}) == "conversation:conv_1"
    assert resolve({}, {"conversation": "conv_2"}) == "conversation:conv_2"


@pytest.mark.parametrize("body", [{"metadata": {"user_id": "customer-7"}}, {"prompt_cache_key": "app-v1"}, {"user": "u1"}])
def test_user_level_signals_are_combined_with_the_opening(body: dict[str, Any]) -> None:
    a, b = resolve(body=body), resolve(body=body, first="Something else entirely")
    assert a != b, "one user's two conversations must stay apart"
    assert a == resolve(body=body)  # and each is stable
    assert a != resolve(body={k: (v if not isinstance(v, str) else v + "x") for k, v in body.items()}
                        if "metadata" not in body else {"metadata": {"user_id": "customer-8"}})


def test_without_signals_the_key_is_derived_from_the_opening() -> None:
    assert resolve().startswith("auto:") and resolve() == resolve()
    assert resolve() != resolve(first="Another opening")
    assert resolve({"session_id": "   "}).startswith("auto:")
