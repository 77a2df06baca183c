"""A student walks a workshop in a real browser: picking it opens its first step's view (the tab, the controls, the
address bar as a link would), Check grades the answer without blocking, Next opens the next step's sub-tab, and an
imported file with HTML in it shows that HTML as text."""

from __future__ import annotations

import re

from playground.analysis import workshop_tools as tools


def _shows(page, selector: str, text: str, timeout: int = 30_000) -> None:
    page.wait_for_function("([s, t]) => (document.querySelector(s)?.innerText || '').includes(t)", arg=[selector, text],
                           timeout=timeout)


def _open_panel(page, url: str) -> None:
    """The page, and the workshop panel opened (the first page of a session waits for the app's models)."""
    page.goto(url)
    page.traffic.forget()  # the last document's requests, cut: a settle waited its whole minute for them (twice)
    page.wait_for_selector("#workshop", timeout=120_000)
    page.get_by_text("Workshops: a lecturer's path through the tabs").click(timeout=120_000)
    page.wait_for_selector("#workshop-pick", state="visible", timeout=60_000)


def _selected_tab(page) -> str:
    return page.evaluate("() => [...document.querySelectorAll('#tabs button[role=tab][aria-selected=true]')]"
                         ".map(b => b.textContent.trim()).join('|')")


def test_a_student_walks_a_workshop_and_each_step_opens_its_view(page, app_url):
    _open_panel(page, app_url)
    page.locator("#workshop-pick input").click()
    page.get_by_role("option", name="Attention, head by head").click()
    _shows(page, "#workshop-step", "Step 1 of 5", timeout=90_000)
    page.wait_for_function("() => location.search.includes('att.layer=2') && location.search.includes('tab=attention')",
                           timeout=30_000)
    assert "Attention" in _selected_tab(page)
    assert page.locator("#sentence textarea").input_value() == "The bank by the river was closed on Sunday."

    truth = tools.compute("top_head", {"model": "minilm", "text": "The bank by the river was closed on Sunday.",
                                       "layer": 2, "statistic": "previous"})[0]
    wrong = str((int(truth) + 1) % 12)
    page.locator("#workshop-choice").get_by_text(wrong, exact=True).click()
    page.locator("#workshop-check").click()
    _shows(page, "#workshop-verdict", f"the answer (computed now by the app) is {truth}")
    assert "Not quite" in page.locator("#workshop-verdict").inner_text()

    page.locator("#workshop-next").click()                       # a wrong answer does not stop the walk
    _shows(page, "#workshop-step", "Step 2 of 5")
    page.wait_for_function("() => location.search.includes('tab=attention%2Fhead-finder') || "
                           "location.search.includes('tab=attention/head-finder')", timeout=30_000)
    assert page.locator("#workshop-input").is_visible()
    page.locator("#workshop-input textarea").fill("Dogs chase cats.")
    page.locator("#workshop-answer textarea").fill("x" * 600)
    page.locator("#workshop-check").click()
    _shows(page, "#workshop-verdict", "an answer is at most 500")
    page.locator("#workshop-hint").click()
    _shows(page, "#workshop-hints", "This step has no hint.")


def test_an_imported_file_shows_its_html_as_text(page, app_url, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("title: Mine\nsteps:\n  - view: tab=embeddings\n    text: <b>bold?</b> <img src=x onerror=\"window."
                    "pwned=1\">\n    question: {prompt: Say yes, kind: text, accept: [yes]}\n", encoding="utf-8")
    _open_panel(page, app_url)
    page.locator("#workshop-file input[type=file]").set_input_files(str(path))
    _shows(page, "#workshop-step", "<b>bold?</b>")
    assert page.locator("#workshop-step b").count() == 0 and page.locator("#workshop-step img").count() == 0
    assert not page.evaluate("() => window.pwned") and "Embeddings" in _selected_tab(page)
    page.locator("#workshop-answer textarea").fill("  YES ")
    page.locator("#workshop-check").click()
    _shows(page, "#workshop-verdict", "Right")
    assert re.search(r"You said\s+yes", page.locator("#workshop-verdict").inner_text())


def test_a_lecturer_adds_the_current_view_as_a_step(page, app_url):
    _open_panel(page, app_url + "?tab=attention&att.layer=2")
    page.wait_for_function("() => location.search.includes('att.layer=2')", timeout=30_000)
    page.get_by_text("Lecturer: write a workshop").click()
    page.locator("#form-text textarea").wait_for(state="visible", timeout=30_000)
    page.traffic.settle()  # the link's own answers first: under CI load the step's text was sent empty (CI, fbd44a2+)
    page.locator("#form-text textarea").fill("Look at layer 2.")
    page.locator("#form-add").click()
    _shows(page, "#form-message", "Step 1 added")
    page.wait_for_function("() => (document.querySelector('#form-draft textarea')?.value || '').includes('att.layer=2')",
                           timeout=30_000)
    assert "Look at layer 2." in page.locator("#form-draft textarea").input_value()


def test_the_workshop_panel_and_the_form_have_no_serious_accessibility_violation(page, app_url):
    """axe-core (tests/test_browser_a11y.py's audit) over the panel walking a step with an input box, and the form."""
    import pytest

    pytest.importorskip("axe_playwright_python")
    from tests.test_browser_a11y import audit

    _open_panel(page, app_url)
    page.locator("#workshop-pick input").click()
    page.get_by_role("option", name="Tokenization: what a model actually reads").click()
    _shows(page, "#workshop-step", "Step 1 of 6", timeout=90_000)
    page.get_by_text("Lecturer: write a workshop").click()
    page.wait_for_selector("#form-draft", state="visible", timeout=30_000)
    problems = audit(page, "workshops")
    assert not problems, "\n".join(problems)
