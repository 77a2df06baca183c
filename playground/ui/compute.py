"""Where the models compute: in the server's process (`Here`), or in a process of their own beside it (`Child`).

One Python process served a class's browsers and computed their new sentences. Each torch operation gives Python's
lock back and takes it again (a new prompt's 200 tokens: about 10,000 times), each retake waits for the event loop
that answers every other student, and the event loop waits in turn for the computations: with 200 students in
browsers, a page took seconds to open and a new tokenization waited behind new generations (docs/performance.md).
`Child` runs the computations of the events whose inputs are plain data (those the answer cache shares) in a
process forked from the server as it starts serving. It shares the models the server has already loaded (copy on
write) and no lock with it: the server's Python is left to the page's protocol, the models run beside it.

What crosses the pipe: the event's function (by name) and its inputs one way; its outputs (figures, HTML, the paths
of download files in the folder both processes share), the notices it showed, its progress and its CPU time the
other. A generator's steps cross one by one, and a Stop (Gradio closes the generator) stops the child's at its next
step. An exception raised there (a gr.Error's message for the user) is raised here. Outputs that cannot cross (none
of the app's do; tests/test_compute.py checks every event) are computed here instead. If the child dies, the
computations waiting for it fail with a message, and the later ones run here, as without a child.
"""

from __future__ import annotations

import inspect
import gc
import itertools
import multiprocessing
import os
import pickle
import queue
import threading
import time
from collections.abc import Callable, Iterator

import gradio as gr
import plotly.graph_objects as go
from gradio.components.plot import PlotData

from playground import heap
from playground.analysis import models
from playground.ui import common
from playground.ui.workers import use_threads

_DONE = object()


class _ProgressMarker:
    """Where a gr.Progress argument was, as it crosses (the child reports progress back); one object in each process."""

    def __reduce__(self) -> str:
        return "PROGRESS"  # pickled as this module's PROGRESS


PROGRESS = _ProgressMarker()
SLOW_NICE = 10  # a slow-pool computation's priority below the others' (CPU shares about 1 to 9), thread by thread
FORKS = "fork" in multiprocessing.get_all_start_methods()  # not on Windows: there the server computes, as before


class Here:
    """Computations in the server's own process: `call` a function, `iterate` a generator function's steps, each
    step's CPU counted in `meter` (ui/workers.py)."""

    def call(self, name: str, fn: Callable, args: tuple, kwargs: dict, meter):
        with meter:
            return fn(*args, **kwargs)

    def iterate(self, name: str, fn: Callable, args: tuple, kwargs: dict, meter) -> Iterator:
        steps = fn(*args, **kwargs)
        while True:
            with meter:
                outputs = next(steps, _DONE)
            if outputs is _DONE:
                return
            yield outputs


HERE = Here()


