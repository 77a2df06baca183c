"""Export in a real browser: PNG and SVG of a plotly figure, of the attention head view and of an HTML view
(the coloured tokens), CSV of a data download, JSON and CSV of a data panel that has no download button. Everything is made in the page (offline): the page fixture fails on any request off localhost."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def download(page, locator) -> bytes:
    with page.expect_download(timeout=30_000) as info:
        locator.click()
    return open(info.value.path(), "rb").read()


def test_a_plotly_figure_downloads_as_png_and_svg(page):
    page.get_by_role("tab", name="Tokenization", exact=True).click()
    bar = page.locator("div:has(> .js-plotly-plot) > .export-bar").first
    bar.wait_for(timeout=30_000)
    png = download(page, bar.locator("button", has_text="PNG"))
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5_000
    svg = ET.fromstring(download(page, bar.locator("button", has_text="SVG")))
    assert svg.tag.endswith("svg") and "".join(svg.itertext()).strip()


def test_a_figure_exported_after_it_changed_is_the_one_on_screen(page):
    """Gradio replaces a plot's element when its figure changes: the export takes the figure on screen at
    the click (not the first one drawn), at twice its size on screen."""
    from PIL import Image

    page.get_by_role("tab", name="Tokenization", exact=True).click()
    page.get_by_role("tab", name="Compare tokenizers", exact=True).click()
    box = page.locator("#sentence textarea")
    for sentence in ("Alpha beta gamma delta.", "The bank by the river was closed."):
        box.fill(sentence)
        box.press("Enter")
        page.wait_for_function(
            "(s) => document.querySelector('#tokens-view')?.innerText.includes(s.split(' ')[1])", arg=sentence,
            timeout=30_000)
    plot = page.locator("div:has(> .export-bar) > .js-plotly-plot").locator("visible=true").first
    page.traffic.settle()  # the last sentence's answers are in
    page.wait_for_function("(gd) => (gd.data?.[0]?.text || []).join(' ').length > 0", arg=plot.element_handle())
    shown = plot.evaluate("(gd) => gd.data[0].text")
    bar = plot.locator("xpath=..").locator(":scope > .export-bar")
    svg = download(page, bar.locator("button", has_text="SVG")).decode("utf-8")
    assert all(label in svg for label in shown), (shown, svg[:300])
    png = Image.open(io.BytesIO(download(page, bar.locator("button", has_text="PNG"))))
    size = plot.bounding_box()
    assert abs(png.width - 2 * size["width"]) <= 4 and abs(png.height - 2 * size["height"]) <= 4


def test_the_head_view_downloads_as_standalone_svg_and_png(page):
    """...titled with its layer and the heads drawn (a slide shows which head it is), in the file's name too."""
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.wait_for_selector("#attn-head-view .hv-t", timeout=30_000)
    layer = page.locator("#attn-head-view .hv").get_attribute("data-layer")
    heads = page.evaluate("() => [...document.querySelectorAll('#attn-head-view .hv-hb input:checked')]"
                          ".map((i) => i.dataset.h)")
    title = f"Layer {layer}, head {heads[0]}" if len(heads) == 1 else f"Layer {layer}, heads {', '.join(heads)}"
    bar = page.locator("#attn-head-view .export-bar")
    with page.expect_download(timeout=30_000) as info:
        bar.locator("button", has_text="SVG").click()
    svg = ET.fromstring(open(info.value.path(), "rb").read())
    assert f"layer-{layer}-head" in info.value.suggested_filename
    texts = [t for t in svg.iter() if t.tag.endswith("text")]
    assert texts and all("font-size" in (t.get("style") or "") for t in texts)  # styles inlined
    assert texts[0].text == title, (texts[0].text, title)
    png = download(page, bar.locator("button", has_text="PNG"))
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5_000


def test_an_html_view_downloads_as_svg_and_png_that_look_like_it(page):
    from PIL import Image

    page.get_by_role("tab", name="Tokenization", exact=True).click()
    page.wait_for_selector("#tokens-view .tok", timeout=30_000)
    bar = page.locator("#tokens-view > .export-bar")
    svg = ET.fromstring(download(page, bar.locator("button", has_text="SVG")))
    (html,) = [el for el in svg.iter() if el.tag.endswith("foreignObject")]
    tokens = page.locator("#tokens-view .tok").all_inner_texts()
    text = "".join(html.itertext())
    assert all(t in text for t in tokens[:20])
    coloured = [el for el in html.iter() if "background-color:rgb" in (el.get("style") or "")]
    assert len(coloured) >= len(tokens) // 2  # the token colours travel with the file
    png = Image.open(io.BytesIO(download(page, bar.locator("button", has_text="PNG")))).convert("RGB")
    box = page.locator("#tokens-view").bounding_box()
    assert abs(png.width - 2 * round(box["width"])) <= 4  # drawn at twice the size on screen
    assert len(png.resize((64, 64)).getcolors(64 * 64)) > 16  # a picture, not a blank canvas


def test_a_data_download_also_comes_as_csv(page):
    page.get_by_role("tab", name="Tokenization", exact=True).click()
    page.get_by_text("Data (JSON)").first.click()
    csv_button = page.locator(".export-csv").first
    csv_button.wait_for(timeout=30_000)
    rows = list(csv.reader(io.StringIO(download(page, csv_button).decode("utf-8"))))
    header, body = rows[0], rows[1:]
    assert header and body and all(len(r) == len(header) for r in body)
    # the same data as the JSON next to it
    data = json.loads(download(page, page.locator("button", has_text="Download JSON").first))
    assert data and isinstance(data, dict)


def open_data_panel(page):
    """Open the visible tab's "Data (JSON)" accordion, unless an earlier test left it open."""
    panels = page.locator("[data-testid='json'].block").locator("visible=true")
    if not panels.count():
        page.locator("span:visible", has_text="Data (JSON)").first.click()
    panels.first.wait_for(timeout=30_000)


def test_a_data_panel_without_a_download_button_gets_json_and_csv(page, client):
    from playground.analysis import normalize

    page.get_by_role("tab", name="Tokenization", exact=True).click()
    page.get_by_role("tab", name="Normalisation", exact=True).click()
    open_data_panel(page)
    bar = page.locator("[data-testid='json'].block + .export-data").locator("visible=true")
    bar.wait_for(timeout=30_000)
    data = json.loads(download(page, bar.locator("button", has_text="JSON")))
    # the panel's whole value, as the API gives it for the sentence and steps on screen
    _, expected = client.predict(page.locator("#sentence textarea").input_value(), list(normalize.STEPS),
                                 api_name="/normalize")
    assert data == expected
    rows = list(csv.reader(io.StringIO(download(page, bar.locator("button", has_text="CSV")).decode("utf-8"))))
    assert rows[0] and len(rows) > 2 and all(len(r) == len(rows[0]) for r in rows)
    assert page.evaluate("() => !Object.getOwnPropertyDescriptor(navigator, 'clipboard')")  # lent and returned
    # a panel with its own "Download JSON" button keeps that one (and its CSV): no second bar
    page.get_by_role("tab", name="Compare tokenizers", exact=True).click()
    open_data_panel(page)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")  # export.js
    assert page.locator("[data-testid='json'].block + .export-data").locator("visible=true").count() == 0
