"""The benchmarks' CPU window (`bench/_relay_procs.CpuMark`): a busy thread that ends inside
the window must not take its earlier time out of the window's figure (a difference of two
sums over the live threads came out negative then)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import _relay_procs as procs


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_busy_thread_that_ends_in_the_window_leaves_it_non_negative() -> None:
    pid = os.getpid()
    done = threading.Event()
    release = threading.Event()

    def worker() -> None:
        _spin(0.2)
        done.set()
        release.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    assert done.wait(10)
    mark, total_before = procs.CpuMark(pid), procs.cpu_ns(pid)
    release.set()
    thread.join(10)
    _spin(0.02)  # this thread's own work inside the window
    window = mark.since()[0]
    assert 0.015e9 <= window < 0.15e9  # this thread's 20 ms, none of the ended one's 200 ms
    assert procs.cpu_ns(pid) - total_before < 0  # what the sums would have said
