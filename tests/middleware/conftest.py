from __future__ import annotations

from pathlib import Path

import pytest

from memwire import MemoryStore

MEMORIES = [
    ("Run the test suite with `make test`; it needs Docker running for the Postgres fixtures", ["build"]),
    ("Build the wheel with `make dist`, never call setup.py directly", ["build"]),
    ("User prefers tabs over spaces, width 4, in every Python file", ["preference"]),
    ("We decided to use ruff instead of flake8 and black for linting and formatting", ["decision"]),
    ("The staging database is Postgres 15 on port 5433, prod is on 5432", ["infra"]),
    ("Lesson: the flaky test_upload test fails when the S3 mock starts late; add a readiness wait", ["lesson"]),
    ("Deploys go out on Tuesdays only, via the GitHub Actions deploy workflow", ["process"]),
    ("User wants commit messages in imperative mood, under 72 characters", ["preference"]),
    ("The API server is FastAPI, started locally with `uvicorn app.main:app --reload`", ["build"]),
    ("Frontend uses React with Vite; run `npm run dev` on port 5173", ["build"]),
    ("Never log API keys; the logger has a redaction filter in app/logging.py", ["lesson"]),
    ("Migrations are managed by Alembic; create one with `alembic revision --autogenerate`", ["build"]),
    ("The cache layer is Redis 7; keys expire after one hour by default", ["infra"]),
    ("User's name is Dana and she leads the payments team", ["person"]),
    ("Decision: money amounts are stored as integer cents, never floats", ["decision"]),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    d: Path = tmp_path_factory.mktemp("mem")
    s = MemoryStore(d)
    s.add_many([])
    for text, tags in MEMORIES:
        s.add(text, tags=tags, pinned="prefers tabs" in text)
    return s
