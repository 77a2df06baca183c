"""Lecture mode on a projector, in a real browser: at 1920 x 1080 and at 1280 x 720, every tab and sub-tab that draws
a plotly figure, each figure checked as it is drawn: as wide as the page's content (side-by-side figures stack),
no two tick labels on top of each other, no title, axis title, legend or note cut at the figure's edge or on
another note, no two numbers of a heatmap's cells run together (and none too small to read), no axis labelled in
a type too small to read, no legend that scrolls or that takes the plot's width beside it. One browser, one
page: each view is opened once and the window resized. LECTURE_SHOTS=folder keeps a screenshot of each figure at
each size there for a person to look at (without it none is taken: 56 of them took 30 s of the run)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.conftest import Traffic

SIZES = [(1920, 1080), (1280, 720)]
# (tab, sub-tab) of every view that draws plotly figures, in the page's order; None: the tab has no sub-tabs
VIEWS = [("Tokenization", "Compare tokenizers"), ("Tokenization", "Classic BPE, step by step"),
         ("Embeddings", "Word space"), ("Embeddings", "Contextual"), ("Embeddings", "Sentence space"),
         ("Embeddings", "Bias in embeddings"),
         ("RNN gradient flow", "Gradient flow through time"), ("RNN gradient flow", "Memory experiment (live)"),
         ("Attention", "Head view, model view, heatmap"), ("Attention", "Inside one head: Q, K, V, softmax"),
         ("Attention", "Positional encoding"), ("Attention", "Induction heads"),
         ("Seq2seq attention", None), ("Masked-LM fill-in", None), ("Generation", None),
         ("Fine-tuning", "LoRA"), ("Fine-tuning", "SFT"), ("Fine-tuning", "DPO"), ("Fine-tuning", "Classify")]
# what is clicked in a view to show its other figures: Generation's attention of the generated text (128 tokens)
CLICKS = {("Generation", None): ("Causal attention of the generated text", "Show attention")}
WIDTH_SHARE = 0.9   # of the content's width: a figure narrower than this is a side-by-side figure left half width
SMALLEST = 8        # px: a heatmap's numbers in a smaller type cannot be read from the back of a hall
TICK_SMALLEST = 12  # px: an axis' labels are thinned out rather than set smaller (assets/view.js, LECTURE.tick)
LEGEND_SHARE = 0.4  # of a figure's width: a legend beside the plot wider than this leaves the plot too little

# What is wrong with the figures shown, as sentences (an empty list: nothing). Boxes are the text's own box on
# screen with its rotation (getBBox through getScreenCTM), a little lower than the line it sits on (labels one
# line apart touch), compared by the separating axis test; titles and notes must keep 4 px apart.
PROBLEMS_JS = """([share, smallest, tickSmallest, legendShare]) => {
  const problems = [];
  const content = document.querySelector('#tabs').getBoundingClientRect().width;
  const corners = (el, pad) => {  // pad > 0: a little wider (titles must not touch), < 0: a little narrower
    const b = el.getBBox(), m = el.getScreenCTM(), dx = pad < 0 ? Math.min(-pad, b.width * 0.05) : -pad;
    const dy = b.height * 0.15;
    return [[b.x + dx, b.y + dy], [b.x + b.width - dx, b.y + dy], [b.x + b.width - dx, b.y + b.height - dy],
            [b.x + dx, b.y + b.height - dy]].map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const apart = (p, q) => [p, q].some((poly) => poly.some(([x1, y1], i) => {
    const [x2, y2] = poly[(i + 1) % poly.length], nx = y2 - y1, ny = x1 - x2;
    const a = p.map(([x, y]) => x * nx + y * ny), b = q.map(([x, y]) => x * nx + y * ny);
    return Math.max(...a) <= Math.min(...b) || Math.max(...b) <= Math.min(...a);
  }));
  const shown = (els) => [...els].filter((e) => e.textContent.trim() && e.getBBox().width > 0);
  const overlaps = (els, pad = -1) => {
    const boxes = shown(els).map((e) => [e.textContent.trim(), corners(e, pad)]), out = [];
    boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => { if (!apart(p, q)) out.push(`${a} / ${b}`); }));
    return out;
  };
  document.querySelectorAll('.js-plotly-plot').forEach((gd) => {
    if (!gd.offsetParent || !gd._fullLayout) return;
    const title = (gd.layout.title && gd.layout.title.text) || '';
    const name = (gd.closest('[id]') || gd).id + (title ? ` (${title.slice(0, 40)})` : '');
    const svg = gd.querySelector('.main-svg'), box = svg.getBoundingClientRect();
    if (!gd.layout.width && box.width < share * content) {  // a figure of a fixed size is as wide as it says
      problems.push(`${name}: ${Math.round(box.width)} px wide of the content's ${Math.round(content)}`);
    }
    gd.querySelectorAll('.xaxislayer-above, .yaxislayer-above').forEach((layer) => {
      const ticks = layer.querySelectorAll(':scope > .xtick > text, :scope > .ytick > text'), hit = overlaps(ticks);
      if (hit.length) problems.push(`${name}: tick labels overlap: ${hit.slice(0, 3).join(', ')}`);
      const size = Math.min(...shown(ticks).map((t) => parseFloat(getComputedStyle(t).fontSize)));
      if (size < tickSmallest) problems.push(`${name}: ${shown(ticks).length} tick labels in ${size} px type`);
    });
    const legend = gd._fullLayout.legend, drawn = gd.querySelector('.legend'), plot = gd.querySelector('.nsewdrag');
    if (gd._fullLayout.showlegend && legend && drawn && plot) {
      if (legend._height > legend._effHeight + 1) problems.push(`${name}: the legend scrolls, entries out of sight`);
      const l = drawn.getBoundingClientRect(), p = plot.getBoundingClientRect();
      if (l.top < p.bottom && p.top < l.bottom && l.width > legendShare * box.width) {
        problems.push(`${name}: the legend beside the plot takes ${Math.round((100 * l.width) / box.width)}% of its width`);
      }
    }
    const texts = gd.querySelectorAll('.infolayer g[class$="title"] text, .annotation-text, .legendtext, .colorbar text, '
                                      + '.xtick > text, .ytick > text');
    shown(texts).forEach((t) => {
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 2 || r.right > box.right + 2 || r.top < box.top - 2 || r.bottom > box.bottom + 2) {
        problems.push(`${name}: '${t.textContent.trim().slice(0, 40)}' is cut at the figure's edge`);
      }
    });
    const notes = overlaps(gd.querySelectorAll('.annotation-text, .infolayer g[class$="title"] text'), 2);
    if (notes.length) problems.push(`${name}: titles or notes overlap: ${notes.slice(0, 3).join(', ')}`);
    gd.querySelectorAll('.hm').forEach((hm) => {
      const cells = hm.querySelectorAll('.heatmap-label text'), hit = overlaps(cells);
      if (hit.length) problems.push(`${name}: heatmap numbers overlap: ${hit.slice(0, 3).join(', ')}`);
      const size = Math.min(...shown(cells).map((c) => parseFloat(getComputedStyle(c).fontSize)));
      if (size < smallest) problems.push(`${name}: heatmap numbers in ${size} px type`);
    });
  });
  return problems;
}"""

# The view has settled: no output of the open tab still computing (Gradio's status tracker, shown while an event
# runs), and every figure shown is drawn, scaled for lecture mode and fitted to its size (assets/view.js marks it),
# at its box's width (a fit that ran just before the window's resize reached the page had marked a 1216 px figure
# fitted in the 1856 px page; its resize to the box came a moment later)
SETTLED_JS = """() => {
  const shown = (selector) => [...document.querySelectorAll(selector)].filter((el) => el.offsetParent);
  const plots = shown('.js-plotly-plot');
  return shown('#tabs .wrap.full:not(.hide), #tabs .wrap.minimal:not(.hide)').length === 0 && plots.length > 0
    && plots.every((gd) => gd._fullLayout && gd.dataset.lecture === '1' && gd.dataset.fitted === '1'
                           && (gd.layout.width || Math.abs(gd.clientWidth - gd._fullLayout.width) <= 1));
}"""


def _open(page, tab: str, sub: str | None) -> None:
    page.get_by_role("tab", name=tab, exact=True).click()
    if sub:
        page.get_by_role("tab", name=sub, exact=True).click()
    page.traffic.settle(quiet_ms=300)  # the sub-tab's own events are answered
    for text in CLICKS.get((tab, sub), ()):
        page.locator("#tabs").get_by_text(text, exact=True).locator("visible=true").first.click()
        page.traffic.settle(quiet_ms=300)
    page.wait_for_function(SETTLED_JS, timeout=60_000)


def _resize(page, width: int, height: int) -> None:
    """Each figure is drawn again at its new width and fitted again (the marks cleared first, so the wait is for
    the new drawing)."""
    page.evaluate("() => document.querySelectorAll('.js-plotly-plot').forEach((gd) => { gd.dataset.fitted = ''; })")
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_function(SETTLED_JS, timeout=20_000)


def test_every_figure_reads_on_a_projector_in_lecture_mode(app_url, browser):
    """Also: a figure drawn in a 1280 px window fills a 1920 px one after the resize (a laptop's window dragged to the
    projector). Plotly's own resize measured five figures while their panels were still being laid out, and they
    stayed 1216 px wide of 1856 (assets/view.js now follows each figure's box; until then this test failed in every
    full run, marked as an expected failure)."""
    shots = Path(os.environ["LECTURE_SHOTS"]) if os.environ.get("LECTURE_SHOTS") else None  # pictures check nothing
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    problems = []
    context = browser.new_context(viewport=dict(zip(("width", "height"), SIZES[0])))
    try:
        page = context.new_page()
        page.traffic = Traffic(page)
        page.goto(f"{app_url}?lecture=1")
        page.wait_for_function("() => document.body.classList.contains('lecture')", timeout=30_000)
        for tab, sub in VIEWS:
            _open(page, tab, sub)
            here = (page.viewport_size["width"], page.viewport_size["height"])
            for width, height in sorted(SIZES, key=lambda size: size != here):   # the current size first
                if (width, height) != here:
                    _resize(page, width, height)
                found = page.evaluate(PROBLEMS_JS, [WIDTH_SHARE, SMALLEST, TICK_SMALLEST, LEGEND_SHARE])
                problems += [f"{width}x{height} {tab} / {sub}: {problem}" for problem in found]
                slug = re.sub(r"[^a-z0-9]+", "-", f"{tab} {sub or ''}".lower()).strip("-")
                for i, figure in enumerate(page.locator(".js-plotly-plot").locator("visible=true").all() if shots else []):
                    figure.screenshot(path=str(shots / f"projector-{width}-{slug}-{i + 1}.png"))
    finally:
        context.close()
    assert not problems, "\n".join(problems)


# In the window: (the element's top, its bottom) within the part of the window the stuck panel leaves, at least
# `room` px of the element shown, or the element's whole height when shorter
IN_SIGHT_JS = """([selector, panel, room]) => {
  const el = [...document.querySelectorAll(selector)].filter((e) => e.offsetParent).pop();
  const stuck = document.querySelector(panel).getBoundingClientRect().bottom;
  if (!el) return false;
  const r = el.getBoundingClientRect();
  return r.top >= stuck - 2 && r.top <= window.innerHeight - Math.min(room, r.height);
}"""
PROJECTOR = {"width": 1280, "height": 720}


def _within_window(page, selector: str) -> bool:
    return page.evaluate("(s) => { const r = document.querySelector(s).getBoundingClientRect();"
                         " return r.top >= 0 && r.bottom <= window.innerHeight; }", selector)


def test_a_walked_steps_view_is_in_sight_under_it_on_a_projector(browser, app_url):
    """Lecture mode at 1280 x 720: the tour's view was always below the fold (the lecturer scrolled down to show it
    and up for Next, nine times), and a workshop's step pushed its view off screen with a second sentence box
    (issue #54). Each step's view now starts in sight just under the step, whose Next stays on screen; a workshop's
    answer boxes are off the projector. The sentence box fits the lecture's type and shows a focus ring."""
    from playground.ui import tour

    context = browser.new_context(viewport=PROJECTOR)
    try:
        page = context.new_page()
        page.traffic = Traffic(page)
        page.goto(f"{app_url}?lecture=1")
        page.wait_for_function("() => document.body.classList.contains('lecture')", timeout=30_000)
        box = page.locator("#sentence textarea")
        assert box.evaluate("(t) => t.scrollHeight <= t.clientHeight"), "the sentence's descenders are cut"
        box.focus()
        assert box.evaluate("(t) => getComputedStyle(t).outlineStyle") == "solid", "no focus ring"

        page.locator("#tour").get_by_text("Guided tour").click()
        for i, step in enumerate(tour.STEPS):
            page.locator("#tour-next").click()
            page.wait_for_function(f"() => document.querySelector('#tour-text')?.innerText.includes('Step {i + 1} of')",
                                   timeout=15_000)
            page.wait_for_function(IN_SIGHT_JS, arg=[f"#{step.shows}", "#tour", 150], timeout=15_000)
            assert _within_window(page, "#tour-next"), f"step {i + 1}: Next is off screen"

        page.locator("#tour").get_by_text("Guided tour").click()   # closed: the workshop is walked next
        page.get_by_text("Workshops: a lecturer's path through the tabs").click()
        page.locator("#workshop-pick input").click()
        page.get_by_role("option", name="Attention, head by head").click()
        for i in range(1, 4):
            page.wait_for_function(f"() => document.querySelector('#workshop-step')?.innerText.includes('Step {i} of')",
                                   timeout=60_000)
            page.wait_for_function(IN_SIGHT_JS, arg=["#tabs [role=tabpanel]", "#workshop", 150], timeout=15_000)
            assert _within_window(page, "#workshop-next"), f"workshop step {i}: Next is off screen"
            shown = page.locator("#workshop-choice, #workshop-answer, #workshop-input").locator("visible=true").count()
            assert shown == 0, f"workshop step {i}: {shown} answer boxes on the projector"
            page.locator("#workshop-next").click()
    finally:
        context.close()
