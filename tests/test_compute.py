"""Computations in a child process (playground/ui/compute.py): what crosses, and what happens when it cannot.

The child is forked from this process, so the functions it may run are this module's. The served app's own events
go through it in tests/test_compute_served.py."""

from __future__ import annotations

import os
import sys
import threading
import time

import gradio as gr
import plotly.graph_objects as go
import pytest
from gradio.components.plot import PlotData

from playground.ui import common
from playground.ui.cache import AnswerCache
from playground.ui.compute import HERE, SLOW_NICE, Child, Lanes
from playground.ui.workers import CpuMeter, Workers

pytestmark = pytest.mark.process  # the compute lanes: processes forked beside the server

STEPS_FILE = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"playground-compute-steps-{os.getpid()}")


def pid(_=None):
    return os.getpid()


def clamped(x):
    common.warn([f"{x} is clamped"])
    return x * 2


def refuses(x):
    raise gr.Error(f"no {x}")


def breaks(x):
    raise ValueError(f"broken by {x}")


def counts(n):
    for i in range(n):
        with open(STEPS_FILE, "a") as f:
            f.write(f"{i}\n")
        time.sleep(0.02)
        yield i


def figure(title):
    return go.Figure(go.Bar(x=[1, 2], y=[3, 4]), layout={"title": title}), gr.update(value=go.Figure(), visible=True)


def unpicklable(_):
    return threading.Lock()


def progressing(n, progress=gr.Progress()):
    for i in range(n):
        progress((i + 1) / n, desc=f"step {i + 1}")
    return n


def dies(_):
    os._exit(3)


def priority(_=None):
    """The nice value of the thread computing this."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


FUNCTIONS = {f.__name__: f for f in (pid, clamped, refuses, breaks, counts, figure, unpicklable, progressing, dies,
                                     priority)}


@pytest.fixture(scope="module")
def child():
    started = Child(dict(FUNCTIONS)).start()
    yield started
    started.stop()


def test_a_computation_runs_in_the_child_and_its_answer_comes_back(child):
    meter = CpuMeter()
    assert child.call("pid", pid, (), {}, meter) == child.pid != os.getpid()
    assert HERE.call("pid", pid, (), {}, CpuMeter()) == os.getpid()


def test_its_notices_are_shown_and_recorded_here(child):
    with common.recording_notices() as shown:
        assert child.call("clamped", clamped, (4,), {}, CpuMeter()) == 8
    assert shown == ["4 is clamped"]


def test_a_gr_error_keeps_its_message_and_another_error_its_kind(child):
    with pytest.raises(gr.Error, match="no cake"):
        child.call("refuses", refuses, ("cake",), {}, CpuMeter())
    with pytest.raises(ValueError, match="broken by 2"):
        child.call("breaks", breaks, (2,), {}, CpuMeter())


def test_a_figure_crosses_as_the_json_gradio_makes_of_it(child):
    drawn, update = child.call("figure", figure, ("hello",), {}, CpuMeter())
    here, _ = figure("hello")
    assert isinstance(drawn, PlotData) and drawn.plot == here.to_json()
    assert gr.Plot().postprocess(drawn) == gr.Plot().postprocess(here)
    assert isinstance(update["value"], PlotData) and update["visible"] is True


def test_a_generator_streams_and_a_stop_stops_the_childs_steps(child):
    if os.path.exists(STEPS_FILE):
        os.remove(STEPS_FILE)
    steps = child.iterate("counts", counts, (200,), {}, CpuMeter())
    assert [next(steps) for _ in range(3)] == [0, 1, 2]
    steps.close()  # what Gradio does on a Stop
    time.sleep(0.3)
    done = len(open(STEPS_FILE).read().split())
    time.sleep(0.3)
    assert len(open(STEPS_FILE).read().split()) == done < 200, "the child went on computing after the stop"
    assert list(child.iterate("counts", counts, (3,), {}, CpuMeter())) == [0, 1, 2]


def test_progress_is_reported_to_the_events_own_progress(child):
    seen = []

    class Progress(gr.Progress):
        def __call__(self, progress=None, desc=None, total=None, unit="steps", **_):
            seen.append((progress, desc))

    assert child.call("progressing", progressing, (2,), {"progress": Progress()}, CpuMeter()) == 2
    assert child.call("progressing", progressing, (1, Progress()), {}, CpuMeter()) == 1  # passed in its place
    assert seen == [(0.5, "step 1"), (1.0, "step 2"), (1.0, "step 1")]


def test_the_cpu_time_of_the_child_is_counted(child):
    meter = CpuMeter()
    list(child.iterate("counts", counts, (5,), {}, meter))
    assert 0 < meter.seconds < 1


def test_outputs_that_cannot_cross_are_computed_here(child):
    lock = child.call("unpicklable", unpicklable, (1,), {}, CpuMeter())
    assert isinstance(lock, type(threading.Lock()))
    assert not child._takes("unpicklable"), "it would cross the pipe again in vain"


def test_the_answer_cache_computes_its_misses_in_the_child():
    answers = AnswerCache()
    wrapped = answers.wrap(pid, 1, (), Workers(1))
    answers.compute = Child(answers.functions).start()
    try:
        assert wrapped("a") != os.getpid()
        assert wrapped("a") == wrapped("a")  # a hit: no computation
        assert answers.hits >= 2
    finally:
        answers.compute.stop()


@pytest.mark.parametrize("before_the_fork", [False, True])
def test_the_slow_lane_takes_slow_computations_and_large_models_loaded_after_the_fork(before_the_fork, monkeypatch):
    """A large model the server did not load before forking is loaded by the slow lane only (one copy); one it did
    load is shared by both lanes, and its computations go where their pool says."""
    from playground.analysis import models

    monkeypatch.setattr(models, "loaded", lambda name: before_the_fork and models.large(name))
    lanes = Lanes(dict(FUNCTIONS)).start()
    try:
        quick, slow = CpuMeter(), CpuMeter()
        slow.slow = True
        assert lanes.call("pid", pid, (), {}, quick) == lanes.quick.pid
        assert lanes.call("pid", pid, (), {}, slow) == lanes.slow.pid
        expected = lanes.quick.pid if before_the_fork else lanes.slow.pid
        assert lanes.call("pid", pid, ("smollm2",), {}, quick) == expected
        assert lanes.call("pid", pid, ("smollm2",), {}, slow) == lanes.slow.pid
        # the Embeddings tab's name of the sentence-transformers library's MiniLM: the library imported in one lane
        assert lanes.call("pid", pid, ("sentence-transformers",), {}, quick) == expected
    finally:
        lanes.stop()


def test_the_events_that_take_seconds_from_their_first_computation_start_in_the_slow_pool():
    """The live probe, chain of thought and tool calling (ui/demo.SLOW_AT_FIRST): their first computation in the quick
    pool held a class's quick questions up for seconds, and the probe's optimizer imported torch._dynamo (81 MB) in
    the quick lane beside the slow lane's copy. Every other event starts quick. On a page of its own, as set_queues
    places the app's events (the app's own have been computed by other tests: their times place them now)."""
    import gradio as gr

    from playground.ui.demo import SLOW_AT_FIRST, set_queues

    def classify_probe(x):
        return x

    def tokenize(x):
        return x

    with gr.Blocks() as demo:
        box = gr.Textbox()
        for fn in (classify_probe, tokenize):
            gr.Button(fn.__name__).click(fn, box, box, api_name=fn.__name__)
    answers = set_queues(demo).answers
    slow = {handler.split("@")[0].rsplit(".", 1)[-1] for handler in answers.functions
            if any(workers.is_slow(handler) for workers in answers.workers.values())}
    assert "classify_probe" in SLOW_AT_FIRST and slow == {"classify_probe"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a priority per thread is Linux's")
def test_a_slow_computation_runs_at_a_lower_priority_and_a_quick_one_beside_it_does_not(monkeypatch):
    """The priority is the computation's thread's: SmolLM2's quick questions (in the slow lane, where its one copy is
    when the server did not load it before forking) run at the server's priority beside its niced generations."""
    from playground.analysis import models

    monkeypatch.setattr(models, "loaded", lambda name: False)
    lanes = Lanes(dict(FUNCTIONS)).start()
    try:
        quick, slow = CpuMeter(), CpuMeter()
        slow.slow = True
        assert lanes.call("priority", priority, ("smollm2",), {}, quick) == os.getpriority(os.PRIO_PROCESS, 0)
        lowered = min(19, os.getpriority(os.PRIO_PROCESS, 0) + SLOW_NICE)
        assert lanes.call("priority", priority, ("smollm2",), {}, slow) == lowered
        assert lanes.call("priority", priority, ("smollm2",), {}, quick) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        lanes.stop()


