"""The demo's world: a payments service, its memories, and a scripted three-session agent conversation.

Every turn that needs a memory names it by a fragment of its text, so the demo can tell whether
the model was shown the memory it needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LEARNED", "MEMORIES", "SESSIONS", "SYSTEM_PROMPT", "TOOLS", "Turn", "tool_output"]

# (text, tags, pinned)
MEMORIES: list[tuple[str, tuple[str, ...], bool]] = [
    ("User prefers small, focused pull requests with one logical change each", ("preference",), True),
    ("Commit messages use the imperative mood, a 50-character subject line and a blank line before the body",
     ("preference", "git"), True),
    ("Never push directly to main; every change goes through a pull request with one approving review",
     ("process", "git"), True),
    ("Run the test suite with `make test`; it starts Postgres and Redis in Docker, so Docker must be running",
     ("build", "tests"), False),
    ("Run a single test file with `make test FILE=tests/test_refunds.py` to skip the slow integration suite",
     ("build", "tests"), False),
    ("Build the wheel with `make dist`; never call setup.py directly", ("build",), False),
    ("We decided to use ruff for both linting and formatting; black and flake8 were removed in March",
     ("decision", "lint"), False),
    ("Lint with `make lint` (ruff check plus mypy --strict on the payments package)", ("build", "lint"), False),
    ("Format with `ruff format payments tests`; CI fails on any formatting diff", ("build", "lint"), False),
    ("Money amounts are stored as integer cents, never floats or Decimal, in every table and API field",
     ("decision", "money"), False),
    ("Currency codes are ISO 4217 strings in upper case; the default currency is EUR", ("decision", "money"), False),
    ("Database migrations are managed by Alembic; create one with `alembic revision --autogenerate -m MESSAGE`",
     ("build", "database"), False),
    ("Migrations must be backwards compatible for one release: add columns nullable first, backfill, then constrain",
     ("decision", "database"), False),
    ("The staging database is Postgres 15 on port 5433 at staging-db.internal; production uses port 5432",
     ("infra", "database"), False),
    ("The staging database password lives in the STAGING_DB_PASSWORD secret, never in .env files",
     ("infra", "security"), False),
    ("Deploy to staging with `make deploy ENV=staging`; it runs migrations first, then rolls the pods",
     ("process", "deploy"), False),
    ("Production deploys go out on Tuesdays and Thursdays only, through the GitHub Actions deploy workflow",
     ("process", "deploy"), False),
    ("Rollbacks use `make rollback ENV=production`; it keeps the database schema and only reverts the pods",
     ("process", "deploy"), False),
    ("The API server is FastAPI, started locally with `uvicorn payments.api:app --reload --port 8000`",
     ("build", "api"), False),
    ("The worker queue is Celery on Redis 7; start a local worker with `make worker`", ("build", "infra"), False),
    ("Redis keys for idempotency expire after 24 hours; the prefix is `idem:`", ("infra", "api"), False),
    ("Every POST endpoint takes an Idempotency-Key header; repeated keys return the stored response",
     ("decision", "api"), False),
    ("Lesson: the flaky test_upload test fails when the S3 mock starts late; wait for its readiness probe first",
     ("lesson", "tests"), False),
    ("Lesson: freezegun and the Celery eager mode do not mix; use the `frozen_clock` fixture instead",
     ("lesson", "tests"), False),
    ("Lesson: Alembic autogenerate misses enum changes; write enum migrations by hand", ("lesson", "database"), False),
    ("Lesson: never log full card numbers; the logger's redaction filter lives in payments/logging.py",
     ("lesson", "security"), False),
    ("Lesson: the refund webhook is retried for 72 hours, so refund handlers must be idempotent",
     ("lesson", "api"), False),
    ("Tests use pytest fixtures from tests/conftest.py; factories live in tests/factories.py", ("tests",), False),
    ("User prefers pytest parametrize over copy-pasted test functions", ("preference", "tests"), False),
    ("User prefers type hints on every public function and dataclasses over plain dicts", ("preference",), False),
    ("User dislikes one-letter variable names except loop indices", ("preference",), False),
    ("Use `httpx` for outgoing HTTP calls, never `requests`; the shared client is in payments/http.py",
     ("decision", "api"), False),
    ("The payment provider sandbox is Stripe test mode; keys are in the STRIPE_TEST_KEY secret", ("infra",), False),
    ("Feature flags live in LaunchDarkly; the refunds_v2 flag gates the new refund flow", ("infra", "process"), False),
    ("The on-call runbook is docs/runbook.md; update it whenever an alert changes", ("process",), False),
    ("Metrics go to Prometheus with the `payments_` prefix; dashboards are in Grafana folder Payments",
     ("infra",), False),
    ("Error tracking is Sentry; the DSN comes from the SENTRY_DSN environment variable", ("infra",), False),
    ("API errors follow RFC 7807 problem details with a stable `type` URI per error", ("decision", "api"), False),
    ("Public API versions are in the URL path (/v1, /v2); breaking changes need a new version",
     ("decision", "api"), False),
    ("The refunds table has columns id, payment_id, amount_cents, currency, status, created_at",
     ("database", "money"), False),
    ("Refund status moves pending -> approved -> settled, or pending -> rejected; nothing else",
     ("decision", "money"), False),
    ("Partial refunds are allowed; the sum of refunds may never exceed the captured amount",
     ("decision", "money"), False),
    ("Dana leads the payments team and reviews every change to the ledger module", ("person",), False),
    ("Omar owns the deploy pipeline; ask him before changing the GitHub Actions workflows",
     ("person", "deploy"), False),
    ("The ledger module is append-only: corrections are new entries, never updates", ("decision", "database"), False),
    ("Docs are written in Markdown under docs/ and published with mkdocs on merge to main", ("process",), False),
    ("Python version is 3.12; dependencies are managed with uv and locked in uv.lock", ("build",), False),
    ("Add a dependency with `uv add NAME` and commit uv.lock in the same pull request", ("build",), False),
    ("Pre-commit hooks run ruff and mypy; install them with `make hooks`", ("build", "lint"), False),
    ("Local environment variables come from .env.example; copy it to .env and never commit .env",
     ("build", "security"), False),
    ("Load tests run with locust against staging only, never production", ("process", "tests"), False),
    ("The CI pipeline has four stages: lint, unit, integration, build; integration needs the Docker service",
     ("build", "ci"), False),
    ("CI caches the uv download cache keyed on uv.lock; clear it with the `ci-cache-bust` label", ("ci",), False),
    ("Timestamps are stored in UTC as timestamptz and rendered in the user's zone only in the UI",
     ("decision", "database"), False),
    ("Webhooks are signed with HMAC-SHA256; verify with payments.webhooks.verify_signature",
     ("api", "security"), False),
]

# Written at the end of session 1 (as `memwire add` would), needed in session 2.
LEARNED = ("Lesson: refunds over 10,000 EUR need a second approver; the check lives in payments/approvals.py",
           ("lesson", "money"), False)


@dataclass(frozen=True)
class Turn:
    user: str
    tools: tuple[tuple[str, int], ...] = ()  # (tool command, output lines) of the agent's tool loop
    reply: str = "Done."
    needs: str | None = None                  # a fragment of the memory this turn needs
    closer: bool = False


@dataclass(frozen=True)
class Session:
    name: str
    turns: tuple[Turn, ...] = field(default_factory=tuple)


SESSIONS: tuple[Session, ...] = (
    Session("monday", (
        Turn("The refund tests in tests/test_refunds.py are failing. Can you find out why and fix them?",
             (("cat tests/test_refunds.py", 160), ("make test FILE=tests/test_refunds.py", 120),
              ("cat payments/refunds.py", 180)),
             "The fixture created refunds in the wrong currency; fixed and the file passes now.", "`make test`"),
        Turn("ok", closer=True, reply="Anything else on refunds?"),
        Turn("Should the new partial refund amount be a float or a Decimal?",
             (("grep -rn amount payments/models.py", 60),),
             "Neither: keep integer cents like the rest of the code base.", "integer cents"),
        Turn("Add a migration for the new refund_reason column",
             (("alembic heads", 10), ("cat migrations/env.py", 90)),
             "Added migration 0042 with a nullable refund_reason column.", "alembic revision"),
        Turn("thanks!", closer=True),
    )),
    Session("tuesday", (
        Turn("CI is red on the lint stage this morning. What is our lint setup and how do I reproduce it locally?",
             (("make lint", 140), ("cat pyproject.toml", 80)),
             "Fixed the two ruff errors. Shall I also run the formatter over the whole payments package?",
             "`make lint`"),
        Turn("yes", (("ruff format payments tests", 40),), "Formatted 12 files; the diff is whitespace only.",
             "ruff format"),
        Turn("Now implement the approval step for large refunds in the refund flow",
             (("cat payments/approvals.py", 150), ("cat payments/refunds.py", 180), ("make test", 200)),
             "Large refunds now wait for a second approver before moving to approved.", "second approver"),
        Turn("👍", closer=True),
        Turn("How do I get this onto staging to try it?", (("git status", 20), ("make deploy ENV=staging", 120)),
             "Deployed to staging; migrations ran first.", "make deploy ENV=staging"),
    )),
    Session("wednesday", (
        Turn("The staging deploy logs say it could not connect to the database. Where should it be pointing?",
             (("kubectl logs deploy/payments -n staging", 160), ("cat deploy/staging.yaml", 90)),
             "The config pointed at port 5432; staging's database listens on 5433. Fixed.", "port 5433"),
        Turn("Write the commit message for this fix", (),
             "Point staging at its database port\n\nStaging listens on 5433.", "imperative mood"),
        Turn("The upload test is flaky in CI again, any idea what's going on?",
             (("make test FILE=tests/test_upload.py", 150),),
             "It races the S3 mock; added a wait on the readiness probe.", "S3 mock"),
        Turn("got it, thanks", closer=True),
    )),
)

SYSTEM_PROMPT = """You are a senior software engineer working as a coding agent inside the user's repository.
You read code, run commands and edit files with the tools you are given, and you explain what you did
briefly. Follow these rules:

