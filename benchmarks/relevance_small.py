"""Relevance in a coding agent's small store: does a prompt naming files and functions the store
never saw still get the memory it is about, while everyday prompts get nothing? (issue 32)

    python benchmarks/relevance_small.py [--json] [--k 6]

Coding agents keep a handful to a few dozen memories, and their prompts constantly name files,
functions and paths the store has never seen ("Fix the failing test in refund_service.py") while
the rest of the prompt carries the topic. Two sets, each a project of 30 memories, prompts about
them (most naming an unknown file, path, function or identifier; each sharing at least one word
with its memory, as BM25 needs) and everyday prompts (about nothing in the store, some naming a
person or a function, a few sharing a word with it: "What's the difference between a list and a
tuple in Python?"). ``dev`` is what the rules were chosen looking at; ``held-out`` (another
project, other wordings) was written with it and only measured.

Stores of 3 (ten: memories 0-2, 3-5, ...), 10 (three) and 30 (one) memories per set. Every prompt
goes the middleware's way (``relevance.ask``: gate, query, ``MemoryStore.search`` at the store's
defaults, k=6). Figures per size and overall:

- *related found %*: prompts whose memory is among the k injected, over the stores holding it;
- *false injection %*: (store, everyday prompt) pairs that get any memory.

Prints figures; asserts nothing (``tests/memory/test_relevance_small.py`` asserts a few cases).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

if "memwire" not in sys.modules and not any(Path(p, "memwire").is_dir() for p in sys.path if p):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout, not installed

from memwire.memory._model import Hit
from memwire.memory._store import MemoryStore
from memwire.policies._gate import gate
from memwire.policies._query import query_from_messages

__all__ = ["SETS", "SIZES", "figures"]

SIZES = (3, 10, 30)

# A Python billing backend
DEV_STORE = [
    "This project indents Python code with tabs, never with spaces",
    "Run the unit tests with `make test`; it wraps pytest -x",
    "Deploys go out on Tuesdays only, through the deploy workflow",
    "Use ruff for linting; the config is in pyproject.toml",
    "The database is PostgreSQL 15, reached through SQLAlchemy sessions",
    "Every public function needs a docstring and type hints",
    "Secrets come from environment variables, never from files in the repo",
    "Feature branches are named feature/<ticket>-<slug> and squashed on merge",
    "Log with the standard logging module; no print statements",
    "The frontend is React with TypeScript and lives in web/",
    "Money amounts are stored as integer cents, never floats",
    "The API returns errors as JSON with a code and a message field",
    "Background jobs run on Celery with Redis as the broker",
    "Timestamps are stored in UTC and converted only for display",
    "Database migrations are written with Alembic and reviewed by two people",
    "Dependencies are pinned in requirements.lock, updated with pip-compile",
    "The staging environment is at staging.example.com",
    "Integration tests need Docker running locally",
    "Prefer dataclasses over plain dictionaries for structured data",
    "The CI pipeline runs on GitHub Actions and must pass before merging",
    "User wants short answers with the code first",
    "Refunds over 500 dollars need a manager's approval",
    "The cache layer uses Redis with a 10 minute expiry",
    "Error tracking goes to Sentry",
    "Line length is 100 characters",
    "Imports are grouped: standard library first, then third party, then local",
    "API endpoints are versioned under /v2",
    "Use pathlib instead of os.path for file paths",
    "Tests build their fixtures with factory functions, not JSON files",
    "The release notes live in CHANGELOG.md, one line per change",
]

DEV_RELATED: list[tuple[str, int]] = [
    ("Which indentation style should new code in app.py use?", 0),
    ("Should I use tabs or spaces in utils/helpers.py?", 0),
    ("Fix the failing test in refund_service.py", 1),
    ("How do I run the tests for billing/invoice.py?", 1),
    ("Can I deploy the fix for checkout_view on Friday?", 2),
    ("How do I run the linter on src/api?", 3),
    ("Where is the lint configuration?", 3),
    ("How should get_customer talk to the database?", 4),
    ("Add a docstring to parse_invoice", 5),
    ("Can I put the API secret in config/settings.py?", 6),
    ("What should I name the branch for ticket BILL-42?", 7),
    ("Replace the print calls in worker.py with proper logging", 8),
    ("Where does the TypeScript code for the dashboard live?", 9),
    ("Should total_price be a float?", 10),
    ("What shape should errors from the orders endpoint have?", 11),
    ("How do I add a background job for send_receipt?", 12),
    ("Should created_at timestamps be in UTC or local time?", 13),
    ("I need a migration to add a column to invoices", 14),
    ("How do I update the pinned dependencies?", 15),
    ("What's the staging URL for testing checkout.tsx?", 16),
    ("test_sync_orders fails with a connection error, do the integration tests need something running?", 17),
    ("Should OrderLine be a dictionary or a dataclass?", 18),
    ("Does CI have to pass before I merge my branch?", 19),
    ("Can a refund of 800 dollars go through without approval?", 21),
    ("How long does the Redis cache keep entries?", 22),
    ("Where do exceptions from tasks.py get tracked?", 23),
    ("What's the maximum line length?", 24),
    ("How should I order the imports in models.py?", 25),
    ("Which version prefix do new API endpoints get?", 26),
    ("Should load_config use os.path or pathlib?", 27),
    ("How should fixtures for test_refunds.py be written?", 28),
    ("Where do I add a line about this change to the release notes?", 29),
]

DEV_EVERYDAY = [
    "How do I reverse a string in JavaScript?",
    "What does the -r flag do in cp?",
    "Explain what __init__.py is for",
    "What's the difference between a list and a tuple in Python?",
    "Write a haiku about the sea",
    "What is the capital of Canada?",
    "Give me a recipe for lentil soup",
    "Who wrote The Old Man and the Sea?",
    "How do I center an image in HTML?",
    "What does numpy.argsort return?",
    "Recommend a good sci-fi novel",
    "What did Gina buy last week?",
    "How tall is Mount Kilimanjaro?",
    "Translate 'good morning' into French",
    "What is 12 squared?",
    "Explain recursion with an example",
    "How do I fix a flat bicycle tire?",
    "Write a limerick about a sleepy dog",
    "What's the weather usually like in Lisbon in April?",
    "Summarize the causes of World War I",
    "What is a monad in Haskell?",
    "How do I install node on Ubuntu?",
    "How many calories are in an avocado?",
    "Suggest names for a pet hamster",
    "What does git stash pop do?",
    "Explain the difference between HTTP and HTTPS",
    "When was the Eiffel Tower built?",
    "How does a binary search work?",
    "What are the health benefits of green tea?",
    "Write a thank-you note to my neighbour Marcus",
]

# A Go and TypeScript service with mobile apps: another project, other wordings
HELD_STORE = [
    "Go code is formatted with gofmt and vetted with go vet before every commit",
    "End-to-end tests run with Playwright against a local build",
    "Releases are cut from the release branch every other Thursday",
    "The mobile app is written in Kotlin for Android and Swift for iOS",
    "Config values are read from config.yaml and overridden by environment variables",
    "The search service uses Elasticsearch 8",
    "Use structured logging with zap; never log customer emails",
    "HTTP handlers return errors wrapped with fmt.Errorf and %w",
    "The user is called Tomasz and maintains the payments gateway",
    "Pull requests need one approval from the owning team",
    "Images are uploaded to an S3 bucket and served through CloudFront",
    "Rate limiting is 100 requests per minute per API token",
    "Protobuf definitions live in the proto folder and are generated with buf",
    "The nightly job rebuilds the search index at 2am",
    "Frontend state is managed with Redux Toolkit",
    "CSS is written with Tailwind utility classes, no custom stylesheets",
    "Feature toggles are stored in the flags table of the admin database",
    "Benchmarks must not regress by more than five percent",
    "Monitoring dashboards are in Grafana",
    "Passwords are hashed with argon2",
    "The team writes design docs before large changes",
    "Kubernetes manifests are generated with Helm charts",
    "Translations are kept in locales/*.json and edited through Crowdin",
    "The public API is documented with OpenAPI",
    "Use UUIDv7 for new primary keys",
    "Local development uses docker compose with hot reload",
    "Customer data must stay in the EU region",
    "Vendor libraries are never patched in place",
    "Error messages shown to users must be translated",
    "User prefers explanations before the code",
]

HELD_RELATED: list[tuple[str, int]] = [
    ("How should I format handler.go before committing?", 0),
    ("Do I need to run go vet on pkg/auth?", 0),
    ("checkout.spec.ts is flaky, how are end-to-end tests run?", 1),
    ("When is the next release branch cut?", 2),
    ("Which language is the Android app in?", 3),
    ("Where does loadSettings get its config values?", 4),
    ("Which Elasticsearch version does the search service run?", 5),
    ("Can I log the customer email in notifyUser?", 6),
    ("How should errors from createOrder be wrapped?", 7),
    ("Who maintains the payments gateway?", 8),
    ("How many approvals does my pull request need?", 9),
    ("Where should uploadAvatar put the images?", 10),
    ("What's the rate limit for an API token?", 11),
    ("How do I regenerate the protobuf code for user.proto?", 12),
    ("When does the search index get rebuilt?", 13),
    ("Should the cart state in CartPage.tsx go into Redux?", 14),
    ("Can I add a custom stylesheet for the navbar?", 15),
    ("Where are feature toggles kept?", 16),
    ("How much can a benchmark regress?", 17),
    ("Where are the Grafana dashboards?", 18),
    ("Which hash should hash_password use?", 19),
    ("Do I need a design doc for the billing rewrite?", 20),
    ("How are the Kubernetes manifests for api-gateway produced?", 21),
    ("Where do the translations for the signup page live?", 22),
    ("Is the public API documented anywhere?", 23),
    ("What kind of primary key should the invoices table use?", 24),
    ("How do I start local development with hot reload?", 25),
    ("Can we store customer data in us-east-1?", 26),
    ("Can I patch the vendored library in third_party/zstd?", 27),
    ("Does the error message in validate_email need a translation?", 28),
]

HELD_EVERYDAY = [
    "How do I parse JSON in Go?",
    "What does the -n flag do in grep?",
    "Explain what a goroutine is",
    "What is a promise in JavaScript?",
    "Write a poem about the moon",
    "What is the population of Japan?",
    "How do I make pancakes from scratch?",
    "Who discovered penicillin?",
    "How do I vertically align text in a table cell?",
    "What does Array.prototype.reduce do?",
    "Recommend a thriller movie for tonight",
    "Where did Melanie go on vacation?",
    "How deep is the Mariana Trench?",
    "How do you say 'excuse me' in Italian?",
    "What is 9 factorial?",
    "Explain dynamic programming simply",
    "How do I remove a coffee stain from a shirt?",
    "Write a funny story about a penguin",
    "Best time of year to visit Kyoto?",
    "Explain the causes of the Great Depression",
    "What is tail call optimization?",
    "How do I set up a Python virtualenv?",
    "How much protein is in an egg?",
    "Give me ideas for a 10 year old's birthday party",
    "What does docker ps -a show?",
    "What is the difference between TCP and QUIC?",
    "Who was the first woman to win a Nobel Prize?",
    "How does quicksort work?",
    "Is coffee bad for sleep?",
    "Draft a message congratulating Priya on her promotion",
]

# name -> (memories, related prompts, everyday prompts)
SETS: dict[str, tuple[list[str], list[tuple[str, int]], list[str]]] = {
    "dev": (DEV_STORE, DEV_RELATED, DEV_EVERYDAY),
    "held-out": (HELD_STORE, HELD_RELATED, HELD_EVERYDAY),
}


def ask(store: MemoryStore, prompt: str, k: int) -> list[Hit]:
    """What the middleware would inject for ``prompt`` as a conversation's first message."""
    decision = gate(prompt)
    if decision.skip:
        return []
    query = query_from_messages(decision.query, [])
    return store.search(query.text, k, context=query.context)


