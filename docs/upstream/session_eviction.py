"""Feature request repro: a full session store evicts the least recently used session whatever it holds.

gradio/state_holder.py, `StateHolder.update`: beyond `state_session_capacity` sessions it drops the least recently
used one, gr.State and all. An app whose sessions hold something that must not be lost (a teacher's key to a room,
a student's place in it) cannot protect them: every gradio_client call without a session is a new session, so a
burst of API callers pushes the oldest pages out, and those pages silently lose their state.

    python docs/upstream/session_eviction.py

A store of 3; a "lecturer" session holding a room's key, then 4 one-call API sessions: the lecturer's is dropped.
Expected (requested): a way to keep some sessions, e.g. evict sessions whose gr.State is empty first, or a
`gr.State(..., evictable=False)` / an eviction policy hook.
"""

from __future__ import annotations

import sys

import gradio as gr
from gradio.state_holder import StateHolder


def lecturer_kept(capacity: int = 3, callers: int = 4) -> bool:
    """Whether a session holding a key survives `callers` one-call sessions in a store of `capacity`."""
    with gr.Blocks() as demo:
        seat, other = gr.State({}), gr.State(None)
    demo.state_session_capacity = capacity        # as launch(state_session_capacity=...) sets it
    holder = StateHolder()
    holder.set_blocks(demo)
    holder["lecturer"][seat._id] = {"room": "ABC123", "key": "k"}
    for caller in range(callers):
        holder[f"api-{caller}"][other._id] = "x"
    return "lecturer" in holder


def main() -> int:
    kept = lecturer_kept()
    print(f"Gradio {gr.__version__}: the session holding the room's key was {'kept' if kept else 'dropped'} "
          "after 4 API calls in a store of 3")
    print("FAULT PRESENT: no way to keep it" if not kept else "Not reproduced")
    return 0 if not kept else 1


if __name__ == "__main__":
    sys.exit(main())
