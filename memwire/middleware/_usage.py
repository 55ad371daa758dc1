"""What the provider says a call cost: prompt tokens, how many of them it read from its prompt
cache, how many it wrote to it, and output tokens, from a reply of any API.

The fields differ by API; each format reads its own (``Format.usage``, in that API's module of
:mod:`memwire.middleware.formats`) into :class:`Usage`, one shape for all of them. Servers that send
none leave ``Usage`` unknown (None), never zeros that would read as "no cache".
"""

from __future__ import annotations

from typing import Any

from .formats import Usage, format_for
from .formats.anthropic_messages import merged

__all__ = ["Usage", "merged", "usage_of"]


def usage_of(api: str, usage: Any) -> Usage | None:
    """The :class:`Usage` of an API's ``usage`` object (a dict or an SDK object), or None when it
    says nothing about the prompt."""
    return format_for(api).usage(usage)