def windows(n: int, size: int) -> list[range]:
    """The stores of ``size`` memories: consecutive windows of the ``n``."""
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def figures(name: str, k: int, tmp: Path, misses: list[str] | None = None) -> dict[str, Any]:
    """The set's related-found and false-injection shares, per store size and overall."""
    memories, related, everyday = SETS[name]
    out: dict[str, Any] = {}
    total = {"found": 0, "related": 0, "false": 0, "everyday": 0}
    for size in SIZES:
        found = asked = false = pairs = 0
        for w, members in enumerate(windows(len(memories), size)):
            store = MemoryStore(tmp / f"{name}-{size}-{w}")
            ids = {i: m.id for i, m in zip(members, store.add_many([memories[i] for i in members]), strict=True)}
            for prompt, target in related:
                if target in ids:
                    asked += 1
                    hit = ids[target] in {h.memory.id for h in ask(store, prompt, k)}
                    found += hit
                    if not hit and misses is not None:
                        misses.append(f"{name} size {size}: missed {prompt!r}")
            for prompt in everyday:
                pairs += 1
                got = ask(store, prompt, k)
                false += bool(got)
                if got and misses is not None:
                    misses.append(f"{name} size {size}: {prompt!r} got {got[0].memory.text!r}")
        out[str(size)] = {"related_found": pct(found, asked), "false_everyday": pct(false, pairs)}
        for key, v in (("found", found), ("related", asked), ("false", false), ("everyday", pairs)):
            total[key] += v
    out["all"] = {"related_found": pct(total["found"], total["related"]),
                  "false_everyday": pct(total["false"], total["everyday"])}
    return out


def pct(num: int, den: int) -> float:
    return round(100.0 * num / den, 1) if den else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--misses", action="store_true", help="list the related prompts missed and the false injections")
    args = ap.parse_args(argv)
    misses: list[str] | None = [] if args.misses else None
    with tempfile.TemporaryDirectory(prefix="memwire-relevance-small-") as tmp:
        result = {name: figures(name, args.k, Path(tmp), misses) for name in SETS}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'set':10} {'store size':>10} {'related found %':>16} {'false injection %':>18}")
        for name, rows in result.items():
            for size, row in rows.items():
                print(f"{name:10} {size:>10} {row['related_found']:>16} {row['false_everyday']:>18}")
    for line in misses or []:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
