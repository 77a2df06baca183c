"""The page in a real browser: Debian's Chromium driven by Playwright (the `page` fixture is in conftest)."""

from __future__ import annotations

from tests.conftest import screenshot


def test_typing_a_sentence_shows_its_tokens(page):
    page.wait_for_selector("#tokens-view .tok-row", timeout=30_000)
    box = page.locator("#sentence textarea")
    box.fill("Flibbertigibbets tokenize 🦜 happily")
    box.press("Enter")  # the shared sentence applies on Enter (or on leaving the box)
    page.wait_for_function(
        "() => document.querySelector('#tokens-view')?.innerText.includes('Flibbertigibbets')", timeout=20_000)
    rows = page.locator("#tokens-view .tok-row")
    assert rows.count() == 7  # the six shipped or packaged tokenizers and SmolLM2's
    bpe = page.locator('#tokens-view .tok-row[data-key="bpe"] .tok')
    assert bpe.count() > 4
    # hovering a token lights up the tokens over the same characters in every tokenizer
    bpe.first.hover()
    assert page.locator("#tokens-view .tok.hl").count() >= 6
    screenshot(page, "tokenization.png")


def test_bpe_step_by_step_tab(page):
    page.get_by_role("tab", name="Classic BPE, step by step", exact=True).click()
    page.get_by_role("button", name="Learn merges").click()
    page.wait_for_selector(".bpe-step", timeout=20_000)
    assert "est</w>" in page.locator(".bpe-step").inner_text()
    page.locator(".bpe-step").scroll_into_view_if_needed()
    screenshot(page, "bpe.png")


def test_why_this_split_tab(page):
    page.get_by_role("tab", name="Why this split? WordPiece and Unigram", exact=True).click()
    page.get_by_role("button", name="Explain").click()
    page.wait_for_selector("table.uni", timeout=20_000)
    assert "longest match" in page.locator("body").inner_text()
    screenshot(page, "why-split.png")


def test_nothing_is_fetched_from_the_internet(page):
    assert page.external_requests == []


def test_enter_in_a_slider_box_applies_the_number(page):
    """Enter in the vocabulary size's box applies it at once (Gradio alone waits for the box to lose focus)."""
    page.get_by_role("tab", name="Tokenization", exact=True).click()
    page.get_by_role("tab", name="Compare tokenizers", exact=True).click()
    page.wait_for_selector("#tokens-view .tok-row", timeout=30_000)
    page.get_by_label("Retrain BPE, WordPiece and Unigram on a 430 kB corpus sample at this vocabulary size").check()
    page.traffic.settle()  # the retrained tokenizers at 2,000
    page.wait_for_selector('#tokens-view .tok-row[data-key="bpe"] .tok', timeout=20_000)
    before = page.locator('#tokens-view .tok-row[data-key="bpe"] .tok').count()
    box = page.get_by_label("number input for Vocabulary size")
    box.fill("300")
    box.press("Enter")
    page.wait_for_function("(n) => document.querySelectorAll('#tokens-view .tok-row[data-key=\"bpe\"] .tok').length"
                           " > n", arg=before, timeout=20_000)  # fewer merges, more tokens
    page.get_by_label("Retrain BPE, WordPiece and Unigram on a 430 kB corpus sample at this vocabulary size").uncheck()