class Child(Here):
    """Computations in a child process: `functions` (name -> function) are what it may run, the same objects in both
    processes since it is forked after they are made; each computation runs there on a thread of its own, with
    `threads` torch threads. Until `start()` (and after the child has died) computations run here."""

    def __init__(self, functions: dict[str, Callable], threads: int = 1, name: str = "compute"):
        self.functions = functions
        self.threads, self.name = threads, name
        self.failed: str | None = None  # why the child is gone
        self._conn = None
        self._process = None
        self._jobs: dict[int, queue.SimpleQueue] = {}
        self._jobs_lock, self._send_lock = threading.Lock(), threading.Lock()
        self._ids = itertools.count()
        self._local: set[str] = set()  # functions whose outputs could not cross: computed here

    @property
    def running(self) -> bool:
        return self._conn is not None and self.failed is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> Child:
        return self.fork().listen() if FORKS else self

    def fork(self, others: tuple = ()) -> Child:
        """Fork the child (which closes the server's ends of `others`' pipes: theirs end with the server). Before the
        server starts any thread: a fork copies only the thread that calls it, and a lock another thread held at that
        moment would stay held in the child for ever."""
        common.downloads_dir()  # one folder for both processes' download files: the server checks a kept one exists
        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        servers = [ours, *(other._conn for other in others if other._conn is not None)]
        self._process = context.Process(target=_serve, args=(theirs, servers, self.functions, self.threads),
                                        name=f"playground-{self.name}", daemon=True)
        self._process.start()
        theirs.close()
        self._conn = ours
        return self

    def listen(self) -> Child:
        """Start reading the child's replies (after every fork: see `fork`)."""
        threading.Thread(target=self._replies, name=f"{self.name}-replies", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.join(10)

    def call(self, name: str, fn: Callable, args: tuple, kwargs: dict, meter):
        if not self._takes(name):
            return super().call(name, fn, args, kwargs, meter)
        job, replies, progress = self._submit(name, args, kwargs, meter)
        try:
            kind, value = self._next(replies, progress, meter)
        finally:
            self._forget(job)
        if kind == "local":
            return super().call(name, fn, args, kwargs, meter)
        if kind == "raise":
            raise value
        return value

    def iterate(self, name: str, fn: Callable, args: tuple, kwargs: dict, meter) -> Iterator:
        if not self._takes(name):
            yield from super().iterate(name, fn, args, kwargs, meter)
            return
        job, replies, progress = self._submit(name, args, kwargs, meter)
        finished = False
        try:
            while True:
                kind, value = self._next(replies, progress, meter)
                if kind == "yield":
                    yield value
                    continue
                finished = True
                if kind == "raise":
                    raise value
                if kind == "local":
                    yield from super().iterate(name, fn, args, kwargs, meter)
                return
        finally:
            if not finished:  # the caller stopped reading (a Stop): the child's generator stops at its next step
                self._send(("stop", job))
            self._forget(job)

    # -- the server's side of the pipe

    def _takes(self, name: str) -> bool:
        return self.running and name in self.functions and name not in self._local

    def _submit(self, name: str, args: tuple, kwargs: dict, meter):
        progress = [v for v in (*args, *kwargs.values()) if isinstance(v, gr.Progress)]  # Gradio's, one at most
        args = tuple(PROGRESS if isinstance(v, gr.Progress) else v for v in args)
        kwargs = {k: PROGRESS if isinstance(v, gr.Progress) else v for k, v in kwargs.items()}
        job, replies = next(self._ids), queue.SimpleQueue()
        with self._jobs_lock:
            self._jobs[job] = replies
        if not self._send(("run", job, name, args, kwargs, getattr(meter, "slow", False))):
            replies.put(("gone", None))
        return job, replies, next(iter(progress), None)

    def _send(self, message: tuple) -> bool:
        try:
            with self._send_lock:
                self._conn.send(message)
            return True
        except (OSError, ValueError):  # the child is gone
            return False

    def _next(self, replies: queue.SimpleQueue, progress, meter) -> tuple[str, object]:
        """The job's next step ("yield", "return", "raise" or "local") and its value; progress on the way is
        reported to `progress`, and each step's notices are shown (and recorded, ui/common.warn) here."""
        while True:
            kind, payload = replies.get()
            if kind == "progress":
                if progress is not None:
                    progress(*payload)
                continue
            if kind == "gone":
                raise gr.Error(f"The computation stopped: {self.failed or 'its process is gone'}. Please try again.")
            notices, seconds, value = payload
            meter.add(seconds)
            common.warn(notices)
            if kind == "local":
                self._local.add(value)
            return kind, value

    def _forget(self, job: int) -> None:
        with self._jobs_lock:
            self._jobs.pop(job, None)

    def _replies(self) -> None:
        """The reader of the child's replies, handing each to the job waiting for it."""
        try:
            while True:
                job, kind, payload = self._conn.recv()
                with self._jobs_lock:
                    replies = self._jobs.get(job)
                if replies is not None:
                    replies.put((kind, payload))
        except (EOFError, OSError, pickle.UnpicklingError) as err:
            self._process.join(1)
            self.failed = f"the compute process ended (exit code {self._process.exitcode}; {type(err).__name__})"
            with self._jobs_lock:
                waiting = list(self._jobs.values())
            for replies in waiting:
                replies.put(("gone", None))


class Lanes(Here):
    """Two child processes: `quick` computes the events placed in the quick pool (ui/workers.py), `slow` those in the
    slow one, every computation on a large model loaded only when first asked for (SmolLM2 where the server did not
    load it as it started: one copy, in one process) and the live training runs. Each has its own lock. A
    computation of the slow pool runs at a lower priority (nice SLOW_NICE) on a thread of its own, wherever it runs,
    and the system's scheduler runs a new sentence's tokens (10 ms) before another step of a new prompt's 200 tokens
    (a second of CPU): a class's generations take what the rest leaves of the two cores, and never hold up the quick
    questions. The priority is the thread's, not the lane's: a quick question that runs in the slow lane beside the
    generations (SmolLM2's attention, where SmolLM2 is there only) got a share of what they were left when the whole
    lane was niced (p95 20 s, 2026-11-27)."""

    def __init__(self, functions: dict[str, Callable], threads: int = 1):
        self.quick = Child(functions, threads, name="quick")
        self.slow = Child(functions, threads, name="slow")

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in (self.quick, self.slow) if child.pid is not None]

    def start(self, preload: Callable[[], None] = lambda: None) -> Lanes:
        """`preload` first: what it loads is in memory once, shared by both children. Where a process cannot fork
        (Windows), nothing is started and every computation runs in the server's process.

        Then every Python object alive is frozen out of the cycle collector (gc.freeze), in the server and so in
        both children. A collection writes into the header of every object it walks, and a page written after the
        fork is copied into the process that wrote it: each of the three processes then held its own copy of every
        page of the models', tokenizers' and page's Python objects. Measured on the served app after the page's
        defaults were answered: 1,087 MB without, 841 MB with (docs/performance.md)."""
        if not FORKS:
            return self
        preload()
        gc.collect()  # the garbage out first: a frozen cycle is never collected
        gc.freeze()
        self.quick.fork()
        self.slow.fork(others=(self.quick,))
        self.quick.listen(), self.slow.listen()
        return self

    def stop(self) -> None:
        self.quick.stop(), self.slow.stop()

    def call(self, name: str, fn: Callable, args: tuple, kwargs: dict, meter):
        return self._lane(args, kwargs, meter).call(name, fn, args, kwargs, meter)

    def iterate(self, name: str, fn: Callable, args: tuple, kwargs: dict, meter) -> Iterator:
        return self._lane(args, kwargs, meter).iterate(name, fn, args, kwargs, meter)

    def _lane(self, args: tuple, kwargs: dict, meter) -> Child:
        """The lane of the computation's pool; the slow one, whatever its pool, for a large model that the server did
        not load before forking (a process of its own would load a second copy: one copy, in the slow lane)."""
        slow = getattr(meter, "slow", False) or any(models.large(v) and not models.loaded(v)
                                                    for v in (*args, *kwargs.values()))
        first, other = (self.slow, self.quick) if slow else (self.quick, self.slow)
        return first if first.running or not other.running else other



