"""memwire's layers only point down: no import cycle, no import of a higher layer.

The import graph is read from the source with ``ast``: every ``import`` and ``from ... import`` of a
memwire module, at any depth (a function's lazy import, an ``if TYPE_CHECKING:`` one) counts, and so
does the package ``__init__`` an import runs on the way (``from memwire.policies import _query``
runs ``memwire/policies/__init__.py``). A lazy import is an import: it only moves the cycle to run
time. Function-level imports are kept for optional extras and start-up time, each saying which.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import memwire

# The layers, lowest first. A module may import its own layer (without a cycle) and the layers
# below it, never one above. A name stands for the module and everything under it; the most
# specific name wins (``memwire.policies.modes`` is above ``memwire.policies``); ``memwire`` itself
# is the package's ``__init__`` only.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # what everything may use: errors, JSON, file locks, symlink-safe paths, logging, a background
    # worker (it only logs), an LRU map, the page's and the demo's SVG charts (pure HTML): none of
    # them knows memory, a request or a setting
    ("leaves", ("memwire._errors", "memwire._json", "memwire._locks", "memwire._paths", "memwire._logs",
                "memwire._worker", "memwire._lru", "memwire._charts")),
    # the pure rules: the gate, the human text and the query, tokens, capture and secret rules, the
    # screen, side requests: functions of text, no store, no request, no setting
    ("rules", ("memwire.policies",)),
    # the stores (markdown; PostgreSQL in its own subpackage) and their protocol, the index,
    # lifecycle, inbox, import/export: they may use the rules (the screen, the query); they take
    # their settings as arguments
    ("memory", ("memwire.memory", "memwire.memory.postgres")),
    # the settings: plain data naming a mode by its name (``_mode_names``; the mode registry checks
    # it holds those names), loaded from files and the environment (``_trust`` decides which files).
    # Above memory: the lifecycle settings are validated with the lifecycle's own ``Scoring``
    ("config", ("memwire._mode_names", "memwire._config_model", "memwire._config", "memwire._trust")),
    # the modes, the replay strategy and its ledgers (file, PostgreSQL), the block's rendering and
    # the session memos: they use the rules, the store and the settings, never the middleware
    ("modes", ("memwire.policies.modes",)),
    # prepare(): formats, sessions, capture, distillation, records, replies
    ("middleware", ("memwire.middleware",)),
    # the package's own face: Middleware, MemoryStore, Config (loaded on first use)
    ("package", ("memwire",)),
    # in-process ways in: the SDK adapters (openai, anthropic, the memory tool) and litellm (the
    # wrapper, the LiteLLM callback)
    ("adapters", ("memwire.adapters",)),
    # the HTTP server: the proxy, the memory API, the page, metrics, keys, limits, MCP, their commands
    # (``memwire.adapters.proxy`` and ``.mcp``: the public names, re-exported)
    ("server", ("memwire.adapters.server", "memwire.adapters.proxy", "memwire.adapters.mcp")),
    # the simulator: a fake provider with a prompt cache, the demo (it runs the proxy), the figures
    # of real traffic priced by its cost model
    ("simulator", ("memwire._sim",)),
    # the command line, and the public test helpers
    ("top", ("memwire.cli", "memwire.testing")),
]

ROOT = Path(memwire.__file__).parent


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the name matched, layer)
    for rank, (_, names) in enumerate(LAYERS):
        for name in names:
            if module == name or (name != "memwire" and module.startswith(name + ".")):
                if best is None or len(name) > best[0]:
                    best = (len(name), rank)
    return None if best is None else best[1]


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """(dotted name, line) of every import in ``tree``, at any depth: for ``from x import y``, ``x.y``
    (when y is a module) and else ``x``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                source = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                yield f"{source}.{alias.name}", node.lineno  # graph() takes the module it names


def graph() -> dict[tuple[str, str], int]:
    """(importer, imported) -> the line of the first such import, for memwire modules."""
    mods = modules()
    edges: dict[tuple[str, str], int] = {}
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, line in _imported(tree, module, path.name == "__init__.py"):
            if name != "memwire" and not name.startswith("memwire."):
                continue
            while name not in mods:  # ``from memwire.x import function``: the module memwire.x
                name = name.rpartition(".")[0]
            parts = name.split(".")
            # and the packages the import runs on the way, unless the importer is inside them already
            targets = [name] + [p for p in (".".join(parts[:i]) for i in range(1, len(parts)))
                                if not module.startswith(p + ".")]
            for target in targets:
                if target != module:
                    edges.setdefault((module, target), line)
    return edges


def cycles(edges: dict[tuple[str, str], int]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    succ: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer() -> None:
    missing = sorted(m for m in modules() if layer_of(m) is None)
    assert not missing, f"modules in no layer (add them to LAYERS): {missing}"


def test_no_import_cycle() -> None:
    edges = graph()
    problems = []
    for component in cycles(edges):
        inside = set(component)
        lines = [f"    {a} line {line} -> {b}" for (a, b), line in sorted(edges.items()) if a in inside and b in inside]
        problems.append(f"cycle of {len(component)} modules:\n" + "\n".join(lines))
    assert not problems, "\n".join(problems)


def test_no_import_points_up() -> None:
    names = [name for name, _ in LAYERS]
    upward = []
    for (a, b), line in sorted(graph().items()):
        la, lb = layer_of(a), layer_of(b)
        if la is not None and lb is not None and lb > la:
            upward.append(f"    {a} line {line} -> {b} ({names[la]} -> {names[lb]})")
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_the_graph_sees_lazy_and_type_only_imports(tmp_path: Path) -> None:
    """The reader itself: an import inside a function or under TYPE_CHECKING is an edge."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..memory._store import MemoryStore\n"
              "def f():\n    from .. import _json\n    import memwire.cli\n")
    found = {name for name, _ in _imported(ast.parse(source), "memwire.middleware._x", False)}
    assert {"memwire.memory._store.MemoryStore", "memwire._json", "memwire.cli"} <= found
