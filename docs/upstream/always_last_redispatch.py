"""Repro: Gradio 6's frontend re-dispatches a whole event after an always_last listener that waited.

One button, two listeners of its click, both trigger_mode="always_last", one slower than the other. Click twice,
quickly: each listener is still running at the second click, so each is deferred and should run once more, alone.
Gradio 6.31's page instead dispatches the whole click again when a deferred listener ends, which runs the other
listener again, or defers it again while it runs, and its end dispatches the whole click once more.

    python docs/upstream/always_last_redispatch.py            # serve it; click "Go" twice quickly; watch the log
    python docs/upstream/always_last_redispatch.py --check    # the same in headless Chromium (Playwright), counted

Expected: four runs (quick, slow, quick, slow), then quiet. Gradio 6.31: seven (quick slow quick slow quick quick
slow). With more listeners of different durations on one trigger and a loaded server (a page whose one input feeds
five views), the re-sends do not settle: they go on as long as the page is open.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time

import gradio as gr

QUICK, SLOW = 1.0, 1.6  # seconds each listener takes (different, neither a multiple of the other)


def build(calls: list) -> gr.Blocks:
    """The app; every listener's start is appended to `calls` as (name, time.monotonic())."""
    lock = threading.Lock()

    def listener(name: str, seconds: float):
        def run(count):
            with lock:
                calls.append((name, time.monotonic()))
            print(f"{time.strftime('%H:%M:%S')} {name} runs", flush=True)
            time.sleep(seconds)
            return count
        return run

    with gr.Blocks() as demo:
        button = gr.Button("Go", elem_id="go")
        count = gr.Number(0, elem_id="count")
        quick, slow = gr.Number(elem_id="quick", label="quick"), gr.Number(elem_id="slow", label="slow")
        button.click(listener("quick", QUICK), count, quick, trigger_mode="always_last")
        button.click(listener("slow", SLOW), count, slow, trigger_mode="always_last")
    return demo


def click_twice(browser, url: str, calls: list, watch: float = 8.0) -> list[str]:
    """Open `url` in a new context of a Playwright `browser`, click Go twice 150 ms apart, and return the names of
    the runs that started within `watch` seconds."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#go")
        page.click("#go")
        page.wait_for_timeout(150)
        page.click("#go")
        started = time.monotonic()
        while time.monotonic() - started < watch:
            page.wait_for_timeout(100)
    finally:
        context.close()
    return [name for name, _ in calls]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="click in headless Chromium and count the runs")
    args = parser.parse_args()
    calls: list = []
    demo = build(calls)
    demo.launch(prevent_thread_lock=args.check, quiet=args.check)
    if not args.check:
        return 0
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium") or shutil.which("chromium-browser"), args=["--no-sandbox"])
        try:
            names = click_twice(browser, demo.local_url, calls)
        finally:
            browser.close()
    demo.close()
    print(f"Gradio {gr.__version__}: {len(names)} runs in 8 s after two clicks: {' '.join(names)}")
    fault = len(names) > 4
    print("FAULT PRESENT: the listeners keep re-sending each other" if fault else "Not reproduced: four runs, then quiet")
    return 0 if fault else 1


if __name__ == "__main__":
    sys.exit(main())
