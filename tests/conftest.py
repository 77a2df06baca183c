"""Shared fixtures: a tiny corpus made here (tests never read the training corpora) and one launched app."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The class quiz's rooms: a file of this process's own, never the app's, nor (with pytest-xdist) another worker's,
# which inherits the environment its controller set here; a POLLS_DB the user set is kept.
if os.environ.get("POLLS_DB", os.environ.get("TEST_POLLS_DB")) == os.environ.get("TEST_POLLS_DB"):
    import tempfile

    os.environ["POLLS_DB"] = os.environ["TEST_POLLS_DB"] = os.path.join(tempfile.mkdtemp(prefix="polls-"),
                                                                        "polls.sqlite3")

import pytest

from tests import tiers

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
    """The real app, launched once on localhost for the API and browser tests, in this process configured as
    `python app.py` configures it (app.configure_process: Gradio's patches, threads, the generation engine)."""
    import app

    app.configure_process()
    port = free_port()
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    app.demo.close()


CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
BROWSER_FIXTURES = tiers.TIERS["browser"]  # the tests that use the shared Chromium ask for one of these


def need_chromium() -> None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: apt-get install -y chromium")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")


class SharedChromium:
    """One Chromium for the test session's browser tests (a launch and Playwright's start cost seconds each; every
    module used to launch its own), one per pytest-xdist worker. Started by the first module that asks for it,
    stopped at the end of a module when the next test in the same process does not use it (pytest_runtest_teardown
    below): Playwright's sync API keeps an event loop running in the main thread, and other tests' asyncio.run()
    would refuse to start inside it."""

    def __init__(self):
        self.playwright = self.browser = None

    def get(self):
        if self.browser is None:
            from playwright.sync_api import sync_playwright

            self.playwright = sync_playwright().start()
            try:
                self.browser = self.playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            except BaseException:
                self.stop()
                raise
        return self.browser

    def stop(self) -> None:
        try:
            if self.browser is not None:
                self.browser.close()
        finally:
            self.browser = None
            if self.playwright is not None:
                self.playwright.stop()
                self.playwright = None


CHROMIUM_SHARED = SharedChromium()


@pytest.fixture(scope="module")
def browser():
    """This process's one Chromium (one per pytest-xdist worker), asked for again by each module: it may have been
    stopped since the last one (pytest_runtest_teardown below). Each test module opens its own context(s) on it
    (its own cookies, storage and pages: no state leaks between modules) and closes them; never close the browser
    itself."""
    need_chromium()
    return CHROMIUM_SHARED.get()


@pytest.fixture(scope="module")
def page(browser, app_url):
    """A page of its own browser context on the launched app, one per test module; it records any request that
    leaves localhost (there must be none: no CDN, no analytics)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.external_requests = []
        page.on("request", lambda r: None if r.url.startswith(app_url) or r.url.startswith("data:")
                else page.external_requests.append(r.url))
        page.traffic = Traffic(page)
        page.goto(app_url)
        yield page
    finally:
        if browser.is_connected():
            context.close()


class Traffic:
    """The app's requests in flight from a page (queue joins, unqueued events) and the events of its sessions that
    the in-process app has not yet answered, so a test can wait for the page's answers to be in instead of sleeping
    a fixed time. A session's stream of answers (`queue/data`) is not waited on itself: Gradio 6.31 closes it only
    on a completion that leaves nothing pending, and a second stream opened meanwhile stays open after the last
    answer (a wait on it lasted until its timeout, a minute per tab); its session's pending events are what count."""

    def __init__(self, page):
        self.page, self.open, self.last, self.sessions = page, set(), 0.0, set()
        app = sys.modules.get("app")  # the session's served app (app_url), launched in this process
        self.queue = getattr(getattr(app, "demo", None), "_queue", None)
        page.on("request", self._start)
        page.on("requestfinished", self._end)
        page.on("requestfailed", self._end)

    def _start(self, request) -> None:
        if "/gradio_api/" in request.url and "/heartbeat/" not in request.url:
            self.last = time.monotonic()
            if "/queue/data" in request.url and self.queue is not None:
                self.sessions.update(parse_qs(urlparse(request.url).query).get("session_hash", []))
            else:
                self.open.add(request)

    def _end(self, request) -> None:
        if request in self.open:
            self.open.discard(request)
            self.last = time.monotonic()

    def forget(self) -> None:
        """After the page navigated: the last document's requests were cut (never reported finished) and its
        sessions' events, which may stay pending in the queue after their stream closed, are no one's now."""
        self.open.clear()
        self.sessions.clear()

    def pending(self) -> bool:
        """Whether an event the page's sessions sent is still to be answered on their stream."""
        waiting = self.queue.pending_event_ids_session if self.queue is not None else {}
        return any(waiting.get(session) for session in list(self.sessions))

    def settle(self, quiet_ms: int = 500, timeout_ms: int = 60_000) -> bool:
        """Until no request has been in flight nor an event pending for quiet_ms (an event's follow-ups are sent
        when it ends); False after timeout_ms without (the test goes on, as after a long sleep: its own checks say
        what is missing)."""
        started = time.monotonic()
        while self.open or self.pending() or time.monotonic() - self.last < quiet_ms / 1000:
            if self.pending():
                self.last = time.monotonic()  # quiet counts from the last answer sent
            if time.monotonic() - started > timeout_ms / 1000:
                return False
            self.page.wait_for_timeout(50)  # lets Playwright deliver the page's events meanwhile
        return True


