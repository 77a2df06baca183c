"""Export in a real browser: PNG and SVG of a plotly figure and of the attention head view, CSV of a data
download. Everything is made in the page (offline): the page fixture fails on any request off localhost."""

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
    bar = page.locator(".export-bar").filter(has=page.locator("button", has_text="SVG")).first
    bar.wait_for(timeout=30_000)
    png = download(page, bar.locator("button", has_text="PNG"))
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5_000
    svg = ET.fromstring(download(page, bar.locator("button", has_text="SVG")))
    assert svg.tag.endswith("svg") and "".join(svg.itertext()).strip()


def test_the_head_view_downloads_as_standalone_svg_and_png(page):
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.wait_for_selector("#attn-head-view .hv-t", timeout=30_000)
    bar = page.locator("#attn-head-view .export-bar")
    svg = ET.fromstring(download(page, bar.locator("button", has_text="SVG")))
    texts = [t for t in svg.iter() if t.tag.endswith("text")]
    assert texts and all("font-size" in (t.get("style") or "") for t in texts)  # styles inlined
    png = download(page, bar.locator("button", has_text="PNG"))
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5_000


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
