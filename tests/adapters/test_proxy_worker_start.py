"""``memwire proxy --workers N`` gives a starting worker time to answer uvicorn's health check.

uvicorn's supervisor replaces a worker that has not answered its health check within 5 s, a
starting one too. On a busy machine a worker's start (imports, the app, the warm-up) takes longer:
each replacement was killed in turn and the proxy never served (issue 34 item 9: the workers tests
failed "not ready" under load). uvicorn >= 0.37 takes ``timeout_worker_healthcheck``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from memwire.adapters.server._proxy_cli import WORKER_HEALTHCHECK_S
from memwire.cli import main


@pytest.fixture(autouse=True)
def _quiet_loggers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(tmp_path)
    levels = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_workers_get_time_to_start_before_uvicorn_replaces_them(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    served: dict[str, Any] = {}

    def run(app: Any, *, workers: int = 1, timeout_worker_healthcheck: int = 5, **kw: Any) -> None:
        served.update(app=app, workers=workers, timeout_worker_healthcheck=timeout_worker_healthcheck)

    monkeypatch.setattr(uvicorn, "run", run)
    assert main(["proxy", "--workers", "2", "--dir", str(tmp_path / "mem")]) == 0
    assert served["workers"] == 2 and served["app"] == "memwire.adapters.server._server:worker_app"
    assert served["timeout_worker_healthcheck"] == WORKER_HEALTHCHECK_S >= 30


def test_an_older_uvicorn_without_the_setting_still_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    served: dict[str, Any] = {}

    def run(app: Any, *, workers: int = 1, **kw: Any) -> None:  # uvicorn < 0.37: an unknown keyword fails
        assert "timeout_worker_healthcheck" not in kw
        served.update(app=app, workers=workers)

    monkeypatch.setattr(uvicorn, "run", run)
    assert main(["proxy", "--workers", "2", "--dir", str(tmp_path / "mem")]) == 0
    assert served["workers"] == 2
