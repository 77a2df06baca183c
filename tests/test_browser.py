"""The page in a real browser: Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def page(app_url):
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: apt-get install -y chromium")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.external_requests = []
        page.on("request", lambda r: None if r.url.startswith(app_url) or r.url.startswith("data:")
                else page.external_requests.append(r.url))
        page.goto(app_url)
        yield page
        browser.close()


def test_typing_a_sentence_shows_its_tokens(page, tmp_path):
    page.wait_for_selector("#tokens-view .tok-row", timeout=30_000)
    box = page.locator("#sentence textarea")
    box.fill("Flibbertigibbets tokenize 🦜 happily")
    page.wait_for_function(
        "() => document.querySelector('#tokens-view')?.innerText.includes('Flibbertigibbets')", timeout=20_000)
    rows = page.locator("#tokens-view .tok-row")
    assert rows.count() == 6
    bpe = page.locator('#tokens-view .tok-row[data-key="bpe"] .tok')
    assert bpe.count() > 4
    # hovering a token lights up the tokens over the same characters in every tokenizer
    bpe.first.hover()
    assert page.locator("#tokens-view .tok.hl").count() >= 6
    screenshot(page, "tokenization.png", tmp_path)


def screenshot(page, name: str, tmp_path: Path) -> None:
    """Saved in the test's folder; SCREENSHOT_DIR=assets refreshes the README's pictures."""
    shots = Path(os.environ.get("SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / name), full_page=False)


def test_bpe_step_by_step_tab(page, tmp_path):
    page.get_by_role("tab", name="Classic BPE, step by step").click()
    page.get_by_role("button", name="Learn merges").click()
    page.wait_for_selector(".bpe-step", timeout=20_000)
    assert "est</w>" in page.locator(".bpe-step").inner_text()
    page.locator(".bpe-step").scroll_into_view_if_needed()
    screenshot(page, "bpe.png", tmp_path)


def test_why_this_split_tab(page, tmp_path):
    page.get_by_role("tab", name="Why this split? WordPiece and Unigram").click()
    page.get_by_role("button", name="Explain").click()
    page.wait_for_selector("table.uni", timeout=20_000)
    assert "longest match" in page.locator("body").inner_text()
    screenshot(page, "why-split.png", tmp_path)


def test_nothing_is_fetched_from_the_internet(page):
    assert page.external_requests == []
