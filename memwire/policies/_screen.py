"""What may never become a memory, on every write path (``memwire add``, the HTTP API, MCP, the
memory tool, capture, distillation, import): one decision, called by the stores' ``_checked``.

Two rules:

- a secret (``policies._secrets.find_secret``: credentials with their values, provider keys and
  tokens, card numbers, national ids, random-looking keys);
- a control character: NUL, ESC (the start of every terminal escape sequence: colours, cursor
  moves, OSC titles and hyperlinks, clipboard writes), BEL, DEL, and every other C0 or C1
  control except tab and newline (a carriage return only as part of a CRLF line end). Memory is
  plain text shown in terminals, pages and prompts; a control character there is a hidden
  instruction to whatever displays it.

The answer names the rule, never the text: a refusal travels back to clients and into logs.
"""

from __future__ import annotations

import re

from ._secrets import find_secret

__all__ = ["control_character", "refusal", "screened"]

# C0 but tab and newline, a CR not before LF, DEL, C1
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "BS", 0x0B: "VT", 0x0C: "FF", 0x0D: "CR", 0x1B: "ESC", 0x7F: "DEL",
          0x84: "IND", 0x85: "NEL", 0x8D: "RI", 0x90: "DCS", 0x9B: "CSI", 0x9C: "ST", 0x9D: "OSC"}


def control_character(text: str) -> str | None:
    """The first control character ``text`` holds that memory may not ("U+001B ESC"), or None."""
    m = _CONTROL.search(text)
    if m is None:
        return None
    code = ord(m.group())
    return f"U+{code:04X} {_NAMES.get(code, 'C1 control' if code >= 0x80 else 'C0 control')}"


def screened(text: str) -> tuple[str, str] | None:
    """Why ``text`` may not be stored, as (rule, what matched): ("secret", "password"),
    ("control character", "U+001B ESC"); or None. Never any of ``text``."""
    control = control_character(text)
    if control is not None:
        return "control character", control
    kind = find_secret(text)
    if kind is not None:
        return "secret", kind
    return None


def refusal(text: str) -> str | None:
    """Why ``text`` may not be stored as a memory, or None. Never repeats any of ``text``."""
    why = screened(text)
    if why is None:
        return None
    rule, what = why
    if rule == "control character":
        return (f"not stored: the text holds a control character, {what}. Memory is plain text shown in "
                "terminals, pages and prompts: tab and newline are the only control characters it may hold")
    return (f"not stored: the text looks like it holds a secret ({what}). Memory is shown to models in "
            "later sessions; remember where the secret is kept, never its value")
