"""Shared fixtures: a tiny corpus made here (tests never read the training corpora) and one launched app."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "POLLS_DB" not in os.environ:  # the class quiz's rooms: a file of the test run's own, never the app's
    import tempfile

    os.environ["POLLS_DB"] = os.path.join(tempfile.mkdtemp(prefix="polls-"), "polls.sqlite3")

import pytest

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly hex jolly boxers and "
         "lower newer widest lowest token tokens tokenizer tokenization").split()


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> str:
    """A few kilobytes of deterministic English-like text, with a newline and some punctuation."""
    import random

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))).capitalize() + rng.choice(".!?,;")
             for _ in range(400)]
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_url():
    """The real app, launched once on localhost for the API and browser tests."""
    import app

    port = free_port()
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    app.demo.close()


CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def page(app_url):
    """A Chromium page on the launched app, one browser per test module; it records any request that
    leaves localhost (there must be none: no CDN, no analytics)."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: apt-get install -y chromium")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.external_requests = []
        page.on("request", lambda r: None if r.url.startswith(app_url) or r.url.startswith("data:")
                else page.external_requests.append(r.url))
        page.goto(app_url)
        yield page
        browser.close()


def screenshot(page, name: str, tmp_path: Path) -> None:
    """Saved in the test's folder; SCREENSHOT_DIR=assets refreshes the README's pictures."""
    shots = Path(os.environ.get("SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / name), full_page=False)


@pytest.fixture(scope="session")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def pytest_configure(config):
    # gradio's own use of pandas, not ours
    config.addinivalue_line("filterwarnings", "ignore::Warning:gradio.queueing")


def pytest_collection_modifyitems(items):
    """No single test may hang the suite (CI has a wall-time budget)."""
    for item in items:
        if item.get_closest_marker("timeout") is None:  # a test that needs longer says so itself
            item.add_marker(pytest.mark.timeout(300))
