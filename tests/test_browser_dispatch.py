"""Gradio's frontend as the app serves it (ui/patches.fix_frontend): a listener triggered again while it runs runs
once more, alone (and a component's loading status is handed over only when it changed). Gradio 6.31's own bundle
re-sent the whole event after a listener that had waited, so two listeners that take different times re-sent each
other for ever (issue #31: a page that opened a link with a selected word never stopped computing)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import gradio as gr
import pytest
from starlette.middleware import Middleware

from playground.ui import patches
from playground.ui.pagecache import CachedPage
from tests.conftest import free_port

BUNDLE = next((Path(gr.__file__).parent / "templates" / "frontend" / "assets").glob("Blocks-*.js"))


def test_gradios_bundle_is_served_with_its_fixes():
    """A new Gradio whose bundle no longer has the fixed form fails here (then check the dispatch again)."""
    served = patches.fix_frontend(f"/assets/{BUNDLE.name}", BUNDLE.read_bytes())
    assert patches._AGAIN_WHOLE not in served and served.count(patches._AGAIN_ALONE) == 2
    assert patches._EVERY_STATUS not in served and served.count(patches._CHANGED_STATUS) == 1
    other = b"this.queue.delete(r.id),this.dispatch(e)"
    assert patches.fix_frontend("/assets/Other-abc.js", other) == other


@pytest.fixture(scope="module")
def two_listeners():
    """A page with one button whose click two always_last listeners follow, one slower than the other; every call's
    start is recorded."""
    calls: list[tuple[str, float]] = []
    lock = threading.Lock()

    def listener(name: str, seconds: float):
        def run(count):
            with lock:
                calls.append((name, time.monotonic()))
            time.sleep(seconds)
            return count
        return run

    with gr.Blocks() as demo:
        button = gr.Button("Go", elem_id="go")
        count = gr.Number(0, elem_id="count")
        quick, slow = gr.Number(elem_id="quick"), gr.Number(elem_id="slow")
        button.click(listener("quick", 0.6), count, quick, trigger_mode="always_last")
        button.click(listener("slow", 1.2), count, slow, trigger_mode="always_last")
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                app_kwargs={"middleware": [Middleware(CachedPage, blocks=demo)]})
    yield f"http://127.0.0.1:{port}/", calls
    demo.close()


def test_a_listener_that_waited_runs_once_more_alone(browser, two_listeners):
    url, calls = two_listeners
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#go")
        page.click("#go")
        page.wait_for_timeout(150)
        page.click("#go")  # while the first click's listeners run: each runs once more, when it ends
        started = time.monotonic()
        while len(calls) < 4 and time.monotonic() - started < 60:  # the four runs that must come
            page.wait_for_timeout(50)
        # then quiet for twice the slow listener's time: Gradio's own sent the next run as soon as one ended
        while calls and time.monotonic() - max(t for _, t in calls) < 2 * 1.2 + 0.5:
            page.wait_for_timeout(50)
    finally:
        context.close()
    names = [name for name, _ in calls]
    assert sorted(names) == ["quick", "quick", "slow", "slow"], names  # Gradio's own: quick, slow, quick, ... for ever
