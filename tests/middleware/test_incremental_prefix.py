"""The incremental read's prefix check (``_incremental``) never accepts a request that changed an
earlier message: whatever changed, and however little (one digit, the role alone, a number's type,
a nested part changed in place by the caller), the facts of the previous request are reused only up
to the first changed message, while the conversation also grew by new messages at its end (so a
check of the new messages alone, or of the count, would pass)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from memwire.middleware._formats import FORMATS, Format, Scan
from memwire.middleware._incremental import Views
from memwire.policies.modes._replay import message_keys, user_keys

APIS = ["openai.chat", "anthropic.messages", "openai.responses"]
TURNS = 40  # 80 messages: a change at 3, in the middle or just before the new ones


def key_of(api: str) -> str:
    return "input" if api == "openai.responses" else "messages"


def conversation(api: str) -> list[dict[str, Any]]:
    text = "input_text" if api == "openai.responses" else "text"
    msgs: list[dict[str, Any]] = []
    for t in range(TURNS):
        if t % 5 == 2:  # some messages with parts (a number inside: its type is part of the identity)
            msgs.append({"role": "user", "content": [{"type": text, "text": f"Which port does service {t} use?"},
                                                      {"type": text, "text": "Be brief.", "n": 1}]})
        else:
            msgs.append({"role": "user", "content": f"Which port does service {t} use?"})
        msgs.append({"role": "assistant", "content": f"Service {t} listens on port {5400 + t}."})
    return msgs


def fresh(value: Any) -> Any:
    """As the proxy parses it: new objects every request."""
    return json.loads(json.dumps(value))


def prefixes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many leading items each ``Format.scan`` call was told it could reuse (0: read whole)."""
    seen: list[int] = []
    scan = Format.scan

    def spy(self: Format, items: list[Any], start: Scan | None = None) -> Scan:
        seen.append(0 if start is None else len(start.roles))
        return scan(self, items, start)

    monkeypatch.setattr(Format, "scan", spy)
    return seen


def full_keys(fmt: Format, body: dict[str, Any]) -> dict[int, str]:
    v = fmt.view(copy.deepcopy(body))
    return message_keys({i: fmt.identity(v.items[i], v.system_text) for i in v.user_indices})


def set_text(msg: dict[str, Any], text: str) -> None:
    if isinstance(msg["content"], list):
        msg["content"][0]["text"] = text
    else:
        msg["content"] = text


def _number_index(msgs: list[dict[str, Any]], start: int) -> int:
    return next(j for j in range(start, len(msgs)) if isinstance(msgs[j]["content"], list))


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("where", [3, TURNS, 2 * TURNS - 3])
@pytest.mark.parametrize("change", ["one digit", "role only", "number type", "swap", "remove and insert"])
def test_a_changed_earlier_message_is_found_however_small(monkeypatch: pytest.MonkeyPatch, api: str, where: int,
                                                          change: str) -> None:
    fmt = FORMATS[api]
    msgs = conversation(api)
    views = Views()
    views.view(fmt, {key_of(api): fresh(msgs)}, "s")
    if change == "number type":  # 1 and True are == in Python, not the same message
        where = _number_index(msgs, min(where, len(msgs) - 6))
        msgs[where]["content"][1]["n"] = True
        changed = where
    elif change == "one digit":
        set_text(msgs[where], (msgs[where]["content"] if isinstance(msgs[where]["content"], str)
                               else msgs[where]["content"][0]["text"]).replace("port", "p0rt"))
        changed = where
    elif change == "role only":
        msgs[where]["role"] = "assistant" if msgs[where]["role"] == "user" else "user"
        changed = where
    elif change == "swap":
        msgs[where], msgs[where + 1] = msgs[where + 1], msgs[where]
        changed = where
    else:
        del msgs[where]
        msgs.insert(min(where + 2, len(msgs)), {"role": "user", "content": "And staging?"})
        changed = where
    msgs += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Which port, then?"}]
    body = {key_of(api): fresh(msgs)}
    seen = prefixes(monkeypatch)
    v = views.view(fmt, body, "s")
    assert seen == [changed]  # the previous request's facts reused up to the changed message only
    monkeypatch.undo()
    assert v == fmt.view(copy.deepcopy(body))
    assert user_keys(fmt, v) == full_keys(fmt, body)


@pytest.mark.parametrize("api", APIS)
def test_a_message_the_caller_changes_in_place_is_found(monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    # an SDK caller sends the same objects again, one of them changed in place (a nested part)
    fmt = FORMATS[api]
    msgs = conversation(api)
    body = {key_of(api): msgs}
    views = Views()
    views.view(fmt, body, "s")
    i = _number_index(msgs, 10)
    msgs[i]["content"][0]["text"] = msgs[i]["content"][0]["text"].replace("port", "p0rt")
    msgs.append({"role": "user", "content": "And the port of the cache?"})
    seen = prefixes(monkeypatch)
    v = views.view(fmt, body, "s")
    assert seen == [i]
    monkeypatch.undo()
    assert v == fmt.view(copy.deepcopy(body)) and user_keys(fmt, v) == full_keys(fmt, body)


@pytest.mark.parametrize("api", APIS)
def test_an_unchanged_conversation_is_not_read_again(monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    # the other side of the check: equal messages in new objects are recognised (the test above
    # would also pass if every request were read whole)
    fmt = FORMATS[api]
    msgs = conversation(api)
    views = Views()
    views.view(fmt, {key_of(api): fresh(msgs)}, "s")
    n = len(msgs)
    msgs.append({"role": "user", "content": "And the port of the cache?"})
    seen = prefixes(monkeypatch)
    views.view(fmt, {key_of(api): fresh(msgs)}, "s")
    assert seen == [n]
