"""WCAG 2.1 AA in a real browser, measured by axe-core (the engine shipped in the PyPI package axe-playwright-python;
its axe.min.js is injected into the page, nothing is fetched): every top-level tab and sub-tab, in light mode,
dark mode and lecture mode, then the guided tour, a tab's quiz questions and the class quiz's lecturer panel. A
critical or serious violation fails the test, named by mode, view, rule, element and axe's own summary.

Excluded, each for exactly one rule on one selector of Gradio's own markup (docs/accessibility.md says why): see
EXCLUDED. Run: `nice -n 19 python -m pytest tests/test_browser_a11y.py -x -q`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Traffic

axe_package = pytest.importorskip("axe_playwright_python", reason="pip install axe-playwright-python")
AXE_JS = (Path(axe_package.__file__).parent / "axe.min.js").read_text(encoding="utf-8")

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]   # WCAG 2.0 and 2.1, levels A and AA
FAILING = ("critical", "serious")
# rule id -> the CSS selector of the elements it is not applied to, with why
EXCLUDED = {
    # Gradio's Empty placeholder (@gradio/atoms Empty.svelte, drawn by gr.Plot and gr.Image before their first
    # value) is a <div aria-label="Empty value"> without a role, where ARIA forbids a label. Its markup is Gradio's;
    # it holds only an icon, so a screen reader loses nothing by skipping it.
    "aria-prohibited-attr": '.empty[aria-label="Empty value"]',
}
MODES = ("light", "dark")   # on each view as drawn; lecture mode (light) over the same views after
EVERY_RULE = {"type": "tag", "values": TAGS}
# the rules a theme can change: only colours differ between light and dark (the same elements, names, roles and
# sizes), so the dark theme is audited for them alone, a third of the audits' time spared
COLOUR_RULES = {"type": "rule", "values": ["color-contrast", "link-in-text-block"]}

# axe over the whole page but its hidden tab panels, the violations as [rule, impact, [[selector, summary], ...]]
# without the excluded elements. A hidden panel is not shown nor in the accessibility tree, so axe finds nothing there
# either, but it walked every element of every tab visited so far (Gradio keeps a visited tab's elements): an audit
# took 1 s on the first view and 8 s on the 27th (36,000 elements), 125 of the 170 s of one mode's audits
RUN_JS = """async ([only, excluded]) => {
  const hidden = [...document.querySelectorAll('[role=tabpanel]')].filter((p) => !p.checkVisibility()
    && (!p.parentElement || p.parentElement.checkVisibility()));  // the outermost hidden ones
  const context = hidden.length ? {include: [document], exclude: hidden} : document;
  const result = await axe.run(context, {runOnly: only, resultTypes: ['violations']});
  return result.violations.map((v) => [v.id, v.impact, v.nodes.filter((n) => {
    const el = document.querySelector(n.target[0]);
    return !(excluded[v.id] && el && el.matches(excluded[v.id]));
  }).map((n) => [n.target.join(' '), (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 220)])])
    .filter(([, , nodes]) => nodes.length);
}"""
# no output of the page still computing: Gradio's status trackers hidden, and no output faded as pending (its text
# at 0.2 opacity would be measured as a contrast failure of ours)
IDLE_JS = "() => ![...document.querySelectorAll('#tabs .wrap.full:not(.hide), #tabs .wrap.minimal:not(.hide), " \
          "#tabs .pending')].some((el) => el.offsetParent)"


def views() -> list[tuple[str, str | None, str | None]]:
    """(tab, accordion, sub-tab) of every view, in the page's order, read from the app itself (a new sub-tab is
    tested too); accordion: the one a sub-tab sits in (opened first), or None."""
    import gradio as gr

    import app

    tabs = next(b for b in app.demo.blocks.values() if isinstance(b, gr.Tabs) and b.elem_id == "tabs")

    def inner(block, accordion=None) -> list[tuple[str | None, str]]:
        found = []
        for child in getattr(block, "children", None) or []:
            found += [(accordion, str(child.label))] if isinstance(child, gr.Tab) else []
            found += inner(child, str(child.label) if isinstance(child, gr.Accordion) else accordion)
        return found

    out = []
    for tab in (child for child in tabs.children if isinstance(child, gr.Tab)):
        subs = inner(tab)
        out += [(str(tab.label), accordion, sub) for accordion, sub in subs] if subs else [(str(tab.label), None, None)]
    return out


def audit(page, where: str, only: dict = EVERY_RULE) -> list[str]:
    """The failing violations on the page as it is now, one line per element (`only`: axe's runOnly)."""
    page.traffic.settle(quiet_ms=400)
    page.wait_for_function(IDLE_JS, timeout=60_000)
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE_JS)
    found = page.evaluate(RUN_JS, [only, EXCLUDED])
    return [f"{where}: {rule} ({impact}) at {target}: {summary}"
            for rule, impact, nodes in found if impact in FAILING for target, summary in nodes]


