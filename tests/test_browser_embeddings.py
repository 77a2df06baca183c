"""The Embeddings tab in a real browser: the 3D word space renders (WebGL), coloured by set."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot


@pytest.fixture(scope="module")
def embeddings_tab(page):
    page.get_by_role("tab", name="Embeddings", exact=True).click()
    page.wait_for_selector("#emb-word-plot .js-plotly-plot", timeout=60_000)
    return page


def test_the_3d_word_space_renders(embeddings_tab, tmp_path):
    page = embeddings_tab
    page.wait_for_function("() => document.querySelector('#emb-word-plot .js-plotly-plot')?.data?.[0]?.type"
                           " === 'scatter3d'", timeout=30_000)
    page.wait_for_selector("#emb-word-plot .gl-container canvas", timeout=30_000)  # Scatter3d draws in WebGL
    legend = page.locator("#emb-word-plot .legend .traces")
    assert legend.count() >= 4  # one entry per preset set shown
    size = page.evaluate("""() => { const c = document.querySelector('#emb-word-plot .gl-container canvas');
        return [c.width, c.height]; }""")
    assert size[0] > 100 and size[1] > 100
    assert "dog" in page.locator("#emb-neighbours").inner_text()
    page.locator("#emb-word-plot").scroll_into_view_if_needed()
    screenshot(page, "embeddings.png", tmp_path)
    assert page.external_requests == []


def test_switching_to_2d_draws_a_flat_scatter(embeddings_tab):
    page = embeddings_tab
    page.get_by_label("2D").check()
    page.wait_for_function("() => document.querySelector('#emb-word-plot .js-plotly-plot')?.data?.[0]?.type"
                           " === 'scatter'", timeout=30_000)  # the presets' few words: SVG (WebGL from 1,000 points)
    assert page.locator("#emb-word-plot .scatterlayer .point").count() > 0
