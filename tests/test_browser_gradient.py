"""The RNN gradient-flow tab in a real browser (the same Chromium fixture as test_browser.py)."""

from __future__ import annotations

from tests.conftest import screenshot


def test_gradient_flow_tab_plots_flags_and_explains(page):
    page.get_by_role("tab", name="RNN gradient flow", exact=True).click()
    page.wait_for_selector("#gf-status .gf-badge", timeout=60_000)
    for selector in ("#gf-plot .js-plotly-plot", "#gf-strip .gf-ch", "#gf-lstm-gates .js-plotly-plot"):
        page.wait_for_selector(selector, timeout=30_000)   # plotly draws after the data arrives
    assert page.locator("#gf-status .gf-badge").count() == 3                  # one verdict per network
    assert page.locator("#gf-plot .js-plotly-plot").count() == 1              # the log-scale plot is drawn
    assert page.locator("#gf-plot .scatterlayer .trace").count() == 4         # rnn, lstm (h and c), gru
    assert page.locator("#gf-strip .gf-ch").count() > 50                      # the dL/dx_t strip over the text
    assert page.locator("#gf-lstm-gates .js-plotly-plot").count() == 1
    assert page.locator(".katex").count() > 5                                 # the equations are typeset

    # fresh weights with a large sigma_max and ReLU: the Elman RNN is flagged, not shown as a silent NaN
    page.get_by_label("fresh (untrained)").check()
    page.get_by_label("relu").check()
    page.get_by_label("Rescale W_hh to this σ_max").check()
    slider = page.get_by_label("number input for σ_max of W_hh")
    slider.fill("10")
    slider.press("Enter")
    page.locator("#gf-plot").scroll_into_view_if_needed()
    page.get_by_role("button", name="Back-propagate").click()
    page.wait_for_function(
        "() => /overflow|exploding/.test(document.querySelector('#gf-status .gf-badge')?.innerText || '')",
        timeout=30_000)
    screenshot(page, "gradient-flow.png")


def test_memory_experiment_shows_the_cached_run_at_once(page):
    page.get_by_role("tab", name="RNN gradient flow", exact=True).click()
    page.get_by_role("tab", name="Memory experiment (live)", exact=True).click()
    page.wait_for_selector("#mem-acc .js-plotly-plot", timeout=30_000)
    assert "Cached result" in page.locator("#mem-about").inner_text()
    assert page.locator("#mem-acc .scatterlayer .trace").count() == 4          # three networks and chance