def _open(page, tab: str, sub: str | None, accordion: str | None = None) -> None:
    page.get_by_role("tab", name=tab, exact=True).first.click()
    if accordion and not page.get_by_role("tab", name=sub, exact=True).first.is_visible():
        page.get_by_role("button", name=accordion).locator("visible=true").first.click()
    if sub:
        page.get_by_role("tab", name=sub, exact=True).first.click()


# nothing moving: a colour Gradio is still fading from one theme to the other would be measured half-way
STILL_JS = "() => document.getAnimations().every((a) => a.playState !== 'running')"
# lecture mode's figures rescaled and fitted to their larger type (assets/view.js marks each one it has done)
FITTED_JS = "() => [...document.querySelectorAll('.js-plotly-plot')].filter((gd) => gd.checkVisibility() && gd.data)" \
            ".every((gd) => gd.dataset.lecture === '1' && gd.dataset.fitted === '1')"


def dark(page, on: bool) -> None:
    """Gradio's dark theme on or off, as its frontend applies `?__theme=dark` or the system's preference: the
    `dark` class on the body, which every dark colour of Gradio's and ours (assets/style.css) hangs on; the figures
    are drawn white in both themes (figures/common.py)."""
    page.evaluate("(on) => document.body.classList.toggle('dark', on)", on)
    page.wait_for_function(STILL_JS, timeout=10_000)


def lecture(page) -> None:
    """Lecture mode ticked as the lecturer does (the same as a `?lecture=1` link: ui/view.py ticks the box), and
    every figure on screen rescaled."""
    page.locator("#lecture-toggle input").check()
    page.wait_for_function("() => document.body.classList.contains('lecture')", timeout=10_000)
    rescaled(page)


def rescaled(page) -> None:
    """Every figure on screen rescaled for lecture mode (assets/view.js: 200 ms after the page's last change)."""
    page.wait_for_timeout(300)
    page.wait_for_function(FITTED_JS, timeout=30_000)


def checked(page, where: str, fitted: bool = False, only: dict = EVERY_RULE) -> list[str]:
    """`audit`, and once more after 2 s if it finds something: an output Gradio is still fading in read as low
    contrast (1.48 to 2.86:1 on one list in two runs); what the page keeps showing fails."""
    found = audit(page, where, only)
    if found:
        page.wait_for_timeout(2000)
        if fitted:
            rescaled(page)
        found = audit(page, where, only)
    return found


class Pages:
    """One browser context and its page, opened on first use; `on_tab` opens the page afresh on a top-level tab (a
    link to it), in light mode and without lecture mode."""

    def __init__(self, browser, app_url: str):
        self.browser, self.app_url, self.page, self.context = browser, app_url, None, None

    def __call__(self):
        if self.page is None:
            self.context = self.browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="light")
            self.page = self.context.new_page()
            self.page.traffic = Traffic(self.page)
            self._go(self.app_url)
        return self.page

    def on_tab(self, tab: str):
        """The page opened afresh on `tab`: axe walks the whole document whatever it audits, and Gradio keeps every
        visited tab's elements, so one page walked through every tab reached 36,000 elements and 4-5 s an audit by
        the last tabs (1 s on the first); a page per tab keeps each audit near the first's."""
        from playground.ui.demo import tab_id

        self()
        self._go(f"{self.app_url}?tab={tab_id(tab)}")
        return self.page

    def _go(self, url: str) -> None:
        self.page.goto(url)
        self.page.traffic.forget()
        self.page.wait_for_selector("#tabs", timeout=30_000)

    def close(self) -> None:
        if self.context is not None and self.browser.is_connected():
            self.context.close()


