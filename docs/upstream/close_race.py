"""Repro: `Blocks.close()` sets the server's stop event from the calling thread, not in the server's event loop.

gradio/blocks.py, `Blocks.close`: `self.app.stop_event.set()`. `stop_event` is an asyncio.Event that every open
stream (the heartbeats of `/gradio_api/queue/data`) awaits in the server's loop, which adds and removes its waiters
there. Setting it from another thread walks that waiters' deque while the loop changes it: asyncio objects are not
thread-safe. In a test run it failed once with "RuntimeError: deque mutated during iteration", after close() had
marked the app stopped and before it closed the server, so the port stayed open.

    python docs/upstream/close_race.py

Shows which thread sets the event (the caller's, while the loop's thread holds its waiters), and that the waiter
is not even woken: set from another thread, the event schedules its waiters' wake-up without waking the loop, which
sleeps on until something else happens. The deque race itself is rare; the fault is the cross-thread call.
Expected: `loop.call_soon_threadsafe(stop_event.set)` (or the event set in its loop).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from types import SimpleNamespace

from gradio.blocks import Blocks


def who_sets_the_stop_event() -> tuple[str, str, bool]:
    """(the thread that set the stop event during Blocks.close, the thread of the loop that waits on it, whether
    the waiter woke within 2 s)."""
    loop = asyncio.new_event_loop()
    server = threading.Thread(target=loop.run_forever, name="server-loop", daemon=True)
    server.start()
    try:
        event = asyncio.Event()
        waiting = asyncio.run_coroutine_threadsafe(event.wait(), loop)     # an open stream's heartbeat wait
        for _ in range(100):
            if event._waiters:
                break
            time.sleep(0.01)
        setters, set_ = [], event.set
        event.set = lambda: (setters.append(threading.current_thread().name), set_())[1]
        app = SimpleNamespace(is_running=True, _queue=SimpleNamespace(close=lambda: None), server=None,
                              server_port=0, app=SimpleNamespace(stop_event=event, startup_events_triggered=True))
        Blocks.close(app, verbose=False)
        try:
            woke = waiting.result(2)
        except TimeoutError:
            woke = False
        return setters[0], server.name, woke
    finally:
        loop.call_soon_threadsafe(loop.stop)
        server.join(5)
        loop.close()


def main() -> int:
    import gradio

    setter, owner, woke = who_sets_the_stop_event()
    print(f"Gradio {gradio.__version__}: close() set the stop event from thread {setter!r}; its loop runs in "
          f"{owner!r}; the waiting stream {'woke' if woke else 'did not wake within 2 s'}")
    fault = setter != owner
    print("FAULT PRESENT: set across threads" if fault else "Not reproduced: set in its own loop")
    return 0 if fault else 1


if __name__ == "__main__":
    sys.exit(main())
