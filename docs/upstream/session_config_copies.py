"""Repro: each Gradio session copies the config of every component (for deep links), whether the app has a
gr.DeepLinkButton or not, and keeps a copy of every value it is sent since.

gradio/state_holder.py: `SessionState.__init__` builds `config_values` (every component's config), and
`__setitem__`, `_update_config` and `_update_value_in_config` keep it current as events answer. Its only reader is
the /gradio_api/deep_link route, i.e. gr.DeepLinkButton. An app without one pays for every new session (every
gradio_client call without a session is one) and keeps the last value of every output in every session.

    python docs/upstream/session_config_copies.py [--components 400]

Prints the configs a new session builds, the time it takes, and what a session holds after one answer.
Expected, without a DeepLinkButton: none of it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import gradio as gr
from gradio.state_holder import SessionState


def app(components: int) -> tuple[gr.Blocks, object]:
    """`components` textboxes and one event that fills the last one with a long text; (the Blocks, the event)."""
    with gr.Blocks() as demo:
        boxes = [gr.Textbox(label=f"box {i}") for i in range(components)]
        gr.Button("Go").click(lambda: "x" * 100_000, None, boxes[-1])
    return demo, next(iter(demo.fns.values()))


def new_session(demo: gr.Blocks) -> tuple[SessionState, float]:
    """A new session of `demo`, as Gradio makes one for each visitor and each API call, and the seconds it took."""
    started = time.perf_counter()
    session = SessionState(demo)
    return session, time.perf_counter() - started


def kept_after_an_answer(demo: gr.Blocks, fn) -> int:
    """The characters of the answer's value a session still holds in its configs after the event answered."""
    session = SessionState(demo)
    asyncio.run(demo.postprocess_data(fn, "x" * 100_000, session))
    return sum(len(str(config.get("props", {}).get("value") or "")) for config in session.config_values.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--components", type=int, default=400)
    args = parser.parse_args()
    demo, fn = app(args.components)
    session, seconds = new_session(demo)
    kept = kept_after_an_answer(demo, fn)
    print(f"Gradio {gr.__version__}: a new session built {len(session.config_values)} configs in "
          f"{seconds * 1000:.1f} ms, and holds {kept:,} characters of the answer it was sent")
    fault = len(session.config_values) > 0
    print("FAULT PRESENT: copies without a DeepLinkButton" if fault else "Not reproduced: no copies")
    return 0 if fault else 1


if __name__ == "__main__":
    sys.exit(main())