# -- the child's side of the pipe

def _serve(conn, servers: list, functions: dict[str, Callable], threads: int) -> None:
    """The child's loop: each "run" on a thread of its own, "stop" marks a generator to stop at its next step."""
    for end in servers:  # so that the server's end closing (it stopped, or was killed) ends this loop
        end.close()
    use_threads(threads)
    common.show_toasts(False)  # the server shows each computation's notices as they arrive
    sending, stopped = threading.Lock(), set()

    def reply(job: int, kind: str, payload: tuple, name: str | None = None) -> bool:
        """Send one message; False when a step's outputs cannot be pickled (then "local": the server computes the
        event itself). Pickled here, once, so that a refusal sends nothing of it."""
        try:
            data = pickle.dumps((job, kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - any object that refuses to be pickled
            data = pickle.dumps((job, "local", (payload[0], payload[1], name)), protocol=pickle.HIGHEST_PROTOCOL)
            kind = "local"
        with sending:
            conn.send_bytes(data)
        return kind != "local"

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            stopped.add(message[1])
            continue
        _, job, name, args, kwargs, slow = message
        threading.Thread(target=_run, args=(reply, stopped, job, name, functions[name], args, kwargs, slow),
                         name=f"compute-{job}", daemon=True).start()


def _run(reply, stopped: set, job: int, name: str, fn: Callable, args: tuple, kwargs: dict, slow: bool) -> None:
    """One computation: its steps, return or exception sent back with the notices shown since the last message and the
    CPU time spent since (this thread's). A computation of the slow pool first lowers its thread's priority."""
    if slow:
        lower_priority()
    args = tuple(_Progress(reply, job) if v is PROGRESS else v for v in args)
    kwargs = {k: _Progress(reply, job) if v is PROGRESS else v for k, v in kwargs.items()}
    clock = [time.thread_time()]

    def spent() -> float:
        now = time.thread_time()
        seconds, clock[0] = now - clock[0], now
        return seconds

    with common.recording_notices() as shown:
        def since() -> list[str]:
            notices = list(shown)
            shown.clear()
            return notices

        try:
            if inspect.isgeneratorfunction(fn):
                steps = fn(*args, **kwargs)
                for outputs in steps:
                    if not reply(job, "yield", (since(), spent(), _drawn(outputs)), name) or job in stopped:
                        steps.close()
                        return
                reply(job, "return", (since(), spent(), None))
            else:
                outputs = fn(*args, **kwargs)
                reply(job, "return", (since(), spent(), _drawn(outputs)), name)
        except Exception as err:  # noqa: BLE001 - raised again in the server, as if raised there
            reply(job, "raise", (since(), spent(), _crossable(err)))
        finally:
            stopped.discard(job)
            heap.trim()  # what the computation freed goes back to the system (playground/heap.py)


def lower_priority() -> None:
    """This thread (only) SLOW_NICE below its process: Linux keeps a priority per thread, and any thread may lower its
    own. Where that is not so (elsewhere than Linux), it stays as it is."""
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + SLOW_NICE))
    except (AttributeError, OSError):
        pass


