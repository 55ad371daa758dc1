"""The modes as policy objects: validated on construction, one registry, a mode object as the
middleware's mode, and a new mode added with one class and one registry line."""

from __future__ import annotations

from typing import Any

import pytest

from memwire import ConfigError, Middleware, MemoryStore
from memwire._config import MODES as CONFIG_MODES
from memwire.policies import modes
from memwire.policies.modes import Block, ContextPerTurn, Mode, Placed, Plan, Skip, Startup, SystemPromptPerTurn, Turn

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}


@pytest.fixture()
def store(tmp_path: Any) -> MemoryStore:
    s = MemoryStore(tmp_path)
    s.add("Run the test suite with `make test`; it needs Docker running", tags=["build"])
    s.add("We lint with ruff instead of flake8", tags=["decision"])
    return s


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: ContextPerTurn(history="keep"), "history"),
        (lambda: ContextPerTurn(placement="system"), "placement"),
        (lambda: ContextPerTurn(max_tokens=0), "max_tokens"),
        (lambda: ContextPerTurn(replay_max_tokens=-1), "replay_max_tokens"),
        (lambda: Startup(max_tokens="600"), "max_tokens"),
        (lambda: SystemPromptPerTurn(memo_size=0), "memo_size"),
    ],
)
def test_a_mode_refuses_a_bad_setting_by_name(make: Any, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        make()


def test_the_registry_is_what_the_config_accepts() -> None:
    assert tuple(modes.MODES) == CONFIG_MODES
    assert all(cls.name == name for name, cls in modes.MODES.items())


def test_a_mode_object_is_the_middlewares_mode(store: MemoryStore) -> None:
    drop = ContextPerTurn(history="drop", max_tokens=64)
    mw = Middleware(store=store, mode=drop)
    assert mw.mode == "contextPerTurn" and mw.mode_for() is drop
    msgs = [SYSTEM, {"role": "user", "content": "How do I run the tests?"}]
    p = mw.prepare(msgs)
    assert p.injection.injected and p.injection.tokens <= 64  # the object's own budget, not the config's
    assert p.messages[-1] == msgs[-1] and "make test" in p.messages[-2]["content"]


class FirstUser(Mode):
    """A toy mode for the test: the session's block before the first user message."""

    name = "firstUser"

    def __init__(self) -> None:
        self.memo: dict[Any, Block] = {}

    @classmethod
    def from_config(cls, config: Any) -> "FirstUser":
        return cls()

    def plan(self, turn: Turn) -> Plan | Skip:
        if turn.gate.skip:
            return Skip("gate")
        memo = self.memo
        key = (turn.namespace, turn.session)

        class _Memo:
            def get(self) -> Block | None:
                return memo.get(key)

            def settle(self, block: Block) -> Block:
                return memo.setdefault(key, block)

        return Plan(_Memo(), lambda fresh: turn.search(fresh, 200))

    def place(self, turn: Turn, plan: Plan, block: Block) -> Placed:
        if not block.ids:
            return Placed(dict(turn.body))
        first = turn.view.user_indices[0]
        return Placed(turn.fmt.insert(turn.body, first, block.text, turn.role), first, "message")


def test_a_new_mode_is_one_class_and_one_registry_line(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(modes.MODES, "firstUser", FirstUser)
    mw = Middleware(store=store, mode="firstUser")
    msgs = [SYSTEM, {"role": "user", "content": "How do I run the tests?"}, {"role": "assistant", "content": "make test"},
            {"role": "user", "content": "And what do we lint with?"}]
    p = mw.prepare(msgs)
    assert p.injection.mode == "firstUser" and p.injection.position == 1
    assert "make test" in p.messages[1]["content"] and p.messages[2:] == msgs[1:]
    assert mw.prepare(msgs).injection.reused  # its memo: the same block on the next request
    with pytest.raises(ConfigError, match="firstUsr"):
        Middleware(store=store, mode="firstUsr")
