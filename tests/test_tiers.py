"""The test pyramid's tiers (tests/tiers.py, docs/testing.md#the-tiers): what a test uses decides its tier, the
quick tier holds no browser, served app, process or slow test, and a quick test that starts a process fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parent.parent
FULL = "python -m pytest -n 2 --dist loadgroup tests"
QUICK = "python -m pytest -m quick -n 2 --dist loadgroup tests"


class Planted:
    """A collected test as tiers_of reads it: its fixtures (the closure), its file and its own marks."""

    def __init__(self, fixtures=(), file="tests/test_x.py", marks=()):
        self.fixturenames, self.fspath, self.marks = list(fixtures), ROOT / file, set(marks)

    def get_closest_marker(self, name):
        return name if name in self.marks else None


@pytest.mark.parametrize("planted, expected", [
    (Planted(["tmp_path"]), set()),
    (Planted(["page", "app_url"]), {"browser", "served"}),
    (Planted(["browser"]), {"browser"}),
    (Planted(file="tests/test_browser_new.py"), {"browser"}),  # its own Chromium, or none yet: the file says
    (Planted(["client"]), {"served"}),
    (Planted(["warm_served"]), {"served"}),
    (Planted(["postgres"]), {"process"}),
    (Planted(["nginx", "tmp_path"]), {"process"}),
    (Planted(marks={"slow"}), {"slow"}),
    (Planted(marks={"process"}), {"process"}),
])
def test_a_tests_tier_follows_from_what_it_uses(planted, expected):
    assert tiers.tiers_of(planted) == expected


def test_every_collected_test_is_quick_or_in_a_tier_and_never_both(request):
    """Over this run's tests (every test in a full run; in a quick run, the tests it selected): a browser, served,
    postgres or nginx test is never quick, and a quick one is in no other tier."""
    items = request.session.items
    assert request.node in items
    wrong = []
    for item in items:
        marks = {mark.name for mark in item.iter_markers()} & {*tiers.TIERS, "quick"}
        fixtures = set(item.fixturenames)
        browser = fixtures & {"browser", "page"} or Path(str(item.fspath)).name.startswith("test_browser_")
        served = fixtures & {"app_url", "client", "warm_served"}
        process = fixtures & {"postgres", "nginx"} or "postgresql" in item.name
        if ("quick" in marks) == bool(marks - {"quick"}) or ("quick" in marks and (browser or served or process)):
            wrong.append((item.nodeid, sorted(marks)))
        for needed, tier in ((browser, "browser"), (served, "served"), (process, "process")):
            if needed and tier not in marks:
                wrong.append((item.nodeid, sorted(marks), f"not {tier}"))
    assert not wrong, wrong[:10]


def test_a_quick_test_that_starts_a_process_fails_naming_the_mark_it_needs(request):
    assert request.node.get_closest_marker("quick") and tiers.Guard.test == request.node.nodeid
    with pytest.raises(tiers.ProcessInQuickTest, match=r"starts 'python[0-9.]*', .*@pytest\.mark\.process"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(tiers.ProcessInQuickTest, match="starts 'sh'"):
        subprocess.run("true", shell=True, check=False)
    with pytest.raises(tiers.ProcessInQuickTest, match="os.fork"):
        pid = os.fork()
        if pid == 0:  # only if the guard let it through: the child leaves at once
            os._exit(0)
    assert subprocess.run(["git", "--version"], capture_output=True, check=False).returncode == 0  # a tool: allowed


def test_the_readme_and_the_testing_page_give_both_commands_and_ci_runs_the_full_one():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(rf"&& {re.escape(FULL)}$", ci.strip()), "CI runs the README's full command, as it is"
    for page in ("README.md", "docs/testing.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert FULL in text and QUICK in text, page
