"""Secrets that must never become a memory.

Captured text is refused (never redacted and stored) when it holds something of these shapes: a
memory is shown to a model on later turns, possibly in another tool, and a half-redacted credential
is still a hint. The patterns are the well-known prefixes of provider keys and tokens, private key
blocks, credentials in URLs, a ``password``/``token``/``secret``/``api key`` followed by a value
(a value with a digit or a symbol, or of 16 or more characters),
and long random-looking strings (upper and lower case letters and digits mixed, 32 or more
characters) that are most likely keys.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_PATTERNS", "find_secret"]

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("credentials in a URL", re.compile(r"[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@", re.IGNORECASE)),
    ("password or token", re.compile(
        r"\b(?:password|passwd|passphrase|pwd|secret|token|api[ _-]?key|access[ _-]?key|client[ _-]?secret)"
        r"s?\b\s*(?:is|was|=|:)\s*[\"'`]?"
        # a value with a digit or a symbol ("hunter2"), or a long one: "the token is refreshed" passes
        r"(?:(?=[^\s\"'`]*[\d!@#$%^&*_+=~-])[^\s\"'`]{4,}|[^\s\"'`]{16,})", re.IGNORECASE)),
)
# Long, random-looking strings: letters of both cases and digits, 32+ characters. Hex digests
# (commit ids, checksums) are all lower case and pass.
_RANDOM = re.compile(r"(?<![\w/.-])[A-Za-z0-9_+/=-]{32,}(?![\w/.-])")


def _looks_random(token: str) -> bool:
    return any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)


def find_secret(text: str) -> str | None:
    """The kind of secret ``text`` seems to hold ("OpenAI API key", ...), or None."""
    for name, pattern in SECRET_PATTERNS:
        if pattern.search(text):
            return name
    if any(_looks_random(m.group()) for m in _RANDOM.finditer(text)):
        return "random-looking key"
    return None
