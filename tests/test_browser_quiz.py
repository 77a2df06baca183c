"""A whole class round in a real browser: the lecturer's page opens a room, three students' pages (each its own
browser context: its own session) answer, the reveal shows the histogram with their answers."""

from __future__ import annotations

import re

from playground.analysis import exercises as ex
from tests.conftest import ARGS, CHROMIUM


def _quiz(page, url: str) -> None:
    page.goto(url + "?tab=class-quiz")
    page.wait_for_selector("#quiz-question", timeout=30_000)


def test_a_lecturer_opens_a_room_three_students_answer_and_the_reveal_shows_them(app_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        lecturer = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        _quiz(lecturer, app_url)
        lecturer.get_by_text("Lecturer: open a room and reveal").click()
        lecturer.locator("#quiz-open").click()
        lecturer.wait_for_selector("#quiz-opened .quiz-room b", timeout=30_000)
        code = lecturer.locator("#quiz-opened .quiz-room b").inner_text().replace(" ", "")
        assert re.fullmatch(r"[A-Z0-9]{6}", code)

        truth = ex.solution("tokens-bpe")[0]         # the first question: BPE tokens of 'unbelievably'
        other = str(int(truth) + 1)
        for guess in (truth, truth, other):
            student = browser.new_context(viewport={"width": 400, "height": 850}).new_page()
            _quiz(student, app_url)
            student.locator("#quiz-room textarea, #quiz-room input").first.fill(code.lower())
            student.locator("#quiz-number textarea, #quiz-number input").first.fill(guess)
            student.locator("#quiz-send").click()
            student.wait_for_function("() => /Sent/.test(document.querySelector('#quiz-verdict')?.innerText)",
                                      timeout=30_000)
            student.locator("#quiz-show").click()           # before the reveal: only how many answered
            student.wait_for_function("() => /not revealed/.test(document.querySelector('#quiz-tally')?.innerText)",
                                      timeout=30_000)
            student.context.close()

        lecturer.locator("#quiz-reveal").click()
        lecturer.wait_for_function("(t) => document.querySelector('#quiz-tally')?.innerText.includes('The answer: ' + t)",
                                   arg=truth, timeout=30_000)
        lecturer.wait_for_selector("#quiz-plot .js-plotly-plot", timeout=30_000)
        bars = lecturer.evaluate("() => document.querySelector('#quiz-plot .js-plotly-plot').data[0]")
        assert dict(zip(bars["x"], bars["y"])) == {truth: 2, other: 1}
        assert "3 answer(s)" in lecturer.locator("#quiz-tally").inner_text()
        browser.close()


def test_each_tab_asks_its_own_questions_at_its_foot(page):
    page.get_by_role("tab", name="Masked-LM fill-in", exact=True).click()
    panel = page.locator(".quiz-panel").filter(has_text="about this tab").locator("visible=true").first
    panel.get_by_text("Predict, then reveal").click()
    box = panel.locator("textarea").last
    box.fill("capital")
    assert box.input_value() == "capital"
    panel.get_by_role("button", name="Check my guess").click()
    truth = ex.solution("blank")[0]
    try:
        page.wait_for_function("(t) => [...document.querySelectorAll('.quiz-panel')].some(p => "
                               "p.innerText.includes('the answer is ' + t))", arg=truth, timeout=120_000)
    except Exception:  # say what the panel showed instead
        raise AssertionError(f"the panel shows: {panel.inner_text()[:600]!r}") from None
