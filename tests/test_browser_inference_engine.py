"""The Inference tab's KV cache and Batching views in a real browser: measure the cache of our GPT's text (the page's
numbers are the endpoint's), run the batching experiment to batch 4 (its table streamed, row 0 identical alone and in
each batch), and look at the engine serving SmolLM2, live; each view as drawn audited by axe-core in light and dark
mode (tests/test_browser_a11y.py audits every view before it is drawn)."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot

a11y = pytest.importorskip("tests.test_browser_a11y", reason="pip install axe-playwright-python")

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"


@pytest.fixture(scope="module")
def inference(page):
    from tests.smollm2_reference import require_smollm2

    require_smollm2()
    page.get_by_role("tab", name="Inference", exact=True).click()
    page.locator("#kv-about").wait_for(state="visible", timeout=30_000)
    return page


def test_the_kv_cache_of_our_gpt_s_text_and_its_window(inference, client):
    page = inference
    page.get_by_label("our GPT (gpt-shakespeare)").check()
    page.locator("#kv-prompt textarea").fill(PROMPT)
    page.locator("#kv-run").click()
    page.wait_for_function("() => document.querySelector('#kv-table')?.innerText.includes('bytes a token')",
                           timeout=60_000)
    for plot in ("#kv-growth", "#kv-times"):
        page.wait_for_selector(f"{plot} .js-plotly-plot", timeout=30_000)
    data = client.predict(PROMPT, "gpt-shakespeare", True, "Say that again in one short sentence.", 8,
                          api_name="/kv_cache")[-1]
    table = page.locator("#kv-table").inner_text()
    assert f"{data['bytes']:,}" in table and "6,144 bytes a token" in table
    assert f"from token {data['window']['slid_from']} on" in table and "The window" in table
    page.locator("#kv-growth").scroll_into_view_if_needed()
    screenshot(page, "inference_kv.png")
    assert not drawn_view_violations(page, "KV cache")


def test_the_batching_experiment_and_the_live_engine(inference):
    page = inference
    page.get_by_role("tab", name="Batching", exact=True).click()
    page.locator("#batch-look").click()
    page.wait_for_function("() => /Measured at|No engine/.test(document.querySelector('#batch-live-text')?.innerText"
                           " || '')", timeout=60_000)
    page.get_by_label("Largest batch").click()
    page.get_by_role("option", name="4", exact=True).click()
    page.locator("#batch-run").click()
    page.wait_for_function("() => document.querySelector('#batch-table')?.innerText.includes('Batch invariance')"
                           " && document.querySelectorAll('#batch-table tbody tr').length === 3", timeout=120_000)
    table = page.locator("#batch-table").inner_text()
    assert table.count("identical bits") == 3 and "the same bits at every batch size" in table
    page.wait_for_selector("#batch-plot .js-plotly-plot", timeout=30_000)
    page.locator("#batch-look").click()      # the experiment made the served engine: it is there now
    page.wait_for_function("() => document.querySelector('#batch-live-text')?.innerText.includes('Since it started')",
                           timeout=60_000)
    # watched live: the timer measures again by itself, every 2 s
    stamp = "() => (document.querySelector('#batch-live-text')?.innerText.match(/Measured at (\\S+)/) || [])[1]"
    before = page.evaluate(stamp)
    page.get_by_label("Watch it live (every 2 s)").check()
    page.wait_for_function(f"(before) => ({stamp})() && ({stamp})() !== before", arg=before, timeout=30_000)
    page.get_by_label("Watch it live (every 2 s)").uncheck()
    page.locator("#batch-plot").scroll_into_view_if_needed()
    screenshot(page, "inference_batching.png")
    assert not drawn_view_violations(page, "Batching")
    assert not page.external_requests


def drawn_view_violations(page, where: str) -> list[str]:
    """axe's serious and critical findings on the view as drawn, in light and dark mode; the pointer moved off the
    button it pressed first (a hovered button is drawn lighter, as a person would see it only under the pointer)."""
    page.mouse.move(0, 0)
    found = []
    for mode in a11y.MODES:
        a11y.dark(page, mode == "dark")
        found += a11y.checked(page, f"{mode} · Inference / {where}")
    a11y.dark(page, False)
    return found
