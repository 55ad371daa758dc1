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
    """A job starts only once nothing touched the traffic gauge for ``quiet_s``. The last request
    is put 0.5 s ahead (as if requests kept coming until then): no load on the machine can make
    the job start before that."""
    traffic, ran_at = Traffic(), []
    w = Worker("t", "test", "jobs", lambda: 10, traffic, quiet_s=0.2, max_defer_s=30)
    traffic.last = last = time.monotonic() + 0.5
    w.submit(lambda: ran_at.append(time.monotonic()))
    w.flush(30)
    assert ran_at and ran_at[0] >= last + 0.2


def test_a_job_is_held_at_most_max_defer_s() -> None:
    traffic, ran = Traffic(), threading.Event()
    w = Worker("t", "test", "jobs", lambda: 10, traffic, quiet_s=0.2, max_defer_s=0.3)
    traffic.last = time.monotonic() + 3600  # saturated: never quiet
    submitted = time.monotonic()
    w.submit(ran.set)
    assert ran.wait(10)
    assert time.monotonic() - submitted >= 0.3


def test_items_offered_while_the_worker_is_busy_are_handed_over_together() -> None:
    gate, got = threading.Event(), []
    w = Worker("t", "test", "items", lambda: 5)
    assert w.submit(gate.wait, 10)
    assert all(w.offer(got.append, i) for i in range(4))  # one job for the four
    assert not w.offer(got.append, 4)  # the busy job and four items wait: the sixth thing is dropped
    gate.set()
    w.flush(10)
    assert got == [[0, 1, 2, 3]]
    assert w.offer(got.append, 5) and w.offer(got.append, 6)  # the bound counts items handed over as done
    w.flush(10)
    assert [i for batch in got for i in batch] == [0, 1, 2, 3, 5, 6]


def test_a_failing_handler_still_settles_its_items() -> None:
    w, got = Worker("t", "test", "items", lambda: 2), []

    def fail(items: list[int]) -> None:
        raise ValueError("broken")

    w.offer(fail, 1)
    w.flush(10)
    assert w.offer(got.append, 2) and w.offer(got.append, 3)
    w.flush(10)
    assert got == [[2, 3]] or got == [[2], [3]]


def test_each_dropped_job_is_counted_by_kind() -> None:
    from memwire._worker import on_dropped

    class Counts:
        def __init__(self) -> None:
            self.seen: list[tuple[str, int]] = []

        def listen(self, kind: str, count: int) -> None:
            self.seen.append((kind, count))

    counts, gate = Counts(), threading.Event()
    on_dropped(counts.listen)
    w = Worker("memwire-telemetry", "telemetry", "replies", lambda: 1)
    assert w.submit(gate.wait, 10)
    assert not w.submit(time.sleep, 0) and not w.offer(print, 1)
    gate.set()
    w.flush(10)
    assert [s for s in counts.seen if s[0] == "telemetry"] == [("telemetry", 1), ("telemetry", 1)]
