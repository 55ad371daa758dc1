"""Side requests: calls a coding agent makes for itself, not for the person.

Claude Code and Codex ask the model for a session title, a summary, a topic check or a compaction
on their own. Those requests carry a user message, but it is not a question the person is asking
now: memory there is wasted tokens, and a ledger entry for it would be a block no later request
replays. They are recognised by shape: an agent harness (its own request headers) sending a
request without tools — the agents' main loop always offers tools — or one whose latest user
message opens with a mode marker of the harness (:data:`SIDE_PROMPT_PREFIXES`: Claude Code's
prompt suggestions fork the main loop, tools included). ``side_requests = "inject"`` turns the
rule off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SIDE_PROMPT_PREFIXES", "is_agent_harness", "is_side_request"]

# How a harness opens the user message of a request it makes for itself
SIDE_PROMPT_PREFIXES: tuple[str, ...] = (
    "[SUGGESTION MODE:",  # Claude Code: predict what the user will type next
)

# (header, value prefix) pairs that only the coding agents send; "" matches any value
_HARNESS_SIGNS: tuple[tuple[str, str], ...] = (
    ("x-claude-code-session-id", ""),
    ("user-agent", "claude-cli/"),
    ("originator", "codex"),
    ("user-agent", "codex_"),
)


def is_agent_harness(headers: Mapping[str, str] | None) -> bool:
    """Whether the request comes from a coding agent (Claude Code, Codex) by its headers."""
    if not headers:
        return False
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    return any(name in lowered and lowered[name].strip().lower().startswith(prefix) for name, prefix in _HARNESS_SIGNS)


def is_side_request(body: Mapping[str, Any], headers: Mapping[str, str] | None, user_text: str = "") -> bool:
    """A request an agent harness makes for itself: from a harness, and offering no tools or
    opening its user message (``user_text``, the human text) with a harness mode marker."""
    if not is_agent_harness(headers):
        return False
    return not body.get("tools") or user_text.lstrip().startswith(SIDE_PROMPT_PREFIXES)
