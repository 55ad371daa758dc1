"""Helpers shared by the adapters: per-call keyword arguments, fail-open logging, role forcing."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..middleware.core import Prepared

__all__ = ["SESSION_KW", "NAMESPACE_KW", "split_kwargs", "fail_open", "memory_as_user", "as_list"]

log = logging.getLogger("memwire")

SESSION_KW = "memwire_session"
NAMESPACE_KW = "memwire_namespace"


def split_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """Take memwire's own keyword arguments out of a call's kwargs (a new dict; the caller's is kept).

    Returns (kwargs for the real call, session, namespace)."""
    call = dict(kwargs)
    session = call.pop(SESSION_KW, None)
    namespace = call.pop(NAMESPACE_KW, None)
    return call, session, namespace


def as_list(call: dict[str, Any], key: str) -> None:
    """SDKs accept any iterable of messages; the middleware reads lists. A one-shot iterator is
    materialized here so the same list serves memwire and, on fail-open, the real call."""
    value = call.get(key)
    if value is not None and not isinstance(value, (list, str, bytes, Mapping)) and isinstance(value, Iterable):
        call[key] = list(value)


def fail_open(where: str, exc: BaseException) -> None:
    """One warning per failed call; the request then goes out unchanged (DESIGN rule 6)."""
    log.warning("memwire: %s failed (%s: %s); request sent unchanged", where, type(exc).__name__, exc)


def memory_as_user(p: Prepared) -> Prepared:
    """Give an inserted memory message the ``user`` role.

    litellm turns ``developer`` into ``system`` and hoists the leading system messages into the
    system field of Anthropic, Gemini, Bedrock, ...; a system-role memory message there would change
    the provider's system prompt on every turn and lose its cache (DESIGN rule 2)."""
    inj = p.injection
    if inj is None or not inj.injected or inj.placement != "message" or inj.position is None:
        return p
    key = "input" if p.api == "openai.responses" else "messages"
    items = p.body.get(key)
    if not isinstance(items, list) or not 0 <= inj.position < len(items):
        return p
    item = items[inj.position]
    if isinstance(item, Mapping) and item.get("role") in ("system", "developer"):
        items = list(items)
        items[inj.position] = {**item, "role": "user"}
        p.body = {**p.body, key: items}
    return p
