"""The background worker capture and telemetry share: in order, bounded, yielding to traffic."""

from __future__ import annotations

import threading
import time

from memwire._worker import Traffic, Worker


def test_jobs_run_in_order_and_past_the_bound_are_dropped() -> None:
    gate, done = threading.Event(), []
    w = Worker("t", "test", "jobs", lambda: 2)
    assert w.submit(gate.wait, 10)
    assert w.submit(done.append, 1)
    assert not w.submit(done.append, 2)  # two waiting: the third is dropped
    gate.set()
    w.flush(10)
    assert done == [1]


def test_a_job_waits_while_requests_keep_coming() -> None:
    """A job starts only once nothing touched the traffic gauge for ``quiet_s``."""
    traffic, ran = Traffic(), threading.Event()
    w = Worker("t", "test", "jobs", lambda: 10, traffic, quiet_s=0.2, max_defer_s=30)
    traffic.touch()
    w.submit(ran.set)
    busy_until = time.monotonic() + 0.6
    while time.monotonic() < busy_until:  # a request every 50 ms
        traffic.touch()
        assert not ran.is_set()
        time.sleep(0.05)
    stopped = time.monotonic()
    assert ran.wait(10)
    assert time.monotonic() - stopped >= 0.15  # quiet_s after the last request, not before


def test_a_job_is_held_at_most_max_defer_s() -> None:
    traffic, ran = Traffic(), threading.Event()
    w = Worker("t", "test", "jobs", lambda: 10, traffic, quiet_s=0.2, max_defer_s=0.3)
    traffic.touch()
    submitted = time.monotonic()
    w.submit(ran.set)
    while not ran.is_set() and time.monotonic() - submitted < 10:
        traffic.touch()  # saturated: never quiet
        time.sleep(0.01)
    assert ran.is_set()
    assert 0.3 <= time.monotonic() - submitted < 5
