"""The page in a real browser: what a student's own computer spends opening the app and drawing each answer, which
neither the protocol driver of the lecture hall nor gradio_client sees (`python -m playground.bench --browser-only`).

Two copies of `python app.py`'s app, side by side and warm (their page's defaults answered): the app as it serves
its page (Gradio's frontend with the fixes of ui/patches.FIXES) and the same app serving Gradio's frontend as Gradio
ships it (FIXES emptied in that process before the app is imported). Each copy's served files are checked to be
the ones it claims. Chromium (Debian's, through Playwright, as the tests drive it) opens fresh pages on the two in
turn, so the machine's drift falls on both alike. Per page, from Chrome's own counters (`Performance.getMetrics`):

- opening: a fresh browser context opens the app's address; "tabs on screen" is the time from the request until
  the tabs are drawn; "script" and "main thread" are Chrome's ScriptDuration and TaskDuration 3 s after that.
- each answer: on a page opened and left 6 s to finish its opening, SENTENCES are typed into the sentence box one
  after the other, each with Enter; "main thread" is TaskDuration over the 5 s after Enter (drawing every view's
  new answer), per sentence.
"""

from __future__ import annotations

import shutil
import time
import urllib.request
from dataclasses import dataclass, field

SENTENCES = ("The river bank was flooded after the storm.", "A cat sat on the warm mat today.",
             "Zebras graze quietly near the water.")
SETTLE_S = 3.0     # an opening's counters are read this long after the tabs are drawn
REST_S = 6.0       # a page rests this long before its sentences (its opening's own events answered)
ANSWER_S = 5.0     # each sentence's counters cover this long after Enter
GRADIOS_OWN = "from playground.ui import patches; patches.FIXES.clear(); "  # run before `import app`
VIEWPORT = {"width": 1400, "height": 1000}


@dataclass
class Figures:
    """One copy's measurements, seconds each: per page opened, and per sentence applied."""
    tabs: list[float] = field(default_factory=list)
    script: list[float] = field(default_factory=list)
    main: list[float] = field(default_factory=list)
    answer: list[float] = field(default_factory=list)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _counters(cdp) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def open_page(browser, url: str, figures: Figures) -> None:
    """One fresh page opened at `url`: its tabs' time on screen, its script and main thread (`figures`)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        started = time.perf_counter()
        page.goto(url)
        page.wait_for_selector("#tabs", timeout=120_000)
        figures.tabs.append(time.perf_counter() - started)
        page.wait_for_timeout(SETTLE_S * 1000)
        counters = _counters(cdp)
        figures.script.append(counters["ScriptDuration"])
        figures.main.append(counters["TaskDuration"])
    finally:
        context.close()


def apply_sentences(browser, url: str, figures: Figures, tag: str = "") -> None:
    """A page opened at `url` and rested, then each of SENTENCES (with `tag` added: new inputs, not the answer
    cache's) applied: the main thread each one took (`figures.answer`)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#tabs", timeout=120_000)
        page.wait_for_timeout(REST_S * 1000)
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        box = page.locator("#sentence textarea")
        for sentence in SENTENCES:
            before = _counters(cdp)["TaskDuration"]
            box.fill(f"{sentence} {tag}".strip())
            box.press("Enter")
            page.wait_for_timeout(ANSWER_S * 1000)
            figures.answer.append(_counters(cdp)["TaskDuration"] - before)
    finally:
        context.close()


def fixed_files(url: str) -> bool:
    """Whether the copy at `url` serves Gradio's frontend with the app's fixes (True) or as Gradio ships it (False);
    a ValueError if its files are neither."""
    from playground.ui import patches

    answers = set()
    for prefix, fixes in patches.FIXES.items():
        name = patches.shipped(prefix).name
        with urllib.request.urlopen(f"{url}assets/{name}", timeout=30) as response:
            body = response.read()
        answers |= {(fix.new in body and fix.old not in body, fix.old in body and fix.new not in body)
                    for fix in fixes}
    if answers == {(True, False)}:
        return True
    if answers == {(False, True)}:
        return False
    raise ValueError(f"{url} serves Gradio's frontend neither fixed nor as Gradio ships it")


def measure(urls: dict[str, str], runs: int) -> dict[str, Figures]:
    """`runs` fresh pages opened on each copy (`urls`: label -> address), and `runs` pages applying SENTENCES, the
    copies in turn."""
    from playwright.sync_api import sync_playwright

    figures = {label: Figures() for label in urls}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        try:
            for url in urls.values():   # a first page each, not measured: Chromium's and the server's first
                open_page(browser, url, Figures())
            for _ in range(runs):
                for label, url in urls.items():
                    open_page(browser, url, figures[label])
            for run in range(runs):
                for label, url in urls.items():
                    apply_sentences(browser, url, figures[label], tag=f"({run + 1})")
        finally:
            browser.close()
    return figures


def rows_of(figures: dict[str, Figures]) -> list[tuple]:
    """The table's rows (metric, median, p95, budget, ok): no budget of DESIGN.md is about a browser's own work."""
    from playground.tools.bench import percentiles

    def row(metric: str, values: list[float]) -> tuple:
        median, p95 = percentiles(values)
        return (metric, f"{median:.2f} s", f"{p95:.2f} s", "", None)

    rows = []
    for label, measured in figures.items():
        rows += [row(f"page in Chromium, {label}: tabs on screen after the request ({len(measured.tabs)} pages)",
                     measured.tabs),
                 row(f"  its script, {SETTLE_S:g} s after the tabs (Chrome's ScriptDuration)", measured.script),
                 row(f"  its main thread, {SETTLE_S:g} s after the tabs (Chrome's TaskDuration)", measured.main),
                 row(f"  a sentence applied: the main thread over {ANSWER_S:g} s after Enter "
                     f"({len(measured.answer)} sentences)", measured.answer)]
    return rows


def browser_rows(runs: int = 10) -> list[tuple]:
    """The app's page and Gradio's own frontend, each in `runs` fresh pages and `runs` x 3 sentences."""
    from playground.tools.bench_served import served_app

    if chromium_path() is None:
        return [("page in Chromium: not measured (apt-get install -y chromium)", "", "", "", None)]
    with served_app(warm=True) as (ours, _), served_app(warm=True, before=GRADIOS_OWN) as (gradios, _):
        if not fixed_files(ours) or fixed_files(gradios):
            raise RuntimeError("the two copies do not serve the frontends they stand for")
        figures = measure({"the app's frontend": ours, "Gradio's own frontend": gradios}, runs)
    return rows_of(figures)
