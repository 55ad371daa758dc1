"""Memory that stays true (issue 33 items 1, 3, 5): the decision "same subject, new value", duplicates
in other words, look-alikes kept apart, conflicts; the store's add path on both backends; history,
dedupe, restore."""

from __future__ import annotations

import pytest

from memwire.memory._supersede import compare

# (kind, older memory, newer memory, expected verdict)
UPDATES = [
    ("The staging database listens on port 5433.", "The staging database now listens on port 6543."),
    ("The staging database now listens on port 6543.", "The staging database listens on port 7000."),
    ("User's timezone is Europe/Paris.", "User's timezone is America/New_York."),
    ("My timezone is Europe/Paris.", "My timezone is America/New_York."),
    ("The deploy script is deploy.sh.", "The deploy script is ship.sh."),
    ("The release branch is called release-2025.", "The release branch is called release-2026."),
    ("The API server runs on port 8080.", "The API server runs on port 9090 now."),
    ("We use Python 3.11 in CI.", "We use Python 3.12 in CI."),
    ("The config file lives at ~/.config/app/old.toml.", "The config file lives at ~/.config/app/settings.toml."),
    ("The team lead is Alice.", "The team lead is Bob."),
    ("Carol lives in Berlin.", "Carol lives in Munich."),
    ("I have two cats.", "I have three cats."),
    ("The CI runs on GitHub Actions.", "The CI now runs on GitLab CI."),
    ("The logs are stored in /var/log/app.", "The logs are stored in /srv/logs/app instead."),
    ("The default branch is `master`.", "The default branch is `main`."),
    ("The staging database listens on port 5433.", "The staging database moved from port 5433 to port 6543."),
    ("We deploy on Fridays.", "We deploy on Mondays."),
    ("The Node version of the frontend is 18.", "The Node version of the frontend is 20."),
    ("Remember that the code freeze starts on 2026-11-29.", "The code freeze starts on 2026-12-03."),
    ("The max upload size is 10 MB.", "The max upload size is 25 MB."),
    ("We use Docker for local development.", "We no longer use Docker for local development."),
]
PREFERENCES = [
    ("I prefer npm for installing packages.", "I prefer pnpm over npm now."),
    ("User prefers npm for installing packages.", "User prefers pnpm over npm now."),
    ("Use tabs for indentation.", "Use spaces for indentation."),
    ("Indent with tabs.", "Indent with 4 spaces."),
    ("Always run the tests with pytest.", "Run the tests with unittest from now on."),
    ("I like dark mode.", "I prefer light mode."),
    ("Use yarn.", "We switched from yarn to pnpm."),
    ("Keep answers detailed.", "Keep answers concise."),
    ("Format Python with black.", "Format Python with ruff instead of black."),
]
LOOKALIKES = [
    ("The staging Redis port is 6380.", "The production database port is 5432."),
    ("The production database port is 5432.", "The staging Redis port is 6380."),
    ("The staging Redis port is 6380.", "The staging Postgres port is 5432."),
    ("Alice's phone number is 555-1234.", "Bob's phone number is 555-9876."),
    ("The frontend runs on port 3000.", "The backend runs on port 8000."),
    ("Our Python version is 3.11.", "Our Node version is 20."),
    ("The staging database listens on port 5433.", "The staging database has 16 GB of RAM."),
    ("My sister's name is Anna.", "My brother's name is Tom."),
    ("Alice is on the platform team.", "Bob is on the platform team."),
    ("Carol lives in Berlin.", "Dave lives in Berlin."),
    ("I prefer npm for installing packages.", "I prefer dark mode in the editor."),
    ("Use tabs in Python files.", "Use spaces in YAML files."),
    ("The staging database port is 5432.", "The production database port is 5432."),
    ("The deploy script is ship.sh.", "The test script is run_tests.sh."),
    ("My timezone is Europe/Paris.", "My home office is in Europe/Berlin."),
    ("I prefer Python for scripts.", "I prefer Go for services."),
    ("The ledger runs on PostgreSQL 15.", "The billing service runs on MySQL 8."),
    ("Remember that Bob's birthday is 1990-04-12.", "Remember that Alice's birthday is 1992-07-30."),
]
DUPLICATES = [
    ("The ledger runs on PostgreSQL 15.", "The ledger database is PostgreSQL 15."),
    ("The staging database listens on port 5433.", "Remember that the staging database listens on port 5433."),
    ("User prefers tabs for indentation.", "I prefer tabs for indentation."),
    ("I like dark mode.", "User prefers dark mode."),
    ("The deploy script is ship.sh.", "Keep in mind that the deploy script is ship.sh"),
    ("Use pnpm for installing packages.", "Always use pnpm to install packages."),
    ("Our Python version is 3.12.", "We are on Python version 3.12."),
]
CONFLICTS = [
    ("The API runs on port 8080.", "The API gateway runs on port 9090."),
    ("The staging database listens on port 5433.", "The staging database listens on a different port now."),
    ("The build takes 10 minutes.", "The full build takes 25 minutes."),
]

CASES = ([("update", o, n, "supersede") for o, n in UPDATES]
         + [("preference", o, n, "supersede") for o, n in PREFERENCES]
         + [("look-alike", o, n, "separate") for o, n in LOOKALIKES]
         + [("duplicate", o, n, "duplicate") for o, n in DUPLICATES]
         + [("unsure", o, n, "conflict") for o, n in CONFLICTS])


def test_the_table_has_forty_cases_at_least() -> None:
    assert len(CASES) >= 40
    assert {k for k, *_ in CASES} == {"update", "preference", "look-alike", "duplicate", "unsure"}


@pytest.mark.parametrize(("kind", "old", "new", "expected"), CASES, ids=[f"{c[0]}:{c[2][:40]}" for c in CASES])
def test_compare(kind: str, old: str, new: str, expected: str) -> None:
    assert compare(new, old) == expected
