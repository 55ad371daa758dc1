"""Which client sent a request, by name, for the page's sessions: a fixed list of known clients
matched on their headers. Only the name is kept (never a header's value: a user agent can carry
a machine's or a person's details); a client not on the list is ``other``."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["client_name"]

# (header, lowercase value prefix or "" for any value, name); the first match wins
_SIGNS: tuple[tuple[str, str, str], ...] = (
    ("x-claude-code-session-id", "", "claude-code"),
    ("user-agent", "claude-cli/", "claude-code"),
    ("originator", "codex", "codex"),
    ("user-agent", "codex", "codex"),
    ("user-agent", "aider", "aider"),
    ("user-agent", "litellm", "litellm"),
    ("user-agent", "openai/python", "openai-python"),
    ("user-agent", "openai/js", "openai-node"),
    ("user-agent", "anthropic/python", "anthropic-python"),
    ("user-agent", "anthropic/js", "anthropic-node"),
    ("user-agent", "python-httpx/", "httpx"),
    ("user-agent", "curl/", "curl"),
)


def client_name(headers: Mapping[str, str]) -> str:
    """The known client ``headers`` come from, ``other`` for an unknown one, "" without a user agent."""
    for header, prefix, name in _SIGNS:
        value = headers.get(header)
        if value is not None and value.strip().lower().startswith(prefix):
            return name
    return "other" if headers.get("user-agent") else ""