""" + "\n".join(
    f"{i}. {rule}" for i, rule in enumerate([
        "Read the relevant files before changing them; never guess at code you have not seen.",
        "Prefer the smallest change that fixes the problem, and keep unrelated code untouched.",
        "Run the tests that cover your change before you say it is done, and report their result.",
        "When a command fails, read its output carefully and fix the cause, not the symptom.",
        "Never print, log or commit secrets, tokens or personal data; redact them in any output you show.",
        "Keep the user's style: match the formatting, naming and structure of the surrounding code.",
        "Ask before destructive operations: deleting files, rewriting history, dropping tables, force pushes.",
        "When the user asks a question, answer it directly first, then give the detail that supports it.",
        "Use the project's own commands (make targets, scripts) rather than inventing new ones.",
        "Write tests for new behaviour, and regression tests for every bug you fix.",
        "If the task is ambiguous, state the assumption you make and proceed; do not stall.",
        "Summaries are short: what changed, why, and how it was verified, in a few sentences.",
    ] * 6, start=1)
) + "\n\nThe repository is a Python payments service. Tools: shell (run a command), edit (apply a patch)."

TOOLS = [
    {"name": "shell", "description": "Run a shell command in the repository and return its output.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "edit", "description": "Apply a unified diff to the working tree.",
     "parameters": {"type": "object", "properties": {"patch": {"type": "string"}}, "required": ["patch"]}},
]


def tool_output(command: str, lines: int) -> str:
    """Deterministic, code-and-log-like output of a tool call, ``lines`` lines long."""
    words = ["refund", "payment", "amount_cents", "currency", "status", "approve", "settle", "ledger", "entry",
             "fixture", "session", "assert"]
    n = len(words)
    out = []
    for i in range(lines):
        a, b, c = words[(i * 7 + len(command)) % n], words[(i * 3 + 1) % n], words[(i * 5 + 2) % n]
        if i % 9 == 0:
            out.append(f"# {command}: section {i // 9}")
        elif i % 4 == 0:
            out.append(f"    def test_{a}_{b}_{i}(self, {c}_factory):")
        else:
            out.append(f"        {a}_{i} = {b}.{c}(id={i}, value={(i * 37) % 1000})  # {command[:12]}")
    return "\n".join(out)
