"""Distillation (opt-in): a model reads each finished exchange and names the durable facts in it.

An exchange is finished when the next turn begins: the request of turn N+1 carries turn N's user
message and the assistant's reply, so nothing waits on a response. The worker (the capture
worker, off the request path) sends the model ``PROMPT``, the memories it may update (captured
ones, with ids) and the exchange, and reads back JSON::

    {"memories": [{"text": "...", "kind": "preference|instruction|fact|decision|lesson",
                   "confidence": 0.9, "action": "add|update|ignore", "replaces": "ID or null"}]}

Guards, each tested: memwire's own memory blocks are cut out of the exchange before the model
reads it (no feedback loop re-extracting what memwire injected); a proposal under
``min_confidence``, over ``MAX_TEXT_CHARS``, holding a secret, or restating the system prompt is
dropped; each session may spend ``session_tokens`` (prompt and reply) and no more; invalid JSON,
a failure or a time-out costs a log line. What passes goes through the same write path as an
explicit statement (dedupe, reinforcement, review inbox); an update archives the version it
replaces.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import MissingDependencyError
from .._logs import describe
from .._lru import LRU
from ..memory._model import Memory
from ..policies._screen import screened
from ..policies._tokens import count_tokens
from .formats import format_for

__all__ = [
    "CREDENTIAL_HEADERS",
    "KINDS",
    "MAX_TEXT_CHARS",
    "PROMPT",
    "Complete",
    "Distiller",
    "Proposal",
    "litellm_complete",
    "upstream_complete",
]

log = logging.getLogger("memwire")

Complete = Callable[[list[dict[str, str]]], str]  # messages -> the model's reply text (blocking)

MAX_TEXT_CHARS = 500
MAX_EXCHANGE_CHARS = 12_000  # the tail of a very long exchange: the reply's end says what was decided
KINDS = ("preference", "instruction", "fact", "decision", "lesson")

PROMPT = """You maintain a long-term memory of durable facts about a user and their projects.
Read the exchange below and list what is worth remembering across future conversations:
preferences, standing instructions, facts about the user, the project, its setup and commands,
decisions taken, lessons learned. One short, self-contained statement per memory, in the third
person ("User prefers ...", "The API runs on port 8000").

Do NOT list: the task of the moment or its progress, anything only true for this conversation,
guesses, things the assistant merely suggested and the user did not confirm, credentials or
secrets of any kind, the assistant's own instructions, or anything already in the existing
memories below (unless it changed: then update it).

Answer with JSON only, no prose:
{"memories": [{"text": "...", "kind": "preference|instruction|fact|decision|lesson",
  "confidence": 0.0-1.0, "action": "add" | "update" | "ignore", "replaces": "ID of the memory it updates, or null"}]}
