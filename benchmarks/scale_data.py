"""What benchmarks/scale.py stores and asks: varied developer facts and questions, generated from word
lists and templates with a fixed seed (the same namespace gets the same memories on every run).

Each namespace is a team: its projects, people and tools are drawn from the lists, so two
namespaces hold different facts in the same vocabulary, and a question about a project finds a
handful of its facts among the 200 (BM25 has work to do: every memory shares words with others).
"""

from __future__ import annotations

import random
from collections.abc import Callable

PROJECTS = ["billing", "checkout", "search", "auth", "ingest", "reporting", "notifications", "payments",
            "inventory", "onboarding", "analytics", "gateway", "scheduler", "exports", "webhooks", "catalog",
            "ledger", "mobile app", "admin console", "data pipeline", "pricing", "support bot", "edge cache",
            "feature store", "email sender", "identity", "audit log", "shipping", "invoicing", "recommendations"]
PEOPLE = ["Ana", "Bilal", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
          "Marco", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yusuf"]
ENVS = ["staging", "production", "dev", "preview", "canary", "sandbox", "load-test", "eu-west", "us-east"]
TOOLS = {
    "tests": ["pytest", "jest", "go test", "vitest", "cargo test", "rspec", "playwright", "JUnit 5"],
    "linting": ["ruff", "eslint", "golangci-lint", "clippy", "mypy", "prettier", "pyright", "rubocop"],
    "deploys": ["Argo CD", "Helm", "Terraform", "GitHub Actions", "Spinnaker", "Nomad", "Pulumi", "Flux"],
    "queues": ["Kafka", "RabbitMQ", "SQS", "NATS", "Celery", "Sidekiq", "Pub/Sub", "Redis streams"],
    "logging": ["Loki", "Datadog", "OpenTelemetry", "Sentry", "Elasticsearch", "Honeycomb", "Grafana", "Splunk"],
    "caching": ["Redis", "Memcached", "Varnish", "Cloudflare", "an in-process LRU", "Fastly"],
    "feature flags": ["LaunchDarkly", "Unleash", "Flagsmith", "a config table", "GrowthBook"],
    "builds": ["Bazel", "make", "Gradle", "Nx", "Turborepo", "uv", "Poetry", "pnpm"],
}
DATABASES = ["PostgreSQL 16", "PostgreSQL 13", "MySQL 8", "SQLite", "CockroachDB", "DynamoDB", "MongoDB 7",
             "ClickHouse", "Cassandra", "Aurora"]
COMPONENTS = ["API", "worker", "scheduler", "webhook handler", "importer", "exporter", "admin UI", "nightly job",
              "auth middleware", "rate limiter", "retry queue", "CSV parser", "PDF renderer", "search index"]
LIBS = [("requests", "2.31"), ("pydantic", "1.10"), ("react", "18.2"), ("protobuf", "3.20"), ("numpy", "1.26"),
        ("django", "4.2"), ("openssl", "3.0"), ("grpcio", "1.59"), ("sqlalchemy", "1.4"), ("axios", "0.27"),
        ("spring-boot", "3.1"), ("tokio", "1.35"), ("celery", "5.3"), ("webpack", "5.88")]
REASONS = ["the next version breaks our retries", "of a memory leak upstream", "the vendor SDK needs it",
           "newer ones change the JSON encoding", "of a deadlock under load", "the build image is old",
           "the migration to the new API is not done", "of a licence review"]
COMMANDS = ["make test", "npm run lint", "just check", "tox -e py311", "cargo fmt", "pre-commit run -a",
            "./scripts/check.sh", "bazel test //...", "uv run pytest -x", "go vet ./...", "pnpm typecheck"]
VAULTS = ["Vault", "AWS Secrets Manager", "1Password", "Doppler", "SOPS files", "GCP Secret Manager"]
PREFERENCES = ["tabs over spaces", "short commit messages in the imperative", "type hints everywhere",
               "small pull requests", "squash merges", "explicit error types over exceptions", "dark mode",
               "early returns over nested ifs", "snake_case JSON keys", "table-driven tests",
               "one assertion idea per test", "logging in JSON", "no ORMs for reporting queries",
               "dataclasses over dicts", "British spelling in docs", "comments that say why, not what"]
STYLES = [("Python", "f-strings over format()"), ("Go", "errors wrapped with %w"), ("TypeScript", "strict mode"),
          ("Rust", "thiserror for library errors"), ("SQL", "uppercase keywords"), ("Java", "records for DTOs"),
          ("Kotlin", "sealed classes for results"), ("Ruby", "frozen string literals"), ("Bash", "set -euo pipefail")]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
CAUSES = ["the upstream returns 429", "a batch has over 10,000 rows", "the token expires mid-request",
          "two workers take the same job", "the clock skews by a minute", "the payload has emoji",
          "the replica lags", "DNS fails over"]

Fact = tuple[str, str, str]  # text, topic, tag


def _templates() -> list[Callable[[random.Random, list[str], list[str]], Fact]]:
    def tool(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        purpose = r.choice(list(TOOLS))
        return f"The {r.choice(ps)} project uses {r.choice(TOOLS[purpose])} for {purpose}", "Tooling", purpose.split()[0]

    def command(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return f"Run `{r.choice(COMMANDS)}` before pushing to {r.choice(ps)}", "Build", "build"

    def owner(r: random.Random, ps: list[str], people: list[str]) -> Fact:
        return (f"{r.choice(people)} owns the {r.choice(ps)} {r.choice(COMPONENTS)}; ask them before changing it",
                "People", "owner")

    def database(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return (f"The {r.choice(ENVS)} {r.choice(ps)} database runs {r.choice(DATABASES)} on port "
                f"{r.choice([5432, 5433, 6432, 3306, 26257, 9000])}", "Infrastructure", "database")

    def approval(r: random.Random, ps: list[str], people: list[str]) -> Fact:
        return f"Deploys of {r.choice(ps)} to {r.choice(ENVS)} need approval from {r.choice(people)}", "Deploys", "deploy"

    def style(r: random.Random, _: list[str], __: list[str]) -> Fact:
        lang, rule = r.choice(STYLES)
        return f"In {lang} code we prefer {rule}", "Style", "style"

    def limit(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return (f"The {r.choice(ps)} API rate-limits at {r.choice([50, 100, 200, 500, 1000, 5000])} requests per "
                f"{r.choice(['second', 'minute', 'client per minute', 'hour'])}", "APIs", "limits")

    def migration(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        p = r.choice(ps)
        return (f"Migrations for {p} live in {p.replace(' ', '_')}/migrations and run with "
                f"{r.choice(['alembic', 'flyway', 'goose', 'sqitch', 'django migrate', 'prisma migrate'])}",
                "Database", "migrations")

    def oncall(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return (f"The {r.choice(ps)} on-call rotation changes every {r.choice(DAYS)} at {r.randint(8, 17)}:00",
                "On-call", "oncall")

    def preference(r: random.Random, _: list[str], __: list[str]) -> Fact:
        return f"User prefers {r.choice(PREFERENCES)}", "Preferences", "preference"

    def flag(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        p = r.choice(ps)
        return (f"Feature flag {p.split()[0]}_{r.choice(['v2', 'beta', 'fast_path', 'new_ui', 'rollout'])} gates "
                f"the new {p} {r.choice(COMPONENTS)}", "Flags", "flags")

    def secret(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return f"{r.choice(ps).capitalize()} secrets live in {r.choice(VAULTS)}, never in .env files", "Security", "secrets"

    def ttl(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return (f"The {r.choice(ps)} cache TTL is {r.choice([30, 60, 300, 900, 3600])} seconds in "
                f"{r.choice(ENVS)}", "Caching", "cache")

    def bug(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return (f"Bug {r.choice(['BUG', 'OPS', 'INC'])}-{r.randint(100, 9999)}: the {r.choice(ps)} "
                f"{r.choice(COMPONENTS)} times out when {r.choice(CAUSES)}", "Known bugs", "bug")

    def pin(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        lib, ver = r.choice(LIBS)
        return f"We pinned {lib} to {ver} in {r.choice(ps)} because {r.choice(REASONS)}", "Dependencies", "deps"

    def logs(r: random.Random, ps: list[str], _: list[str]) -> Fact:
        return (f"{r.choice(ps).capitalize()} logs go to {r.choice(TOOLS['logging'])}; search them by "
                f"{r.choice(['request id', 'trace id', 'tenant id', 'job id'])}", "Observability", "logging")

    return [tool, command, owner, database, approval, style, limit, migration, oncall, preference, flag, secret,
            ttl, bug, pin, logs]


TEMPLATES = _templates()


def team(seed: int, number: int) -> tuple[random.Random, list[str], list[str]]:
    """Namespace ``number``'s random source, projects (6) and people (5)."""
    r = random.Random(f"{seed}:{number}")
    return r, r.sample(PROJECTS, 6), r.sample(PEOPLE, 5)


def facts(seed: int, number: int, count: int) -> list[Fact]:
    """``count`` distinct facts of namespace ``number`` (text, topic, tag)."""
    r, projects, people = team(seed, number)
    out: dict[str, Fact] = {}
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > count * 50:
            raise ValueError(f"cannot make {count} distinct memories from the templates")
        text, topic, tag = r.choice(TEMPLATES)(r, projects, people)
        out.setdefault(text, (text, topic, tag))
    return list(out.values())


QUESTIONS = [
    "What do we use for {purpose} in {project}?",
    "Who owns the {project} {component}?",
    "Which database does {project} use in {env}?",
    "How do I deploy {project} to {env}, who approves it?",
    "Why is {lib} pinned in {project}?",
    "What is the cache TTL of {project} in {env}?",
    "Where do the {project} logs go?",
    "The {project} {component} times out again, is that a known bug?",
    "What should I run before pushing to {project}?",
    "Where are the {project} migrations and how do I run them?",
    "When does the {project} on-call rotation change?",
    "What is the rate limit of the {project} API?",
    "Which feature flag gates the new {project} {component}?",
    "Where do the {project} secrets live?",
    "How do we write {lang} code here?",
]


def question(r: random.Random, projects: list[str]) -> str:
    """A question a developer of this team asks (about one of its projects)."""
    return r.choice(QUESTIONS).format(
        purpose=r.choice(list(TOOLS)), project=r.choice(projects), component=r.choice(COMPONENTS),
        env=r.choice(ENVS), lib=r.choice(LIBS)[0], lang=r.choice(STYLES)[0])


REPLIES = ["Checked the repo: see the notes above.", "Done, and I left a comment in the PR.",
           "That matches what the runbook says.", "I will ask in the channel and report back."]
