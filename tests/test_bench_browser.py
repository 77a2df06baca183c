"""`python -m playground.bench --browser-only` (playground/tools/bench_browser.py) on the launched app and the
session's Chromium, with short waits: its measurements are Chrome's own counters of a real page, and it tells the
app's frontend from Gradio's own by the files each copy serves."""

from __future__ import annotations

import http.server
import threading

import pytest

from playground.tools import bench_browser
from playground.tools.bench_browser import Figures
from playground.ui import patches


def test_a_page_opened_and_its_sentences_are_measured_by_chromes_counters(browser, app_url, monkeypatch):
    monkeypatch.setattr(bench_browser, "SETTLE_S", 0.5)
    monkeypatch.setattr(bench_browser, "REST_S", 1.0)
    monkeypatch.setattr(bench_browser, "ANSWER_S", 1.5)
    figures = Figures()
    bench_browser.open_page(browser, app_url, figures)
    bench_browser.apply_sentences(browser, app_url, figures, tag="(bench test)")
    assert len(figures.tabs) == len(figures.script) == len(figures.main) == 1
    assert 0 < figures.tabs[0] < 120 and 0 < figures.script[0] < figures.main[0]  # the script runs on the main thread
    assert len(figures.answer) == len(bench_browser.SENTENCES) and all(a > 0 for a in figures.answer)
    rows = bench_browser.rows_of({"here": figures})
    labels = [row[0] for row in rows]
    assert labels[0].startswith("page in Chromium, here: tabs on screen") and "ScriptDuration" in labels[1]
    assert "TaskDuration" in labels[2] and labels[3].startswith("  a sentence applied")
    assert all(row[1].endswith(" s") and row[4] is None for row in rows)  # no budget: a browser's own work


@pytest.fixture
def gradios_own_files():
    """Gradio's frontend files served as Gradio ships them, under /assets/ as the app serves them."""
    root = patches.frontend()

    class Files(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_the_copies_are_told_apart_by_the_files_they_serve(app_url, gradios_own_files):
    assert bench_browser.fixed_files(app_url) is True
    assert bench_browser.fixed_files(gradios_own_files) is False
