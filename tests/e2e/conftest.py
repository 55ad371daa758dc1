"""The real coding agents (Claude Code, Codex CLI) from npm, marked ``real_clients`` (the marker is
declared in pyproject.toml, and deselected by default). They skip, with the reason, when node or a
client is missing; run them with ``.ci/real_clients`` or ``python -m pytest -q -m real_clients tests/e2e``."""
