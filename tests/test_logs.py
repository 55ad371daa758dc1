"""`memwire proxy --log-format json`: one JSON object per line, from the command and each worker."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memwire._logs import configure_logging

ROOT = Path(__file__).resolve().parents[1]


def test_json_lines_carry_the_fields_and_the_error(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    try:
        log = logging.getLogger("jsonlog.test")
        log.info("POST /v1/messages 200 injected=%d", 3)
        try:
            1 / 0
        except ZeroDivisionError:
            log.exception("it broke")
        err = capsys.readouterr().err.splitlines()
        # every line this handler wrote is JSON; other threads of the suite may log meanwhile
        lines = [r for r in map(json.loads, [x for x in err if x.startswith("{")]) if r["logger"] == "jsonlog.test"]
    finally:
        configure_logging("warning", "text")
    assert [(r["level"], r["logger"], r["message"]) for r in lines] == [
        ("info", "jsonlog.test", "POST /v1/messages 200 injected=3"), ("error", "jsonlog.test", "it broke")]
    assert lines[0]["at"].endswith("Z") and "ZeroDivisionError" in lines[1]["error"]
    with pytest.raises(ValueError, match="log format must be one of text, json"):
        configure_logging("info", "xml")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_proxy_logs_json_and_never_the_message(tmp_path: Path, workers: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")}, "PYTHONPATH": str(ROOT),
           "MEMWIRE_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = tmp_path / "out"
    with open(out, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "memwire.cli", "proxy", "--dir", str(tmp_path / "mem"),
                                 "--port", str(port), "--workers", workers, "--log-format", "json",
                                 "--log-level", "info", "--openai-upstream", "http://127.0.0.1:9"],
                                env=env, cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=10) as http:  # one client for every try (a new one loads the CA certificates)
            while True:
                try:
                    r = http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={
                        "model": "gpt-4o", "messages": [{"role": "user", "content": "my secret question"}]})
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline and proc.poll() is None, out.read_text()
                    time.sleep(0.02)
        assert r.status_code == 502  # no upstream: the failure is logged, as JSON
        deadline = time.monotonic() + 30  # its line is written once the answer is out (a hang guard)
        while "POST /v1/chat/completions 502" not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(30)
    text = out.read_text()
    records = [json.loads(line) for line in text.splitlines()]  # every line is JSON, the banner too
    assert any(r["logger"] == "memwire.proxy" and "POST /v1/chat/completions 502" in r["message"] for r in records)
    assert any("memwire proxy on" in r["message"] for r in records)
    assert "secret question" not in text


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_exception_is_logged_by_its_type_and_safe_detail_never_its_message(
        fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Exceptions as arguments and tracebacks (chained ones too), from memwire's loggers and any
    other under ``configure_logging``: the type, the frames and the details that hold no text
    (an OS error's code and file, a JSON position, an HTTP status), never the message."""
    import errno

    from memwire._errors import InvalidMemoryError, StoreUnavailableError

    class Status(Exception):
        response = type("R", (), {"status_code": 503})()

    configure_logging("debug", fmt)
    try:
        mine, other = logging.getLogger("memwire"), logging.getLogger("some.library")
        mine.warning("memwire: capture failed (%s: %s)", "InvalidMemoryError",
                     InvalidMemoryError("cannot store 'Qz7one'"))
        mine.warning("memwire: a write failed (%s)", OSError(errno.ENOSPC, "full of Qz7two", "/m/MEMORY.md"))
        mine.info("memwire: answer not read (%s)", json.JSONDecodeError("Expecting value", '{"Qz7three', 1))
        other.warning("upstream said %(err)s", {"err": Status("body: Qz7four")})
        mine.warning("memwire: outage (%s)", StoreUnavailableError("the memory database postgresql://db/x is unavailable"))
        try:
            try:
                raise KeyError("Qz" + "7five")  # built: a traceback's frames quote the source line
            except KeyError as exc:
                raise ValueError("while reading Qz" + "7six") from exc
        except ValueError:
            other.exception("Exception in ASGI application")
        err = capsys.readouterr().err
    finally:
        configure_logging("warning", "text")
    assert "Qz7" not in err, err
    assert "capture failed (InvalidMemoryError: details not logged)" in err
    assert "OSError: ENOSPC (No space left on device) /m/MEMORY.md" in err
    assert "JSONDecodeError: Expecting value at line 1 column 2" in err
    assert "upstream said Status: status 503" in err
    assert "postgresql://db/x is unavailable" in err  # memwire's own phrase about a database: kept
    assert "KeyError" in err and "ValueError" in err and "test_logs.py" in err  # the traceback's frames stay


def test_describe_names_an_os_error_s_paths_as_paths() -> None:
    from memwire._logs import describe

    gone = "FileNotFoundError: ENOENT (No such file or directory)"
    assert describe(OSError(2, "gone", "/tmp/a", None, "/tmp/b")) == f"{gone} /tmp/a /tmp/b"
    assert describe(OSError(2, "gone", b"/tmp/a")) == f"{gone} /tmp/a"  # not "b'/tmp/a'"
    assert describe(OSError(2, "gone", Path("/tmp/c"))) == f"{gone} /tmp/c"
