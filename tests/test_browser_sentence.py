"""The shared sentence box in a real browser (issue #32, item 7): what every view would refuse or cut is said once,
under the box, instead of a toast per tab about tabs not on screen; a long text's words do not push the tabs
pages down."""

from __future__ import annotations

import pytest

from playground.analysis.focus import CHIPS_SHOWN
from playground.text import MAX_CHARS
from tests.conftest import Traffic

SENTENCE = "The bank by the river flooded after the storm."

TOASTS = """() => [...document.querySelectorAll("[data-testid='toast-body']")].filter((t) => t.offsetParent
    && t.style.display !== 'none').flatMap((t) => [...t.querySelectorAll("[data-testid='toast-text']")])
    .filter((m) => m.closest('.toast-message-item')?.style.display !== 'none').map((m) => m.innerText)"""


@pytest.fixture
def fresh(browser, app_url):
    """A page of its own (its toasts and its sentence are this test's only)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        fresh = context.new_page()
        fresh.traffic = Traffic(fresh)
        fresh.goto(app_url)
        fresh.wait_for_selector("#tokens-view .tok", timeout=40_000)
        yield fresh
    finally:
        context.close()


def commit(page, text: str, key: str | None = None) -> None:
    box = page.locator("#sentence textarea")
    box.fill(text)
    box.press(key) if key else box.blur()


def test_an_empty_sentence_is_said_once_under_the_box_and_no_tab_refuses_it(fresh):
    page = fresh
    commit(page, SENTENCE, "Enter")
    page.wait_for_function("() => document.querySelector('#tokens-view')?.innerText.includes('river')",
                           timeout=30_000)
    page.traffic.settle()  # the tabs' answers to it, and their notices, are in
    page.evaluate("() => document.querySelectorAll('.toast-close').forEach((b) => b.click())")
    for blank, key in (("", None), ("   \n ", "Enter")):
        commit(page, blank, key)
        page.wait_for_function("() => document.querySelector('#sentence-note')?.innerText.includes('empty')",
                               timeout=10_000)
        page.wait_for_timeout(4_000)  # time for the tabs' events, had any been sent
        assert page.locator("#sentence-note").is_visible()
        assert page.evaluate(TOASTS) == []  # used to be "Error (3)": the RNN tab's, the Attention tab's twice
        assert page.locator(".stale-note").count() == 0 and "message says why" not in page.inner_text("body")
        assert "river" in page.locator("#tokens-view").inner_text()  # every tab keeps the last sentence
        assert page.locator("#word-chips .chip", has_text="river").count() == 1
    commit(page, "Another sentence.", "Enter")
    page.wait_for_function("() => !document.querySelector('#sentence-note')?.offsetParent", timeout=10_000)
    page.wait_for_function("() => document.querySelector('#tokens-view')?.innerText.includes('Another')",
                           timeout=30_000)


def test_a_long_text_is_cut_once_and_its_words_do_not_push_the_tabs_down(fresh):
    """6,689 characters: one note (not a toast per view, each cutting it), no notice shown twice, and ~1,300 word
    chips that used to push the tabs some 3,000 px down are CHIPS_SHOWN and "N more words", which open in a box."""
    page = fresh
    text = " ".join(f"w{i}" for i in range(1300))  # 6,689 characters
    commit(page, text)
    page.wait_for_function("() => document.querySelector('#sentence-note')?.innerText.includes('6,689')",
                           timeout=10_000)
    assert f"{MAX_CHARS:,}" in page.locator("#sentence-note").inner_text()
    assert len(page.locator("#sentence textarea").input_value()) == MAX_CHARS  # the box shows what was applied
    page.wait_for_function(f"() => document.querySelectorAll('#word-chips .chip').length > {CHIPS_SHOWN}",
                           timeout=20_000)
    page.traffic.settle()  # the tabs' answers and their notices
    toasts = page.evaluate(TOASTS)
    assert not [t for t in toasts if "characters" in t], toasts  # the cut is said once, above
    assert len(toasts) == len(set(toasts)), toasts  # one change, several views, the same notice: shown once
    shown = page.evaluate("() => [...document.querySelectorAll('#word-chips .chip')].filter((c) => c.checkVisibility())"
                          ".length")
    assert shown == CHIPS_SHOWN
    top = page.evaluate("() => document.querySelector('#tabs').getBoundingClientRect().top + scrollY")
    assert top < 900, f"the tabs start {top:.0f} px down"
    page.locator("#word-chips summary").click()
    chip = page.locator("#word-chips .chip[data-i='700']")
    chip.scroll_into_view_if_needed()
    chip.click()
    page.wait_for_function("() => document.querySelector('#word-chips .chip.on')?.dataset.i === '700'",
                           timeout=20_000)
    page.traffic.settle()  # the views' answers to the selected word
    assert page.evaluate("() => document.querySelector('#word-chips details').open"), "the words closed under the click"
    inside = page.evaluate("""() => { const on = document.querySelector('#word-chips .chip.on');
        const a = on.getBoundingClientRect(), box = on.closest('.chips-rest').getBoundingClientRect();
        return a.top >= box.top - 1 && a.bottom <= box.bottom + 1; }""")
    assert inside, "the selected word is scrolled out of its box"
    top = page.evaluate("() => document.querySelector('#tabs').getBoundingClientRect().top + scrollY")
    assert top < 1200, f"opened, the words push the tabs {top:.0f} px down"
