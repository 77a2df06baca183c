"""The Seq2seq attention tab in a real browser: a translation draws the alignment heatmap, the step slider moves
the outlined row, and a bad source gets a message."""

from __future__ import annotations

import pytest
from playwright.sync_api import Error as PlaywrightError

from playground import checkpoints
from tests.conftest import screenshot

pytestmark = pytest.mark.skipif("seq2seq-bahdanau" not in checkpoints.available("seq2seq"),
                                reason="the seq2seq checkpoints are not shipped")

SOURCE = "three hundred seven , twelve , ninety nine"


@pytest.fixture(scope="module")
def seq2seq_tab(page):
    page.get_by_role("tab", name="Seq2seq attention", exact=True).click()
    page.wait_for_selector("#s2s-alignment .js-plotly-plot", timeout=30_000)
    return page


def test_every_panel_is_drawn_without_a_click(seq2seq_tab):
    """The quick re-evaluation and the Transformer's cross-attention used to load empty, waiting for a button."""
    page = seq2seq_tab
    for panel in ("#s2s-alignment", "#s2s-step-plot", "#s2s-bottleneck", "#s2s-eval", "#s2s-heads"):
        page.wait_for_selector(f"{panel} .js-plotly-plot", timeout=30_000)


def test_a_translation_draws_the_alignment_heatmap(seq2seq_tab):
    page = seq2seq_tab
    box = page.locator("#s2s-source textarea")
    box.fill(SOURCE)
    box.press("Enter")
    page.wait_for_function("() => document.querySelector('#s2s-output')?.innerText.includes('307,12,99')"
                           " || document.querySelector('#s2s-output')?.innerText.includes('the answer is')",
                           timeout=30_000)
    # the heatmap's x axis holds the source words (position first), its y axis the output tokens
    page.wait_for_function("() => document.querySelector('#s2s-alignment')?.innerText.includes('0 three')",
                           timeout=20_000)
    labels = page.locator("#s2s-alignment .xtick text").all_text_contents()
    assert labels[:3] == ["0 three", "1 hundred", "2 seven"] and len(labels) == 8
    assert page.locator("#s2s-alignment .heatmaplayer image, #s2s-alignment .hm").count() > 0
    for close in page.locator(".toast-close").all():              # other tabs' notices would cover the picture
        try:
            close.click(timeout=1000)
        except PlaywrightError:                                    # it closed itself meanwhile
            pass
    page.wait_for_function("() => ![...document.querySelectorAll('.toast-body')].some((t) => t.offsetParent)",
                           timeout=10_000)                         # the toasts' fade-out
    page.locator("#s2s-alignment").scroll_into_view_if_needed()
    screenshot(page, "seq2seq.png")


def test_a_word_outside_the_vocabulary_is_named(seq2seq_tab):
    page = seq2seq_tab
    box = page.locator("#s2s-source textarea")
    box.fill("fourty two")
    box.press("Enter")
    page.wait_for_selector("text=did you mean 'forty'", timeout=20_000)
    box.fill(SOURCE)
    box.press("Enter")


def test_a_refused_source_leaves_no_answer_to_the_previous_one(seq2seq_tab):
    """After an error, no output of the previous source stays beside the new one (ui/demo.clear_on_failure)."""
    page = seq2seq_tab
    box = page.locator("#s2s-source textarea")
    box.fill(SOURCE)
    box.press("Enter")
    page.wait_for_function("() => /correct|the answer is/.test(document.querySelector('#s2s-output')?.innerText)",
                           timeout=30_000)
    box.fill("three hundered fourty two , sevn")
    box.press("Enter")
    page.wait_for_function("() => document.querySelector('#s2s-output')?.innerText.includes('Not shown')",
                           timeout=30_000)
    assert "correct" not in page.locator("#s2s-output").inner_text()
    assert page.locator("#s2s-alignment .heatmaplayer image, #s2s-alignment .hm").count() == 0
    box.fill(SOURCE)  # and a valid source brings everything back
    box.press("Enter")
    page.wait_for_function("() => /correct|the answer is/.test(document.querySelector('#s2s-output')?.innerText)",
                           timeout=30_000)
    page.wait_for_selector("#s2s-alignment .heatmaplayer image, #s2s-alignment .hm", timeout=20_000)