def _drawn(outputs):
    """A step's outputs with each plotly figure as the JSON gr.Plot makes of it (its PlotData, which gr.Plot passes
    through): written here, it is neither written by the server nor rebuilt there from its pickle, which runs
    plotly's validation of every property again (11% of the server's CPU under a lecture hall)."""
    if isinstance(outputs, tuple):
        return tuple(map(_drawn, outputs))
    if isinstance(outputs, go.Figure):
        return PlotData(type="plotly", plot=outputs.to_json())
    if isinstance(outputs, dict) and isinstance(outputs.get("value"), go.Figure):  # gr.update(value=figure)
        return {**outputs, "value": _drawn(outputs["value"])}
    return outputs


def _crossable(err: Exception) -> Exception:
    """The exception itself when it pickles (a gr.Error keeps its message), else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(err).__name__}: {err}")


class _Progress:
    """A gr.Progress in the child: each report goes to the server's gr.Progress of the same event."""

    def __init__(self, reply, job: int):
        self._reply, self._job = reply, job

    def __call__(self, progress=None, desc: str | None = None, total: int | None = None, unit: str = "steps",
                 *_, **__) -> None:
        self._reply(self._job, "progress", (progress, desc, total, unit))

    def tqdm(self, iterable, desc: str | None = None, total: int | None = None, unit: str = "steps", *_, **__):
        total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
        for i, item in enumerate(iterable):
            self((i, total) if total else None, desc, total, unit)
            yield item
