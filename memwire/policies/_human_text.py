"""Human text: what the person typed in a user message, without the text their harness adds.

Coding agents wrap the person's words with text of their own: Claude Code puts
``<system-reminder>`` blocks (agents, skills, the date, file contents) before or after the prompt,
Codex sends ``<environment_context>`` and AGENTS.md instructions as user messages, aider appends
its editing rules (also in its system prompt) to every user message. That text is not the
question: retrieval, the social-closer gate and capture read the human text only. Where the memory
goes does not change: it still goes before the whole latest user message (DESIGN rule 3).

Two rules, both tested:

1. Blocks of the wrapper tags in :data:`HARNESS_TAGS` are removed, with their content
   (``<system-reminder>…</system-reminder>``; an opening tag with attributes counts too), and so
   is a text made only of an "AGENTS.md instructions" header and its ``<INSTRUCTIONS>`` block.
2. A paragraph (text between blank lines) of at least :data:`MIN_REPEATED_CHARS` characters that
   also appears verbatim in the system prompt or an earlier user message is harness text
   (aider's rules, a reminder repeated every turn). If that would leave nothing, the message is
   kept whole: a person may well repeat a question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import chain

__all__ = ["HARNESS_TAGS", "MIN_REPEATED_CHARS", "drop_repeated", "human_text", "strip_wrappers"]

# Tags whose whole block a harness adds around or beside the person's words. Lower case; matched
# case-insensitively. Keep this list documented (docs/clients.md) and tested.
HARNESS_TAGS: tuple[str, ...] = (
    "system-reminder",          # Claude Code: context, reminders, attached file contents
    "environment_context",      # Codex: cwd, sandbox and approval policy, shell
    "user_instructions",        # Codex (older): AGENTS.md contents
    "instructions",             # Codex: "# AGENTS.md instructions for DIR" + <INSTRUCTIONS>
    "user-prompt-submit-hook",  # Claude Code: output of a UserPromptSubmit hook
    "local-command-stdout",     # Claude Code: output of a local slash command
    "local-command-stderr",
    "command-message",          # Claude Code: "<name> is running…" beside a slash command
    "bash-stdout",              # Claude Code: output of a `!` shell command
    "bash-stderr",
    "ide_opened_file",          # IDE integrations: the open file / selection
    "ide_selection",
)

MIN_REPEATED_CHARS = 40  # shorter paragraphs ("Thanks.", "Run it.") are too common to be harness text

_TAG_ALT = "|".join(re.escape(t) for t in HARNESS_TAGS)
_BLOCK = re.compile(rf"<({_TAG_ALT})(?:\s[^<>]*)?>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
# Codex's AGENTS.md message: a heading line whose <INSTRUCTIONS> block rule 1 removes.
_AGENTS_HEADER = re.compile(r"^\s*#\s*AGENTS\.md instructions for [^\n]*$", re.IGNORECASE | re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_BLANKS = re.compile(r"\n{3,}")


def strip_wrappers(text: str) -> str:
    """``text`` without harness wrapper blocks (rule 1), trimmed."""
    if "<" not in text:
        return text.strip()
    out = _BLOCK.sub("", text)
    if out != text:
        out = _AGENTS_HEADER.sub("", out)
        out = _BLANKS.sub("\n\n", out)
    return out.strip()


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def drop_repeated(text: str, earlier: Iterable[str], holding: Sequence[str] | None = None) -> str:
    """``text`` without its long paragraphs that appear verbatim in ``earlier`` texts (rule 2);
    ``text`` itself when every paragraph would go. ``holding``: texts that together hold each of
    ``earlier`` (all of them joined), when the caller keeps them: a paragraph found in none of
    them is in none of ``earlier``, so a long conversation's hundreds of earlier messages are
    searched one by one only for a paragraph that is there."""
    paragraphs = _paragraphs(text)
    long = [p for p in paragraphs if len(p) >= MIN_REPEATED_CHARS]
    if not long:
        return text
    sources: list[str] | None = None
    if holding is None:
        sources = list(earlier)
        holding = ("\x00".join(sources),)  # one search in C first
    found = [p for p in long if any(p in h for h in holding)]
    if not found:
        return text
    if sources is None:
        sources = list(earlier)
    repeated = {p for p in found if any(p in e for e in sources)}
    if not repeated:
        return text
    kept = [p for p in paragraphs if p not in repeated]
    return "\n\n".join(kept) if kept else text


def human_text(parts: Sequence[str], earlier_user: Iterable[str] = (), system: str = "",
               earlier_joined: str | None = None) -> str:
    """What the person typed, from the text parts of one user message.

    ``earlier_user`` are the texts of the earlier user messages and ``system`` the system prompt,
    for rule 2; ``earlier_joined``, when the caller keeps it, holds all of ``earlier_user``
    (joined). Parts that are wholly harness text drop out; the rest are joined."""
    kept = [t for t in (strip_wrappers(p) for p in parts) if t]
    if not kept:
        return ""
    holding = None if earlier_joined is None else (system, earlier_joined)
    return drop_repeated("\n\n".join(kept), chain((system,), earlier_user), holding)
