"""The Real vocabularies view in a real browser: type a sentence in three scripts and see it in each vocabulary, the
premium heatmap drawn with its text alternatives (the plot's description and the table), and the page's numbers equal
to those the endpoint gives for the same sentence."""

from __future__ import annotations

from playground.analysis import vocabularies as vocab
from tests.conftest import screenshot

SENTENCE = "Tokens cost more in Ελληνικά and हिन्दी"


def test_the_sentence_in_every_vocabulary_and_the_premium_per_language(page, client):
    page.get_by_role("tab", name="Real vocabularies, side by side", exact=True).click()
    box = page.locator("#sentence textarea")
    box.fill(SENTENCE)
    box.press("Enter")
    page.wait_for_function("(s) => document.querySelector('#voc-tokens')?.innerText.includes('Tokens')"
                           " && document.querySelector('#voc-counts')?.innerText.includes('o200k_base')", arg=SENTENCE,
                           timeout=30_000)
    rows = page.locator("#voc-tokens .tok-row")
    assert rows.count() == len(vocab.available()) >= 2
    data = client.predict(SENTENCE, api_name="/vocabularies")[-1]
    counts = page.locator("#voc-counts").inner_text()
    for result in data["tokenizers"].values():   # the page's table says the endpoint's counts
        assert f"{result['n_tokens']:,}" in counts and f"{result['bytes_per_token']:.2f}" in counts
    # hovering a token lights the tokens over the same characters in every vocabulary
    page.locator('#voc-tokens .tok-row[data-key="o200k"] .tok').first.hover()
    assert page.locator("#voc-tokens .tok.hl").count() >= len(vocab.available())

    page.wait_for_function("() => document.querySelectorAll('#voc-premium .js-plotly-plot .heatmaplayer image,"
                           " #voc-premium .js-plotly-plot .hm').length > 0", timeout=30_000)
    page.wait_for_function("() => { const gd = document.querySelector('#voc-premium .js-plotly-plot');"
                           " const id = gd && gd.getAttribute('aria-describedby');"
                           " return id && document.getElementById(id).textContent.includes('Tamil'); }",
                           timeout=30_000)
    page.get_by_text("Text alternative: the numbers behind the figure").click()
    table = page.locator("#voc-table")
    table.wait_for(state="visible", timeout=10_000)
    tamil = next(r for r in data["sample"]["rows"] if r["language"] == "ta" and r["vocabulary"] == "o200k")
    assert f"×{tamil['premium']:.2f} · {tamil['tokens']:,}" in table.inner_text()
    page.locator("#voc-premium").scroll_into_view_if_needed()
    screenshot(page, "vocabularies.png")
    assert not page.external_requests