An empty list is the usual answer."""


@dataclass
class Proposal:
    """One memory the model proposes."""

    text: str
    kind: str = "fact"
    confidence: float = 0.0
    action: str = "add"
    replaces: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> Proposal | None:
        """A proposal from the model's JSON, or None when it is not of the documented shape
        (hand-checked: ``import memwire`` stays free of pydantic)."""
        if not isinstance(raw, dict):
            return None
        text, kind, conf = raw.get("text"), raw.get("kind", "fact"), raw.get("confidence")
        action, replaces = raw.get("action", "add"), raw.get("replaces")
        if not (isinstance(text, str) and text.strip() and kind in KINDS and action in ("add", "update", "ignore")):
            return None
        if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 <= conf <= 1:
            return None
        if replaces is not None and not isinstance(replaces, str):
            return None
        return cls(" ".join(text.split()), kind, float(conf), action, replaces or None)


@dataclass
class Distiller:
    """Calls ``complete(messages) -> text`` (blocking, on the capture worker) and filters what it
    proposes. ``complete`` is ``litellm_complete(model)`` for ``distill_model``, or any callable."""

    complete: Complete
    min_confidence: float = 0.7
    session_tokens: int = 20_000
    memo_size: int = 1024

    def __post_init__(self) -> None:
        self._spent: LRU[str, list[int]] = LRU(self.memo_size)

    def propose(self, session: str, exchange: str, existing: Sequence[Memory], system_text: str = "",
                complete: Complete | None = None) -> list[Proposal]:
        """The proposals that pass the guards ([] on any failure: logged, never raised).
        ``complete`` overrides the distiller's own for this exchange (the proxy's upstream)."""
        exchange = exchange[-MAX_EXCHANGE_CHARS:].strip()
        if not exchange:
            return []
        known = "\n".join(f"- [{m.id}] {m.text}" for m in existing) or "(none)"
        messages = [{"role": "system", "content": PROMPT},
                    {"role": "user", "content": f"Existing memories:\n{known}\n\nThe exchange:\n{exchange}"}]
        spent = self._spent.setdefault(session, [0])
        cost = count_tokens(PROMPT + messages[1]["content"])
        if spent[0] + cost > self.session_tokens:
            log.info("memwire: distillation skipped: a session used its %d-token budget", self.session_tokens)
            return []
        spent[0] += cost
        try:
            reply = (complete or self.complete)(messages)
        except Exception as exc:
            log.warning("memwire: distillation failed (%s)", describe(exc))
            return []
        spent[0] += count_tokens(reply)
        return self._accepted(reply, system_text)

    def _accepted(self, reply: str, system_text: str) -> list[Proposal]:
        try:
            data = json.loads(_json_part(reply))
            items = data["memories"] if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise ValueError("'memories' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("memwire: distillation answer is not the JSON asked for (%s; %d chars); nothing stored",
                        describe(exc), len(reply))
            return []
        out = []
        system = _squash(system_text)
        for raw in items:
            p = Proposal.parse(raw)
            if p is None:
                continue
            if p.action == "ignore" or p.confidence < self.min_confidence or len(p.text) > MAX_TEXT_CHARS:
                continue
            if (why := screened(p.text)) is not None:  # the store would refuse it too: the rule, never the text
                log.warning("memwire: distilled memory refused: it looks like it holds a %s (%s)", *why)
                continue
            if system and _squash(p.text) in system:  # the prompt's own rules are not memories
                continue
            out.append(p)
        return out


def _json_part(reply: str) -> str:
    """The JSON in a reply that may wrap it in a code fence or a sentence."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", reply, re.DOTALL)
    text = fenced.group(1) if fenced else reply
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    return text[start:] if start >= 0 else text


def _squash(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def litellm_complete(
    model: str, *, api_base: str | None = None, timeout: float = 30.0
) -> Callable[[list[dict[str, str]]], str]:
    """``complete`` through litellm (the ``memwire[litellm]`` extra): any model litellm can call."""

    def complete(messages: list[dict[str, str]]) -> str:
        try:
            import litellm
        except ImportError:
            raise MissingDependencyError("distill_model needs litellm, which is not installed: "
                                         "pip install 'memwire[litellm]'", name="litellm") from None
        kw: dict[str, Any] = {"api_base": api_base} if api_base else {}
        response = litellm.completion(model=model, messages=messages, temperature=0, timeout=timeout,
                                      num_retries=0, **kw)
        return str(response.choices[0].message.content or "")

    return complete


# What identifies the caller to its provider: the proxy hands these on, and nothing else.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "anthropic-version", "anthropic-beta",
                      "openai-organization", "openai-project")


def upstream_complete(base_url: str, api: str, headers: Mapping[str, str], model: str, *,
                      timeout: float = 30.0) -> Complete:
    """``complete`` through the proxy's own upstream with the caller's credentials (the operator's
    opt-in, ``distill_via_upstream``), in the shape the caller's format gives (``Format.distill_call``):
    Anthropic's messages API for an Anthropic caller, OpenAI's chat completions for the others."""
    auth = {k: v for k, v in headers.items() if k.lower() in CREDENTIAL_HEADERS}
    fmt = format_for(api)  # the call shape is the format's (for Responses: chat completions)

    def complete(messages: list[dict[str, str]]) -> str:
        import httpx

        path, body = fmt.distill_call(model, messages)
        with httpx.Client(timeout=timeout, trust_env=False, follow_redirects=False) as client:
            r = client.post(f"{base_url}{path}", json=body, headers=auth)
        r.raise_for_status()
        return fmt.distill_text(r.json())

    return complete