@pytest.fixture(scope="module")
def pages(browser, app_url):
    opened = Pages(browser, app_url)
    try:
        yield opened
    finally:
        opened.close()


PARTS = 3   # the top-level tabs in three tests, every third tab each


# each part a pytest-xdist group of its own (tests/conftest.py: XdistGroups), so that the two workers share the
# audits, the suite's longest tests; the tour and the quiz go with the first part, whose page they use
@pytest.mark.timeout(900)
@pytest.mark.parametrize("part", [pytest.param(i, marks=pytest.mark.xdist_group(f"a11y-{i + 1}"))
                                  for i in range(PARTS)])
def test_every_view_has_no_serious_violation(pages, part):
    """Each view of every PARTS-th top-level tab in the three modes: light and dark on the view as it is drawn (the
    theme switched on the page), then lecture mode over the same views. One page per tab, each view computed and
    drawn once: a page per mode drew every view three times, two thirds of the audits' time."""
    problems, found = [], views()
    tabs = list(dict.fromkeys(tab for tab, _, _ in found))
    for tab in tabs[part::PARTS]:
        page = pages.on_tab(tab)
        subs = [(accordion, sub) for t, accordion, sub in found if t == tab]
        for accordion, sub in subs:
            _open(page, tab, sub, accordion)
            for mode in MODES:
                dark(page, mode == "dark")
                problems += checked(page, f"{mode} · {tab}" + (f" / {sub}" if sub else ""),
                                    only=COLOUR_RULES if mode == "dark" else EVERY_RULE)
        dark(page, False)
        lecture(page)
        for accordion, sub in subs:
            _open(page, tab, sub, accordion)
            rescaled(page)
            problems += checked(page, "lecture · " + tab + (f" / {sub}" if sub else ""), fitted=True)
    assert not problems, f"{len(problems)} serious or critical violation(s):\n" + "\n".join(problems)


@pytest.mark.timeout(600)
@pytest.mark.xdist_group("a11y-1")
def test_tour_and_quiz_have_no_serious_violation(pages):
    """The guided tour open at its first step, a tab's own questions open, and the class quiz's lecturer panel with a
    room opened (its code shown large) and its cockpit shown live."""
    page = pages()
    problems = []
    page.locator("#tour").get_by_text("Guided tour").click()
    page.locator("#tour-next").click()
    page.wait_for_function("() => document.querySelector('#tour-text')?.innerText.includes('Step 1 of')",
                           timeout=15_000)
    problems += audit(page, "tour, step 1")
    _open(page, "Tokenization", "Compare tokenizers")
    page.get_by_text("Predict, then reveal").locator("visible=true").first.click()
    problems += audit(page, "Tokenization's questions")
    _open(page, "Class quiz", None)
    page.locator("#quiz-lecturer").get_by_text("Lecturer: open a room").click()
    page.locator("#quiz-open").click()
    page.wait_for_selector("#quiz-opened .quiz-room b", timeout=30_000)
    problems += audit(page, "class quiz, a room opened")
    page.get_by_text("Cockpit: your room's workshop progress").click()     # the cockpit, live (ui/cockpit.py)
    page.locator("#cockpit-live input").check()
    page.wait_for_function("() => document.querySelector('#cockpit-summary')?.innerText.includes('joined room')",
                           timeout=30_000)
    problems += audit(page, "class quiz, the lecturer's cockpit")
    assert not problems, f"{len(problems)} serious or critical violation(s):\n" + "\n".join(problems)
