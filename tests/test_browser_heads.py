"""The Attention tab's head finder and induction view in a real browser: a ranked head opens in the head view."""

from __future__ import annotations

import numpy as np
import pytest

from playground.analysis import head_finder as hf


@pytest.fixture(scope="module")
def attention_tab(page):
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.wait_for_selector("#attn-head-view .hv-t", timeout=30_000)
    return page


def test_the_top_ranked_head_opens_in_the_head_view(attention_tab):
    page = attention_tab
    page.get_by_role("tab", name="Head finder", exact=True).click()
    page.wait_for_function("() => document.querySelector('#attn-finder-table')?.innerText.includes('ranked by')",
                           timeout=30_000)
    table = np.array(hf.shipped("minilm")["stats"]["previous"])       # the default: MiniLM, previous-token, corpus
    layer, head = np.unravel_index(int(np.argmax(table)), table.shape)
    assert page.locator("#attn-finder-table table tr").nth(1).inner_text().split()[:3] == ["1", str(layer), str(head)]
    page.get_by_role("button", name="Open in the head view").click()
    page.wait_for_function(f"() => document.querySelector('#attn-heatmap')?.innerText.includes("
                           f"'Layer {layer}, head {head}')", timeout=30_000)
    assert page.locator("#attn-head-view .hv").get_attribute("data-layer") == str(layer)
    assert page.locator("#attn-head-view").is_visible()                # the head view's sub-tab is selected


def test_the_induction_view_draws_and_describes_the_two_copies(attention_tab):
    page = attention_tab
    page.get_by_role("tab", name="Induction heads", exact=True).click()
    page.wait_for_function("() => document.querySelector('#attn-induction-summary')?.innerText.includes('first copy')",
                           timeout=60_000)
    for plot in ("#attn-induction-loss", "#attn-induction-heads"):   # plotly draws after the text arrives
        page.wait_for_selector(f"{plot} .js-plotly-plot", timeout=30_000)
    points = page.locator("#attn-induction-heads .scatterlayer .point").count()
    assert points == 4 * 6                                              # every head of our GPT, the default model
