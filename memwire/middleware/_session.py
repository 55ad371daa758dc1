"""Session keys: which conversation a request belongs to.

Which conversation a request belongs to, first match wins (DESIGN "Session identity"):

1. the caller's ``session_id`` argument, then the ``x-memwire-session`` header;
2. a conversation id the client sends: Claude Code's ``x-claude-code-session-id`` header (with
   ``x-claude-code-agent-id`` for a subagent's own conversation), Codex's ``session-id`` /
   ``thread-id`` headers (older: ``session_id``, ``conversation_id``), ``x-session-id``, an
   Anthropic ``metadata.user_id`` that names a session (Claude Code's JSON ``{"session_id": …}``
   or ``…_session_<uuid>``), the Responses ``conversation``;
3. a user-level signal (an Anthropic ``metadata.user_id`` without a session, OpenAI
   ``prompt_cache_key`` or ``user``) together with the derived key below: one user's
   conversations stay apart, and so do different users' conversations that open alike;
4. a key derived from the system prompt and the first user message.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["SESSION_HEADERS", "resolve_session", "session_hint", "session_signals"]

# Headers that carry a client's own conversation id, in order of preference (lower case).
SESSION_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-memwire-session", ""),
    ("x-claude-code-session-id", "claude-code:"),
    ("session-id", "session:"),          # Codex 0.169 (with thread-id, the same id)
    ("thread-id", "session:"),
    ("session_id", "session:"),          # Codex (older versions)
    ("conversation_id", "conversation:"),
    ("x-session-id", "session:"),
)
_NAMED_SESSION = re.compile(r"session[_-]?[0-9a-fA-F][0-9a-fA-F-]{7,}")


def _h(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def _derived(system_text: str, first_user_text: str) -> str:
    """The last resort: a hash of the system prompt and the first user message."""
    return "auto:" + _h(system_text, first_user_text)


def resolve_session(
    given: str | None, headers: Mapping[str, str] | None, body: Mapping[str, Any],
    system_text: str, first_user_text: str, signals: tuple[str, str] | None = None,
) -> str:
    """The session of a request, by the order in this module's docstring (``signals``: what
    ``session_signals`` says of it, when already asked)."""
    named, user = signals if signals is not None else session_signals(given, headers, body)
    if named:
        return named
    if user:
        return user + _h(system_text, first_user_text)
    return _derived(system_text, first_user_text)


def session_hint(signals: tuple[str, str]) -> str:
    """What the caller and the client say of the session (``session_signals``), without reading
    the messages: the session itself when they name it, else the user-level signal ("" when none)."""
    named, user = signals
    return named or user or ""


def session_signals(given: str | None, headers: Mapping[str, str] | None, body: Mapping[str, Any]) -> tuple[str, str]:
    """(the session when the caller or client names one, the user-level prefix of rule 3), "" when none."""
    if given:
        return str(given), ""
    if headers:
        lowered = {str(k).lower(): v for k, v in headers.items()}
        for name, prefix in SESSION_HEADERS:
            value = lowered.get(name)
            if isinstance(value, str) and value.strip():
                agent = lowered.get("x-claude-code-agent-id", "").strip() if prefix == "claude-code:" else ""
                # a Claude Code subagent is a conversation of its own inside the session
                return prefix + value.strip() + (f":agent:{agent}" if agent else ""), ""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if isinstance(user_id, str):
        named = _session_in_user_id(user_id)
        if named:
            return "anthropic-user:" + named, ""
    conversation = body.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return "conversation:" + conversation, ""
    for name, value in (("user_id", user_id), ("prompt_cache_key", body.get("prompt_cache_key")),
                        ("user", body.get("user"))):
        if isinstance(value, str) and value:
            return "", f"{name}:{value}:"
    return "", ""


def _session_in_user_id(user_id: str) -> str | None:
    """The session an Anthropic ``metadata.user_id`` names: Claude Code sends a JSON object with a
    ``session_id`` (2.1) or ``user_<hash>_account_<uuid>_session_<uuid>`` (earlier versions)."""
    if user_id.startswith("{"):
        try:
            data = json.loads(user_id)
        except ValueError:
            return None
        session = data.get("session_id") if isinstance(data, dict) else None
        return f"session:{session}" if isinstance(session, str) and session else None
    return user_id if _NAMED_SESSION.search(user_id) else None
