"""The test pyramid's tiers (docs/testing.md#the-tiers), registered by tests/conftest.py as a pytest plugin.

A test's tier follows from what it uses, so a new test lands in the right one without anyone remembering: a fixture
in TIERS (asked for by the test or by any fixture it uses) or a tests/test_browser_*.py file puts it in that tier,
and a test whose cost no fixture shows says so itself (`@pytest.mark.process`, `@pytest.mark.slow`, or a module's
`pytestmark`). A test in none of them is `quick`: the developer's edit loop,
`python -m pytest -m quick -n 2 --dist loadgroup tests`.

What no fixture shows is checked as the test runs: a quick test that starts a process (a Python interpreter, a
server, a shell, a fork) in its setup or body fails on the spot, naming the program and the mark it needs
(ProcessInQuickTest); a run of the quick tier lists its tests that took seconds (candidates for `slow`).
tests/test_tiers.py checks the tiers.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

TIERS = {
    "browser": ("browser", "page"),                  # Chromium, driven by Playwright (tests/conftest.py)
    "served": ("app_url", "client", "warm_served"),  # the app listening on a port, in this process or its own
    "process": ("postgres", "nginx"),                # a server or a program of its own
    "slow": (),                                      # only by its mark
}
HELP = {
    "browser": "drives Chromium (a browser fixture, or a tests/test_browser_*.py file)",
    "served": "talks to the app listening on a port (app_url, client, warm_served)",
    "process": "starts a program or a server of its own (postgres, nginx, a Python process, a fork, torchrun)",
    "slow": "seconds of computing (a real model such as SmolLM2, a training run, a fuzz): out of the quick tier",
    "quick": "none of the above (set by tests/tiers.py): the unit tests of the edit loop, -m quick",
}
# the programs a quick test may start: read-only tools run for an answer (joblib asks lscpu for the cores; the
# repository's checks ask git which files it tracks)
TOOLS = frozenset({"git", "lscpu", "ldconfig", "uname"})
SLOW_SECONDS = 2.0  # a quick test over this (setup, call and teardown) is listed at the end of a quick run


def tiers_of(item) -> set[str]:
    """The tiers of a collected test, from its fixtures, its file and its own marks (empty: it is quick)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    found = {tier for tier, names in TIERS.items() if fixtures.intersection(names) or item.get_closest_marker(tier)}
    if Path(str(item.fspath)).name.startswith("test_browser_"):
        found.add("browser")
    return found


def slow_where(values, heavy) -> list:
    """@pytest.mark.parametrize's values, those for which heavy(value) holds marked slow (SmolLM2 among small
    models): the others stay quick."""
    return [pytest.param(value, marks=pytest.mark.slow) if heavy(value) else value for value in values]


def pytest_configure(config):
    for tier, text in HELP.items():
        config.addinivalue_line("markers", f"{tier}: {text}")


def pytest_itemcollected(item):
    """Each test's tier marks, set before `-m` selects (in pytest's own pytest_collection_modifyitems)."""
    found = tiers_of(item)
    for tier in sorted(found - {mark.name for mark in item.iter_markers()}):
        item.add_marker(tier)
    if not found:
        item.add_marker("quick")


class ProcessInQuickTest(RuntimeError):
    """A quick test started a process: it belongs in the `process` tier."""


class Guard:
    """The quick test this process is running (None between tests and during the other tiers' tests)."""

    test: str | None = None


def _program(args: tuple) -> str:
    """The program of a subprocess.Popen audit event's (executable, args, cwd, env)."""
    executable, argv = args[0], args[1]
    first = executable or (argv if isinstance(argv, (str, bytes, os.PathLike)) else argv[0])
    return os.path.basename(os.fsdecode(first))


def audit(event: str, args: tuple) -> None:
    """sys.addaudithook's hook: a quick test that starts a process fails here, before the process starts."""
    if Guard.test is None:
        return
    if event == "subprocess.Popen":
        program = _program(args)
        if program in TOOLS:
            return
    elif event in ("os.fork", "os.forkpty", "os.posix_spawn", "os.system"):
        program = event
    else:
        return
    raise ProcessInQuickTest(f"{Guard.test} starts {program!r}, which a quick test may not (tests/tiers.py): "
                             "mark it @pytest.mark.process")


sys.addaudithook(audit)  # once per process; it does nothing while no quick test runs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _guarded(item):
        yield


@contextlib.contextmanager
def _guarded(item):
    """A quick test's setup and call (its own fixtures and its body); not its teardown, where pytest also ends the
    session's fixtures after the run's last test, whatever its tier (PostgreSQL's server is stopped by a process)."""
    Guard.test = item.nodeid if item.get_closest_marker("quick") else None
    try:
        yield
    finally:
        Guard.test = None


DURATIONS: dict[str, float] = {}  # each quick test's seconds in this run (setup, call and teardown)


def pytest_runtest_logreport(report):
    if "quick" in report.keywords:
        DURATIONS[report.nodeid] = DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, config):
    """A run of the quick tier lists its tests that took seconds: the tier stays quick only if they leave it."""
    if "quick" not in (config.option.markexpr or ""):
        return
    slow = sorted(((s, node.split("@")[0]) for node, s in DURATIONS.items() if s > SLOW_SECONDS), reverse=True)
    if slow:
        terminalreporter.section("quick tests over %g s: make them cheaper or mark them slow" % SLOW_SECONDS)
        for seconds, node in slow:
            terminalreporter.write_line(f"{seconds:6.1f} s  {node}")
