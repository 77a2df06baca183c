"""The Causal lab and the Attention tab's knockout in a real browser: each experiment runs on its button, draws its
figure and writes its text alternative from the same numbers the JSON holds; a refused model says why on screen."""

from __future__ import annotations

import re

import pytest

from tests.conftest import screenshot


@pytest.fixture(scope="module")
def causal_tab(page):
    page.get_by_role("tab", name="Causal lab", exact=True).click()
    page.get_by_role("button", name="Patch", exact=True).wait_for(timeout=30_000)
    return page


def _text(page, elem: str, needle: str, timeout: int = 120_000) -> str:
    page.wait_for_function("([e, t]) => document.querySelector(e)?.innerText.includes(t)", arg=[elem, needle],
                           timeout=timeout)
    return page.locator(elem).inner_text()


def test_patching_draws_the_grid_and_describes_it(causal_tab):
    page = causal_tab
    page.get_by_role("button", name="Patch", exact=True).click()
    text = _text(page, "#causal-patch-text", "Largest exact effects")
    page.wait_for_selector("#causal-patch .js-plotly-plot", timeout=30_000)
    assert "Agreement" in text and "Sanity" in text
    number = r"(-?\d+(?:\.\d+)?)"
    clean, corrupted = (float(x) for x in re.search(f"clean {number}, corrupted {number}", text).groups())
    assert clean > corrupted                                      # the demo pair's margin, as the page shows it


def test_ablating_a_head_and_the_sweep(causal_tab):
    page = causal_tab
    page.get_by_role("button", name="Ablate", exact=True).click()
    text = _text(page, "#causal-ablate-text", "KL(before ‖ after)")
    assert re.search(r"KL\(before ‖ after\)\*?\*? = \d+\.\d{4} nats", text)
    page.wait_for_selector("#causal-ablate .js-plotly-plot", timeout=30_000)
    page.get_by_role("button", name="Which heads matter here? (sweep)").click()
    _text(page, "#causal-sweep-text", "layer")
    page.wait_for_selector("#causal-sweep .js-plotly-plot", timeout=30_000)


def test_the_attention_tabs_knockout_on_the_head_in_view(page):
    """On MiniLM (the tab's default, a sentence encoder without an LM head) the head is knocked out in its masked LM,
    said above the result; another model marks that result out of date until it is drawn again; on our GPT the
    chosen layer's attention (the Head list's default, the mean) is knocked out and described."""
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.wait_for_selector("#attn-head-view .hv-t", timeout=60_000)
    page.get_by_text("Knock this head out: what changes?").click()
    page.get_by_role("button", name="Knock it out").click()
    text = _text(page, "#attn-knockout-text", "KL(before ‖ after)")
    assert "MiniLM-L6 has no LM head" in text and "MiniLM + LoRA" in text
    page.wait_for_selector("#attn-knockout .js-plotly-plot", timeout=30_000)
    toasts = page.locator(".toast-body").all_inner_texts()   # only the notice of the word masked, never an error
    assert page.locator("#attn-knockout .plot-stale").count() == 0
    assert all("No [MASK] in the sentence" in t and "Error" not in t for t in toasts), toasts
    screenshot(page, "attention-knockout-minilm.png")
    page.get_by_label("Model", exact=True).filter(visible=True).click()
    page.get_by_role("option", name="our GPT", exact=False).click()
    page.wait_for_selector("#attn-knockout .plot-stale", timeout=10_000)
    assert "press Knock it out" in page.locator("#attn-knockout .plot-stale").inner_text()
    screenshot(page, "attention-knockout-stale.png")
    page.wait_for_function("() => location.search.includes('gpt')", timeout=30_000)
    page.traffic.settle()
    page.get_by_role("button", name="Knock it out").click()
    page.wait_for_selector("#attn-knockout .plot-stale", state="detached", timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#attn-knockout-text').innerText.includes('no LM head')",
                           timeout=60_000)
    text = _text(page, "#attn-knockout-text", "KL(before ‖ after)")
    assert "re-initialised" in text or "Sanity" in text


def test_a_link_to_an_experiment_draws_it_and_a_link_elsewhere_computes_nothing_here(page, app_url):
    """A link that sets the patch view to the second GPT pair draws that pair's grid when the page opens, with no
    click (what a lecturer's slide or a quiz's reveal links to); a link to another tab runs no experiment."""
    from urllib.parse import urlencode

    from playground.analysis.patching import DEMOS

    model, clean, corrupted, answer, other = DEMOS["My lov·e or My lor·d? (our GPT)"]
    page.goto(f"{app_url}?{urlencode({'tab': 'attention', 'focus': '4:9'})}")
    page.traffic.forget()  # the module's earlier document: its cut requests are never reported finished
    page.wait_for_selector("#attn-head-view .hv-t", timeout=60_000)
    page.traffic.settle()
    page.get_by_role("tab", name="Causal lab", exact=True).click()
    page.get_by_role("button", name="Patch", exact=True).wait_for(timeout=30_000)
    page.traffic.settle()
    assert page.locator("#causal-patch-text").inner_text().strip() == ""
    link = {"tab": "causal-lab", "causal.model": model, "causal.clean": clean, "causal.corrupted": corrupted,
            "causal.answer": answer, "causal.other": other}
    page.goto(f"{app_url}?{urlencode(link)}")
    page.traffic.forget()
    text = _text(page, "#causal-patch-text", "Largest exact effects")
    page.wait_for_selector("#causal-patch .js-plotly-plot", timeout=30_000)
    assert f"logit({answer}) − logit({other})" in text and "v/r" in text   # the link's pair, not the default
    page.traffic.settle()
    assert page.locator("#causal-ablate-text").inner_text().strip() == ""   # the views left at their defaults
