"""A message appended to the caller's own list and then changed in place (an SDK caller that keeps
its message objects) is read again: the incremental read kept a copy of it, not the object.

The property test in test_incremental.py finds this only in its later examples (with 150 examples
per API, not with 40); this is the same case written out, so the property test need not be long
for it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memwire.middleware._formats import FORMATS
from memwire.middleware._incremental import Views


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages", "openai.responses"])
def test_an_appended_message_changed_in_place_is_read_again(api: str) -> None:
    fmt = FORMATS[api]
    items: list[Any] = [{"role": "system", "content": "You are a coding agent."},
                        {"role": "user", "content": "How do I run the tests?"},
                        {"role": "assistant", "content": "Use make test."}]
    body: dict[str, Any] = {"model": "m", ("input" if api == "openai.responses" else "messages"): items}
    views = Views()
    views.view(fmt, body, "hint")
    # the next request: appended to the same list, its content a list of part objects
    part = {"type": "input_text" if api == "openai.responses" else "text", "text": "Which database does staging use?"}
    items += [{"role": "user", "content": [part]}, {"role": "assistant", "content": "Postgres."}]
    assert views.view(fmt, body, "hint").user_indices == [1, 3]
    part["text"] = "<system-reminder>ctx</system-reminder>"  # the caller changes its own part: no longer human text
    items.append({"role": "user", "content": "Thanks!"})
    got = views.view(fmt, body, "hint")
    assert got == fmt.view(json.loads(json.dumps(body)))
    assert got.user_indices == [1, 5]