def screenshot(page, name: str, full_page: bool = False) -> None:
    """Taken for a person to look at when SCREENSHOT_DIR names a folder (SCREENSHOT_DIR=assets refreshes the README's
    pictures); otherwise not taken: a picture checks nothing, and the suite's run took seconds for each."""
    if os.environ.get("SCREENSHOT_DIR"):
        shots = Path(os.environ["SCREENSHOT_DIR"])
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / name), full_page=full_page)


@pytest.fixture(scope="session")
def warm_served():
    """`python app.py`'s serve() in a process of its own on a free port, its compute processes started and the page's
    defaults answered before the first test uses it, as a lecturer starts the app before the class: (url, pid). One
    for the run's tests that need it (the "served" group, one worker): a start answers every default, ~30 s."""
    from playground.tools.bench_served import served_app

    with served_app(warm=True) as (url, pid):
        yield url, pid


@pytest.fixture(scope="session")
def client(app_url):
    from playground.tools.client import session

    return session(app_url, timeout=None)


def pytest_configure(config):
    # gradio's own use of pandas, not ours
    config.addinivalue_line("filterwarnings", "ignore::Warning:gradio.queueing")
    config.addinivalue_line("markers", "xdist_group(name): the tests pytest-xdist runs in one worker, in order")
    config.pluginmanager.register(tiers, "playground-tiers")  # the test pyramid's marks (tests/tiers.py)
    config.pluginmanager.register(XdistGroups(), "playground-xdist-groups")
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the controller keeps XdistGroups' order (its own: most tests first)
    # The engine's C++ kernels, built (the first time on a machine, about 30 s) or loaded now, before any test:
    # every test process then computes as the app does (serving/engine.install builds them as it starts), and no
    # quick test starts the compiler (tests/tiers.py refuses it a process)
    from playground.nets import kernels

    kernels.kernel()


class XdistGroups:
    """The groups and the order of `-n 2 --dist loadgroup` (the README's command; without pytest-xdist they mean
    nothing). Every module is a group of its own (its module fixtures set up once), unless its tests name another
    (the accessibility test's three modes are three groups). The browser modules are spread over both workers like
    the others: each worker has its own Chromium (SharedChromium, stopped at a module's end when the next test does
    not use it: its sync loop stops asyncio.run), its own served app on a free port, its own temporary folders and
    quiz rooms (POLLS_DB above) and its own Gradio folder (ui/patches); no test writes to models/. One group of every
    browser module, run in one worker, was the suite's critical path: it held the accessibility audits alone for
    19 min of a measured run while the other worker ran everything else.

    The queue is the slow groups first (SLOW_FIRST, longest first, from `--durations=0` of full runs), then the rest
    in collection order: a worker takes the next group when it is almost done, so short groups at the end fill in
    around the long ones. pytest-xdist's own order (most tests first) queued the longest group of all, the
    accessibility test's four tests, among the last. Only pytest-xdist's workers collect, so a run without it keeps
    the files' order. A plugin object rather than this module's hook: the module's one
    pytest_collection_modifyitems runs last (below), after pytest-xdist has read the groups."""

    # the groups that take longest, longest first (module file, or the group a test names)
    SLOW_FIRST = ("a11y-1", "a11y-2", "a11y-3", "tests/test_engine.py", "fuzz-chat_tools", "hub",
                  "tests/test_fuzz_endpoints.py", "fuzz-chain_of_thought", "tests/test_browser_lecture_mode.py",
                  "served", "tests/test_fuzz.py", "tests/test_reasoning.py", "tests/test_interventions.py",
                  "tests/test_resume_kill.py", "tests/test_browser_quiz.py", "tests/test_browser_view.py",
                  "tests/test_figures.py", "tests/test_browser_phone.py", "tests/test_browser_dispatch.py",
                  "tests/test_browser_tour.py", "tests/test_deploy.py")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items):
        if not os.environ.get("PYTEST_XDIST_WORKER"):
            return
        for item in items:
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))  # its file
        rank = {group: i for i, group in enumerate(self.SLOW_FIRST)}
        items.sort(key=lambda item: rank.get(item.get_closest_marker("xdist_group").args[0], len(rank)))  # stable


@pytest.hookimpl(trylast=True)  # after any plugin that reorders the tests
def pytest_collection_modifyitems(items):
    """No single test may hang the suite (CI has a wall-time budget)."""
    for item in items:
        if item.get_closest_marker("timeout") is None:  # a test that needs longer says so itself
            item.add_marker(pytest.mark.timeout(300))


def uses_chromium(item) -> bool:
    return item is not None and any(name in getattr(item, "fixturenames", ()) for name in BROWSER_FIXTURES)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the module's pages and contexts are closed first
    same_module = nextitem is not None and nextitem.module is item.module  # its module's pages are still open
    if not uses_chromium(nextitem) and not same_module:
        CHROMIUM_SHARED.stop()  # the next test in this process does not use it (a no-op when it is not running)


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server for the session (tests/postgres.py); skipped, saying why, where it is not installed
    (in CI it must be: `.ci/run` installs it)."""
    from tests.postgres import Server

    try:
        server = Server()
    except FileNotFoundError as err:
        if os.environ.get("CI"):
            pytest.fail(f"{err}: .ci/run installs it", pytrace=False)
        pytest.skip(str(err))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def rooms_db(request, tmp_path) -> str:
    """Where a test's rooms live, once per engine: a SQLite file, or a fresh postgresql:// URL (tests/postgres.py)."""
    if request.param == "sqlite":
        return str(tmp_path / "rooms.sqlite3")
    return request.getfixturevalue("postgres").fresh_url()
