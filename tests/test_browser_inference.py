"""The Inference tab in a real browser: a Q4_1 block of the file drawn with its bytes, every format measured on a typed
text with its table, speculative decoding's passes and its verdict against plain greedy, and a refused input said on
screen."""

from __future__ import annotations

import re

import pytest

from tests.conftest import screenshot
from tests.test_browser_a11y import audit
from tests.smollm2_reference import require_smollm2

SLOW = 600_000      # SmolLM2's measurements on a busy 2-core machine


@pytest.fixture(scope="module")
def inference(page):
    require_smollm2()
    page.get_by_role("tab", name="Inference", exact=True).click()
    page.get_by_role("tab", name="Quantization", exact=True).click()     # after the KV cache and batching
    page.get_by_role("button", name="Measure every format").wait_for(timeout=30_000)
    return page


def _text(page, elem: str, needle: str, timeout: int = SLOW) -> str:
    page.wait_for_function("([e, t]) => document.querySelector(e)?.innerText.includes(t)", arg=[elem, needle],
                           timeout=timeout)
    return page.locator(elem).inner_text()


def test_a_block_of_the_file_is_drawn_with_its_bytes(inference):
    page = inference
    page.get_by_role("button", name="Draw the block").click()
    text = _text(page, "#quant-block-text", "gguf.quants.dequantize")
    page.wait_for_selector("#quant-block .js-plotly-plot", timeout=30_000)
    assert "blk.0.attn_q.weight" in text and re.search(r"20 bytes\s+([0-9a-f]{2} ){19}[0-9a-f]{2}", text)
    assert text.count("True") == 2                                   # both exact checks hold
    rows = re.findall(r"^(\d+)\t(\d+)\t(-?[\d.e-]+)$", text, re.M)
    assert [int(j) for j, _, _ in rows] == list(range(32)) and all(0 <= int(q) <= 15 for _, q, _ in rows)


def test_every_format_measured_on_a_typed_text(inference):
    page = inference
    box = page.locator("#quant-text textarea")
    box.fill("The bank raised its interest rates again this spring.")
    page.get_by_role("button", name="Measure every format").click()
    text = _text(page, "#quant-table", "Checks")
    for label in ("fp32", "fp16", "int8", "Q4_1"):
        assert re.search(rf"^{label}\t", text, re.M), label
    fp32 = re.search(r"^fp32\t.*$", text, re.M).group(0)
    assert "100.0%" in fp32 and "\t0\t" in fp32                      # fp32 against itself: KL 0, all agree
    for plot in ("#quant-cost", "#quant-errors", "#quant-kl"):
        page.wait_for_selector(f"{plot} .js-plotly-plot", timeout=30_000)
    screenshot(page, "inference-quantization.png", full_page=True)
    assert not audit(page, "Inference / Quantization, drawn")          # axe-core, as tests/test_browser_a11y.py


def test_speculative_decoding_shows_its_passes_and_its_verdict(inference):
    page = inference
    page.get_by_role("tab", name="Speculative decoding", exact=True).click()
    page.locator("#spec-prompt textarea").fill("Repeat this sentence exactly: The bank raised its rates again.")
    page.get_by_role("button", name="Decode both ways").click()
    steps = _text(page, "#spec-steps", "Output identical to plain greedy")
    assert "pass 2" in steps and "accepted" in steps
    table = _text(page, "#spec-table", "Speed-up")
    assert "Same text as plain greedy: yes" in table
    page.wait_for_selector("#spec-speed .js-plotly-plot", timeout=30_000)
    screenshot(page, "inference-speculative.png", full_page=True)
    assert not audit(page, "Inference / Speculative decoding, drawn")


def test_an_empty_text_is_refused_with_a_message(inference):
    page = inference
    page.get_by_role("tab", name="Quantization", exact=True).click()
    page.locator("#quant-text textarea").fill("")
    page.get_by_role("button", name="Measure every format").click()
    page.wait_for_function("() => [...document.querySelectorAll('.toast-body')].some(t => "
                           "t.innerText.includes('Type a text'))", timeout=60_000)
