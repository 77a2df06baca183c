"""Repro: `Blocks.postprocess_data` costs per output what it need not: a gr.skip() rebuilds its component, every
update re-reads the constructor's signature, and every plain value takes thread hops.

gradio/blocks.py, `Blocks.postprocess_data`, for each output of an event:
1. a bare `gr.skip()` ({"__type__": "update"}) is treated as an update: a new instance of the component is built
   for the session (its constructor, its config), though nothing changes;
2. each update rebuilds the component, and `component_meta.updateable` calls `inspect.getfullargspec` on the
   constructor each time (about 0.1 ms), for a signature that never changes;
3. each plain value (a string, a number) is postprocessed in a worker thread (`anyio.to_thread.run_sync`), then
   searched for files: thread hops for a cast.

    python docs/upstream/postprocess_overhead.py [--outputs 60]

Prints, for one event with that many Textbox outputs: the components built for all-skip answers, the signature
reads for all-update answers, the thread hops for all-plain answers, and the time of each.
Expected: 0 built, one read per constructor, no hop for a value whose postprocess is a cast.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import time

import anyio
import gradio as gr
from gradio import component_meta
from gradio.state_holder import SessionState


def app(outputs: int) -> tuple[gr.Blocks, object]:
    with gr.Blocks() as demo:
        boxes = [gr.Textbox() for _ in range(outputs)]
        gr.Button().click(lambda: None, None, boxes)
    return demo, next(iter(demo.fns.values()))


def overhead(outputs: int = 60) -> dict[str, tuple[int, float]]:
    """(count, seconds) of each of the three costs for an event with `outputs` Textbox outputs."""
    demo, fn = app(outputs)
    found = {}
    built, init = [], gr.Textbox.__init__
    gr.Textbox.__init__ = lambda self, *a, **k: (built.append(1), init(self, *a, **k))[1]
    try:
        found["components built for skips"] = _run(demo, fn, [gr.skip()] * outputs, built)
    finally:
        gr.Textbox.__init__ = init
    reads, getfullargspec, module = [], inspect.getfullargspec, component_meta.inspect
    counting = type("Inspect", (), {"getfullargspec": staticmethod(lambda f: (reads.append(1), getfullargspec(f))[1]),
                                    "__getattr__": lambda self, name: getattr(inspect, name)})()
    component_meta.inspect = counting
    try:
        found["signature reads for updates"] = _run(demo, fn, [gr.update(visible=True)] * outputs, reads)
    finally:
        component_meta.inspect = module
    hops, run_sync = [], anyio.to_thread.run_sync
    anyio.to_thread.run_sync = lambda *a, **k: (hops.append(1), run_sync(*a, **k))[1]
    try:
        found["thread hops for plain values"] = _run(demo, fn, ["plain"] * outputs, hops)
    finally:
        anyio.to_thread.run_sync = run_sync
    return found


def _run(demo, fn, predictions, counter: list) -> tuple[int, float]:
    session = SessionState(demo)
    started = time.perf_counter()
    asyncio.run(demo.postprocess_data(fn, predictions, session))
    return len(counter), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", type=int, default=60)
    args = parser.parse_args()
    found = overhead(args.outputs)
    print(f"Gradio {gr.__version__}, one event with {args.outputs} Textbox outputs:")
    for what, (n, seconds) in found.items():
        print(f"  {what}: {n} ({seconds * 1000:.1f} ms)")
    fault = any(n for n, _ in found.values())
    print("FAULT PRESENT: per-output overhead" if fault else "Not reproduced")
    return 0 if fault else 1


if __name__ == "__main__":
    sys.exit(main())
