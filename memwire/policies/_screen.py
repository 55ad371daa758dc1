"""What may never become a memory, on every write path (``memwire add``, the HTTP API, MCP, the
memory tool, capture, distillation, import): one decision, called by the stores' ``_checked``.

The answer names the rule, never the text: a refusal travels back to clients and into logs.
"""

from __future__ import annotations

from ._secrets import find_secret

__all__ = ["refusal"]


def refusal(text: str) -> str | None:
    """Why ``text`` may not be stored as a memory, or None. Never repeats any of ``text``."""
    kind = find_secret(text)
    if kind is not None:
        return (f"not stored: the text looks like it holds a secret ({kind}). Memory is shown to models in "
                "later sessions; remember where the secret is kept, never its value")
    return None
