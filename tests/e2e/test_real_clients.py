"""Issue 10: the real coding agents, end to end, through ``memwire proxy``.

Claude Code (``claude -p``, then ``--resume``) and Codex CLI (``codex exec``, then ``codex exec
resume``) run against a fake upstream on 127.0.0.1, each turn with a tool loop; see
``harness.py`` for the stack and the scenario. Per client:

1. turn 1 gets the memory it needs;
2. every earlier memory block is still byte-identical in every later request of the session;
3. the shared prefix of consecutive requests through memwire is at least 98% of the client's own;
4. two sessions opened with the same prompt keep their own blocks;
5. no Anthropic request that leaves the proxy has more than 4 ``cache_control`` breakpoints;

and, beyond the issue's five, 6. a side request (Claude Code's prompt suggestion, in the
``claude-code-suggestions`` run) gets no memory block of its own.

The negative controls run the same scenario with a fault (``--history drop``; one
``x-memwire-session`` for both sessions) and require checks 2-4 to catch it.

The clients are not installed here: ``.ci/real_clients`` does that (or set
``E2E_MEMWIRE_INSTALL=1``); without them every test skips with the reason.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import conftest as root_conftest

from .harness import (
    CLIENTS,
    Figures,
    evaluate,
    format_figures,
    install_clients,
    missing_reason,
    npm_dir,
    run_scenario,
)

pytestmark = pytest.mark.real_clients


@contextmanager
def _loopback_only() -> Iterator[None]:
    """The suite's network guard, for module-scoped fixtures (its autouse fixture is per test)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", root_conftest._connect)
        mp.setattr(socket.socket, "connect_ex", root_conftest._connect_ex)
        mp.setattr(socket, "getaddrinfo", root_conftest._getaddrinfo)
        yield


@pytest.fixture(scope="module")
def clients_dir() -> Path:
    directory = npm_dir()
    if os.environ.get("E2E_MEMWIRE_INSTALL") == "1" and any(missing_reason(c, directory) for c in CLIENTS.values()):
        install_clients(directory)
    return directory


def _available(name: str, directory: Path) -> None:
    reason = missing_reason(CLIENTS[name], directory)
    if reason:
        pytest.skip(f"{name}: {reason}")


@pytest.fixture(scope="module", params=list(CLIENTS))
def figures(request: pytest.FixtureRequest, clients_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Figures:
    """The scenario run once per client (about 3-5 s against the fake upstream) and its checks."""
    name = request.param
    _available(name, clients_dir)
    with _loopback_only():
        result = run_scenario(name, clients_dir, root=tmp_path_factory.mktemp(f"e2e-{name}"))
    figs = evaluate(result)
    print(format_figures([figs]))  # shown with -s, and in the report of a failing test
    return figs


def _why(figs: Figures, check: str) -> str:
    lines = figs.problems.get(check, []) + [f"rejected: {r}" for r in figs.rejected]
    return f"{figs.client} {figs.version}:\n  " + "\n  ".join(lines)


def test_turn_one_gets_the_memory_it_needs(figures: Figures) -> None:
    assert figures.turn1_memory, _why(figures, "turn1")


def test_earlier_blocks_stay_byte_identical_in_every_later_request(figures: Figures) -> None:
    assert figures.blocks_identical, _why(figures, "blocks")


def test_shared_prefix_is_at_least_98_percent_of_the_clients_own(figures: Figures) -> None:
    assert figures.prefix_ok, _why(figures, "prefix")


def test_sessions_opened_with_the_same_prompt_keep_their_own_blocks(figures: Figures) -> None:
    assert figures.sessions_isolated, _why(figures, "sessions")


def test_no_anthropic_request_has_more_than_four_breakpoints(figures: Figures) -> None:
    if figures.max_breakpoints is None:
        pytest.skip(f"{figures.client} sends no Anthropic request")
    assert figures.breakpoints_ok, _why(figures, "breakpoints")


def test_side_requests_get_no_block_of_their_own(figures: Figures) -> None:
    if not figures.side_requests:
        pytest.skip(f"{figures.client} made no side request in this scenario")
    assert figures.side_with_new_block == 0, _why(figures, "side")


# -- negative controls: the checks catch a proxy that breaks the property ------------------------


def _control(figures: Figures) -> None:
    variant_of = CLIENTS[figures.client].variant_of
    if variant_of:
        pytest.skip(f"the controls run on {variant_of}, the same client")


def test_checks_catch_dropped_history(clients_dir: Path, figures: Figures, tmp_path: Path) -> None:
    """With ``--history drop`` turn 1's block is gone on turn 2: checks 2 and 3 must fail."""
    _control(figures)
    if not (figures.blocks_identical and figures.prefix_ok):
        pytest.skip("checks 2-3 already fail without the fault: nothing to control")
    with _loopback_only():
        figs = evaluate(run_scenario(figures.client, clients_dir, root=tmp_path, proxy_args=["--history", "drop"]))
    assert not figs.blocks_identical and any("is not in" in p for p in figs.problems["blocks"])
    assert not figs.prefix_ok


def test_checks_catch_one_session_for_two(clients_dir: Path, figures: Figures, tmp_path: Path) -> None:
    """Both sessions sent as one ``x-memwire-session``: session B replays A's block, check 4 must fail."""
    _control(figures)
    if not figures.sessions_isolated:
        pytest.skip("check 4 already fails without the fault: nothing to control")
    with _loopback_only():
        figs = evaluate(run_scenario(figures.client, clients_dir, root=tmp_path, shared_session="e2e-one-session"))
    assert not figs.sessions_isolated
