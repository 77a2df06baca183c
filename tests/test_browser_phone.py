"""The page on a phone (400 x 850, issue #20 item 10): the title on one line, every tab's name on screen."""

from __future__ import annotations

import pytest

from playground.ui.demo import TABS


@pytest.fixture(scope="module")
def phone(app_url, page):
    """A second page of the module's browser (the `page` fixture's), phone-sized."""
    phone = page.context.browser.new_page(viewport={"width": 400, "height": 850})
    phone.goto(app_url)
    phone.wait_for_selector("#tabs [role=tab]", timeout=30_000)
    yield phone
    phone.close()


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