def test_when_the_child_dies_the_waiting_computation_fails_and_the_next_runs_here():
    gone = Child(dict(FUNCTIONS)).start()
    with pytest.raises(gr.Error, match="process"):
        gone.call("dies", dies, (1,), {}, CpuMeter())
    for _ in range(50):
        if not gone.running:
            break
        time.sleep(0.1)
    assert gone.call("pid", pid, (), {}, CpuMeter()) == os.getpid()


def test_the_lanes_end_when_the_server_is_stopped():
    """A Space or a terminal stops the server with SIGTERM, which ends it without its exit handlers: each lane sees its
    pipe close and ends too, leaving no process behind."""
    import signal
    import subprocess
    import sys

    import psutil

    code = ("import time; from playground.ui.compute import Lanes; lanes = Lanes({}).start(); "
            "print(*lanes.pids, flush=True); time.sleep(120)")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lanes = [psutil.Process(int(pid)) for pid in server.stdout.readline().split()]
    assert len(lanes) == 2 and all(lane.is_running() for lane in lanes)
    server.send_signal(signal.SIGTERM)
    server.wait(10)
    gone, alive = psutil.wait_procs(lanes, timeout=10)
    assert not alive, f"lanes left running after the server stopped: {[p.pid for p in alive]}"


def test_a_collection_in_a_lane_copies_none_of_the_objects_loaded_before_the_fork():
    """What the server loads before forking is frozen out of the cycle collector, so a lane's collection does not
    write to (and so copy) the pages of those objects: with 300,000 small lists loaded, a full collection in the lane
    makes under 4 MB of its memory its own. Without the freeze it made 124 MB its own (the lists and every object
    the imports made)."""
    import subprocess
    import sys

    code = ("import gc, sys\n"
            "from playground.ui.compute import Lanes\n"
            "from tests.test_compute import dirtied_by_a_collection\n"
            "kept = []\n"
            "lanes = Lanes({'dirtied': dirtied_by_a_collection})\n"
            "lanes.start(lambda: kept.extend([i, str(i)] for i in range(300_000)))\n"
            "from playground.ui.workers import CpuMeter\n"
            "print(lanes.call('dirtied', dirtied_by_a_collection, (), {}, CpuMeter()), flush=True)\n"
            "lanes.stop()\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    dirtied_mb = float(out.stdout.split()[-1])
    assert dirtied_mb < 4, f"a collection in the lane copied {dirtied_mb:.1f} MB of the server's objects"


def dirtied_by_a_collection() -> float:
    """MB of this process's memory made private (copied from the parent) by one full collection."""
    def private_dirty() -> float:
        with open("/proc/self/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Private_Dirty")) / 1024

    import gc
    before = private_dirty()
    gc.collect()
    return private_dirty() - before
