"""One full path through the app by keyboard alone (WCAG 2.1.1), in a real browser: Tab to the sentence box, type a
sentence and apply it with Enter; Tab into the token view and move from token to token with the arrow keys (focus
lights up what hover does and says the token's tooltip in words); Shift+Tab back to the tab strip and open the
Attention tab with Enter; turn a head on with Space; Tab into the head view and choose a token with the arrow keys
(its lines drawn, listed in words). Focus is visible at each step. No mouse event is sent."""

from __future__ import annotations

import pytest

from tests.conftest import Traffic

SENTENCE = "The cat sat on the mat."
# what has the focus, as a short string for the assertion messages
ACTIVE_JS = """() => { const e = document.activeElement;
  return `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${String(e.className).split(' ')[0]}`
    + ` ${(e.getAttribute('aria-label') || e.innerText || e.value || '').slice(0, 30)}`; }"""
# the focused element's outline is drawn (a :focus-visible rule): style not none, at least 2 px wide
VISIBLE_FOCUS_JS = """() => { const s = getComputedStyle(document.activeElement);
  return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2) || s.boxShadow !== 'none'; }"""


def tab_until(page, matches_js: str, back: bool = False, most: int = 120) -> None:
    """Tab (or Shift+Tab) until the focused element satisfies matches_js(el); fails naming where focus went."""
    seen = []
    for _ in range(most):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        if page.evaluate(f"() => ({matches_js})(document.activeElement)"):
            return
        seen.append(page.evaluate(ACTIVE_JS))
    pytest.fail(f"never reached by {'Shift+Tab' if back else 'Tab'}: {matches_js}; focus went to: {seen[-12:]}")


@pytest.fixture(scope="module")
def kb_page(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, reduced_motion="reduce")
    try:
        page = context.new_page()
        page.traffic = Traffic(page)
        page.goto(app_url)
        page.wait_for_selector("#tokens-view .tok-text", timeout=60_000)
        yield page
    finally:
        if browser.is_connected():
            context.close()


@pytest.mark.timeout(300)
def test_one_full_path_by_keyboard_alone(kb_page):
    page = kb_page
    page.locator("body").focus()
    tab_until(page, "(el) => el.closest('#sentence') && el.matches('textarea, input')")
    assert page.evaluate(VISIBLE_FOCUS_JS), "the sentence box shows its focus"
    page.keyboard.press("Control+A")
    page.keyboard.type(SENTENCE)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#tokens-view .tok-text')?.innerText.includes('cat')",
                           timeout=30_000)
    page.traffic.settle(quiet_ms=400)

    # the token view: a row by Tab, a token by the arrow keys; focus shows what hover shows
    tab_until(page, "(el) => el.matches('#tokens-view .tok-text')")
    assert page.evaluate(VISIBLE_FOCUS_JS), "a tokenizer's row shows its focus"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    token = page.evaluate("() => { const t = document.activeElement; return t.matches('.tok') && "
                          "{text: t.innerText, title: t.title, lit: document.querySelectorAll('#tokens-view .tok.hl')"
                          ".length}; }")
    assert token, f"the arrow keys focus a token, not {page.evaluate(ACTIVE_JS)}"
    assert token["lit"] >= 2, "the token and those of the other tokenizers over the same characters light up"
    info = page.locator("#tokens-view .kb-info").inner_text()
    assert token["title"].split("\n")[0] in info, f"the tooltip is said in words: {info!r}"
    assert page.evaluate(VISIBLE_FOCUS_JS), "the focused token shows its focus"

    # back to the tab strip, the Attention tab opened with Enter
    tab_until(page, "(el) => el.getAttribute('role') === 'tab' && el.innerText.trim() === 'Attention'", back=True)
    assert page.evaluate(VISIBLE_FOCUS_JS), "the tab shows its focus"
    page.keyboard.press("Enter")
    page.wait_for_function("() => [...document.querySelectorAll('[role=tab][aria-selected=true]')]"
                           ".some((t) => t.innerText.trim() === 'Attention')", timeout=15_000)
    page.wait_for_selector("#attn-head-view .hv-scroll", state="visible", timeout=60_000)
    page.traffic.settle(quiet_ms=400)

    # a head turned on with Space (one head is drawn at first; the first one off is picked)
    tab_until(page, "(el) => el.matches('#attn-head-view .hv-hb input') && !el.checked")
    head = page.evaluate("() => document.activeElement.dataset.h")
    assert page.evaluate("() => getComputedStyle(document.activeElement.nextElementSibling).outlineStyle") != "none"
    page.keyboard.press("Space")
    assert page.evaluate(f"() => !document.querySelector('#attn-head-view .hv-head[data-h=\"{head}\"]')"
                         ".classList.contains('off')"), f"Space turned head {head} on"

    # a token of the head view chosen by the arrow keys: its lines drawn, and said in words
    tab_until(page, "(el) => el.matches('#attn-head-view .hv-scroll')")
    assert page.evaluate(VISIBLE_FOCUS_JS), "the head view shows its focus"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    chosen = page.evaluate("() => [...document.querySelectorAll('#attn-head-view .hv-t.on')].map((t) => "
                           "[t.dataset.side, t.dataset.i])")
    assert chosen == [["q", "1"]], f"the second query token is chosen: {chosen}"
    said = page.locator("#attn-head-view .kb-info").inner_text()
    assert said.startswith("Query 1 ") and "(head " in said, f"its lines in words: {said!r}"
    page.keyboard.press("ArrowRight")
    assert page.locator("#attn-head-view .kb-info").inner_text().startswith("Key 1 "), "right: the key side"
