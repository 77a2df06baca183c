"""The guided tour in a real browser: Next walks every step, each opening its tab with its equation."""

from __future__ import annotations

from playground.ui import tour
from playground.ui.demo import TABS, tab_id

TITLES = {tab_id(title): title for title, _ in TABS}


def test_next_walks_every_step_to_its_tab(page):
    """Each step opens its tab (and its sub-tab, if it names one), with its equation and its view drawn, and the
    address says so (a link copied after the tour opened the Tokenization tab: issue #32 item 8)."""
    import app
    from playground.ui.view import sub_tab_ids

    subs = sub_tab_ids(app.demo.shared.tabs)
    page.locator("#tour").get_by_text("Guided tour").click()
    for i, step in enumerate(tour.STEPS):
        page.locator("#tour-next").click()
        page.wait_for_function(f"() => document.querySelector('#tour-text')?.innerText.includes('Step {i + 1} of')",
                               timeout=15_000)
        tab = page.get_by_role("tab", name=TITLES[step.tab], exact=True)
        page.wait_for_function("(el) => el.getAttribute('aria-selected') === 'true'", arg=tab.element_handle(),
                               timeout=15_000)
        # the first tab is the default, and so is a tab's first sub-tab: not written
        first_sub = step.sub in ("", (subs.get(step.tab) or [""])[0])
        shown = "" if step.tab == tab_id(TABS[0][0]) and first_sub else step.tab
        page.wait_for_function("(tab) => (new URLSearchParams(location.search).get('tab') || '').split('/')[0] === tab",
                               arg=shown, timeout=10_000)
        if shown and not first_sub:  # a step on a later sub-tab opens it, and the address names it
            page.wait_for_function("(path) => new URLSearchParams(location.search).get('tab') === path",
                                   arg=step.path, timeout=10_000)
        assert page.locator("#tour-text .katex").count() >= 1, f"step {i + 1}: the equation is rendered"
        view = page.locator(f"#{step.shows}")   # the view the step talks about: on screen, with something in it
        page.wait_for_function("(el) => el.offsetParent !== null && (el.innerText.trim().length > 20 ||"
                               " el.querySelector('svg, canvas, img'))", arg=view.element_handle(), timeout=30_000)
    page.locator("#tour-prev").click()
    before_last = f"Step {len(tour.STEPS) - 1} of"
    page.wait_for_function(f"() => document.querySelector('#tour-text').innerText.includes('{before_last}')",
                           timeout=15_000)
