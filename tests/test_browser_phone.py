"""The page on a phone (400 x 850, issue #20 item 10): the title on one line, every tab's name on screen, and every
sub-tab's (issue #32: they were behind a "⋯" menu)."""

from __future__ import annotations

import gradio as gr
import pytest

from playground.ui.demo import TABS


@pytest.fixture(scope="module")
def phone(app_url, browser):
    """A phone-sized page of its own context on the session's Chromium."""
    context = browser.new_context(viewport={"width": 400, "height": 850})
    try:
        phone = context.new_page()
        phone.goto(app_url)
        phone.wait_for_selector("#tabs [role=tab]", timeout=30_000)
        yield phone
    finally:
        context.close()


def test_the_title_stays_on_one_line(phone):
    title = phone.locator("#header h1")
    line = phone.evaluate("(h) => parseFloat(getComputedStyle(h).lineHeight) || h.offsetHeight", title.element_handle())
    assert title.bounding_box()["height"] < 1.6 * line, "the title broke across lines"


def test_every_tab_is_on_screen_and_opens(phone):
    for title, _ in TABS:
        tab = phone.locator("#tabs").get_by_role("tab", name=title, exact=True)
        assert tab.is_visible(), f"{title} is hidden (in an overflow menu)"
        box = tab.bounding_box()
        assert 0 <= box["x"] and box["x"] + box["width"] <= 400, f"{title} is off screen"
    phone.locator("#tabs").get_by_role("tab", name=TABS[-1][0], exact=True).click()
    phone.wait_for_function("(last) => [...document.querySelectorAll('#tabs [role=tab]')]"
                            ".some(t => t.innerText.trim() === last && t.getAttribute('aria-selected') === 'true')",
                            arg=TABS[-1][0], timeout=15_000)


def sub_tabs() -> dict[str, list[tuple[str, str | None]]]:
    """Each top-level tab's title -> its sub-tabs' labels, each with the closed accordion it is in (or None), from
    the app's own layout."""
    import app

    def inner(block, closed: str | None) -> list[tuple[str, str | None]]:
        found = []
        for child in getattr(block, "children", None) or []:
            found += [(str(child.label), closed)] if isinstance(child, gr.Tab) else []
            shut = isinstance(child, gr.Accordion) and not child.open
            found += inner(child, str(child.label) if shut else closed)
        return found

    (tabs,) = [b for b in app.demo.blocks.values() if getattr(b, "elem_id", None) == "tabs"]
    return {str(tab.label): inner(tab, None) for tab in tabs.children if isinstance(tab, gr.Tab)}


def test_every_sub_tab_is_on_screen(phone):
    subs = {title: labels for title, labels in sub_tabs().items() if labels}
    assert len(subs) >= 3
    for title, labels in subs.items():
        phone.locator("#tabs").get_by_role("tab", name=title, exact=True).click()
        for label, accordion in labels:
            if accordion:
                opener = phone.locator("#tabs").get_by_text(accordion, exact=True).locator("visible=true").first
                if not phone.locator("#tabs").get_by_role("tab", name=label, exact=True).first.is_visible():
                    opener.click()
            tab = phone.locator("#tabs").get_by_role("tab", name=label, exact=True).first
            tab.wait_for(state="attached", timeout=15_000)
            assert tab.is_visible(), f"{title}: {label} is hidden (in an overflow menu)"
            box = tab.bounding_box()
            assert 0 <= box["x"] and box["x"] + box["width"] <= 400, f"{title}: {label} is off screen"
