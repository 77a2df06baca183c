"""Who may compute now: the app's model workers, in two pools, and each computation's share of the cores.

A lecture hall's quick questions (a new sentence's tokens, 10 ms) must never wait behind a slow one (a new prompt's
200 generated tokens, about a second). `Workers` keeps two pools and places each event by the CPU time its own
computations typically take. Typically: the median of its last few, so one odd computation does not move an event
for good. With a running mean, a single new sentence whose tokenization took 3 s of CPU moved /tokenize to the slow
pool, where its next 10 ms computations waited 20 s behind a class's generations (the lecture hall through
browsers, 2026-11-27). CPU time, not wall time: wall time grows with the machine's load, and under a lecture hall
a new sentence's gradient flow (0.2 s of CPU) took over half a second and moved to the slow pool (p95 8.6 s).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import threading
import time
from collections import deque

from playground import heap

RECENT = 5  # computations of an event whose median places it


class CpuMeter:
    """The CPU seconds of a computation: the pieces of work done inside `with meter:` on this process's threads (a
    generator's steps may each run on another of Gradio's threads), plus what `add` reports (the compute process's
    own, ui/compute.py)."""

    def __init__(self):
        self.seconds = 0.0
        self.slow = False  # a computation of the slow pool (Workers.take)

    def __enter__(self):
        self._started = time.thread_time()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds += time.thread_time() - self._started

    def add(self, seconds: float) -> None:
        self.seconds += seconds


class Workers:
    """`quick` workers for the events whose computations take well under `threshold` seconds of CPU and `slow` ones
    for those that do not. A new event counts as quick until it has taken long. `long`: every computation under
    these workers is a slow one (live training), whichever pool it takes. The meter `take` yields says which
    (`meter.slow`): ui/compute.py computes the slow ones in its slow lane. `expect_slow`: an event known to take
    seconds starts in the slow pool instead (its first computation, in the quick lane, held the quick questions up
    for its seconds, and loaded there what the slow lane loads too: a second copy, docs/performance.md)."""

    def __init__(self, quick: int, slow: int = 0, threshold: float = 0.5, long: bool = False, batched: int = 0):
        self.threshold, self.long = threshold, long
        self._size = {"quick": quick, "slow": slow, "batched": batched}
        self._pools = {pool: threading.BoundedSemaphore(size) for pool, size in self._size.items() if size}
        self._recent: dict[str, deque[float]] = {}  # handler -> CPU seconds of its last computations
        self._batched: set[str] = set()  # handlers whose computations wait on a generation engine
        self._lock = threading.Lock()
        self._asking = dict.fromkeys(self._size, 0)  # computations computing or waiting, per pool
        self.spent: dict[str, list[float]] = {}  # handler -> computations, seconds waiting, computing, of CPU

    def expect_slow(self, handler: str) -> None:
        """`handler` counts as slow until its own computations say otherwise (its median, as any event's)."""
        with self._lock:
            self._recent.setdefault(handler, deque([math.inf], maxlen=RECENT))

    def expect_batched(self, handler: str) -> None:
        """`handler` generates (playground/serving/engine.py): its computations mostly wait for the engine's steps,
        which advance every generation at once, so the `batched` pool lets that many in together (in the slow
        lane, where the engine runs), instead of the slow pool's few one after the other."""
        with self._lock:
            self._batched.add(handler)

    def pool(self, handler: str) -> str:
        """The pool `handler`'s next computation takes: "batched", "slow" (the median of its last RECENT is over the
        threshold) or "quick"."""
        with self._lock:
            if handler in self._batched and "batched" in self._pools:
                return "batched"
            recent = list(self._recent.get(handler, ()))
        return "slow" if "slow" in self._pools and recent and statistics.median(recent) > self.threshold else "quick"

    def is_slow(self, handler: str) -> bool:
        """Whether `handler`'s computations go to the slow lane (the slow pool's, or the batched pool's)."""
        return self.pool(handler) != "quick"

    def ahead(self, handler: str) -> int:
        """How many computations a new one of `handler` would wait behind: those waiting for its pool, plus one when
        every worker of the pool is taken (0: it computes at once)."""
        pool = self.pool(handler)
        with self._lock:
            return max(0, self._asking[pool] - self._size[pool] + 1)

    def beside(self, handler: str) -> int:
        """How many computations of `handler`'s pool are computing now: a new one that need not wait shares the
        cores with them (the slow pool's run at a lower priority, so under a class its first step may take seconds)."""
        pool = self.pool(handler)
        with self._lock:
            return min(self._asking[pool], self._size[pool])

    @contextlib.contextmanager
    def take(self, handler: str):
        """A worker for one computation of `handler`; what it yields counts the computation's CPU time."""
        meter, asked, pool = CpuMeter(), time.perf_counter(), self.pool(handler)
        meter.slow = pool != "quick" or self.long
        with self._lock:
            self._asking[pool] += 1
        try:
            with self._pools[pool]:
                started = time.perf_counter()
                try:
                    yield meter
                finally:
                    with self._lock:
                        self._recent.setdefault(handler, deque(maxlen=RECENT)).append(meter.seconds)
                        spent = self.spent.setdefault(handler.split("@")[0], [0, 0.0, 0.0, 0.0])
                        for i, x in enumerate((1, started - asked, time.perf_counter() - started, meter.seconds)):
                            spent[i] += x
        finally:  # what the computation freed goes back to the system (playground/heap.py), the worker already free
            with self._lock:
                self._asking[pool] -= 1
            heap.trim()


def share_cores(computations: int) -> int:
    """Give each of `computations` running at once its share of the CPU's cores as torch's threads; the share.

    torch splits every operation over all the cores by default, and its threads wait for each other spinning:
    three computations at once on two cores (the app's workers) then run six threads on two cores, and each
    waits for threads that are not running. Measured on the 2-core VM with other work on it: a new prompt's 200
    tokens took 18 s with torch's 2 threads and 1.3 s with one. The app's small models keep both cores busy by
    computing several answers at once, one core each."""
    threads = share(computations)
    use_threads(threads)
    return threads


def share(computations: int) -> int:
    """Each of `computations` running at once: its share of the CPU's cores, in threads (at least one)."""
    return max(1, cores() // computations)


def use_threads(threads: int) -> None:
    """torch's threads for each operation of this process (ui/ computes nothing itself: this is its one reach into
    torch, and the compute process sets its own with it)."""
    import torch

    torch.set_num_threads(threads)


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
