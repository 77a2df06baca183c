"""Follow me in a real browser: the lecturer's page opens a room and ticks "Follow me"; a student's page (its own
browser context: its own session) joins, ticks "Follow the lecturer", and is taken to the lecturer's tab with the
lecturer's sentence, the bar saying whom it follows; the lecturer moves on and the student's page follows; the
student steps out (the lecturer's next change does not move it) and back in with one click."""

from __future__ import annotations

import pytest

from tests.test_browser_quiz import _join, _open_room, _quiz, _shows


@pytest.fixture
def new_page(browser):
    contexts = []

    def make():
        contexts.append(browser.new_context(viewport={"width": 1400, "height": 1000}))
        return contexts[-1].new_page()

    try:
        yield make
    finally:
        for context in contexts:
            context.close()


def _sentence(page, text: str) -> None:
    box = page.locator("#sentence textarea, #sentence input").first
    box.fill(text)
    box.press("Enter")


def test_a_student_follows_the_lecturer_steps_out_and_back_in(app_url, new_page):
    lecturer, student = new_page(), new_page()
    _quiz(lecturer, app_url)
    code = _open_room(lecturer)
    lecturer.locator("#follow-me input").check()
    _shows(lecturer, "#follow-lead-status", "Following you")
    _quiz(student, app_url)
    _join(student, code)
    _shows(student, "#quiz-status", "Joined room")
    student.locator("#follow-on input").check()
    _shows(student, "#follow-bar", f"Following room {code[:3]} {code[3:]}")

    lecturer.locator("#lecture-toggle input").check()             # the projector's; never the students'
    lecturer.wait_for_function("() => new URL(location.href).searchParams.get('lecture') === '1'")
    _sentence(lecturer, "The lecturer typed this sentence.")
    lecturer.get_by_role("tab", name="Tokenization", exact=True).click()
    student.wait_for_function("() => new URL(location.href).searchParams.get('text') === "
                              "'The lecturer typed this sentence.'", timeout=30_000)
    # the student's address had gained `lecture=1` while its page stayed out of lecture mode (issue #54)
    assert student.evaluate("() => [new URL(location.href).searchParams.has('lecture'), "
                            "document.body.classList.contains('lecture')]") == [False, False]
    student.wait_for_function("() => [...document.querySelectorAll('#tabs button[role=tab]')].some("
                              "b => b.getAttribute('aria-selected') === 'true' && b.innerText.trim() === "
                              "'Tokenization')", timeout=30_000)
    assert student.locator("#sentence textarea, #sentence input").first.input_value() == \
        "The lecturer typed this sentence."

    student.locator("#follow-toggle").click()                      # step out
    _shows(student, "#follow-bar", "Stepped out")
    lecturer.get_by_role("tab", name="Attention", exact=True).click()
    lecturer.wait_for_timeout(2_500)                               # several polls: the student's page stays
    assert "Stepped out" in student.locator("#follow-bar").inner_text()
    assert "tab=attention" not in student.url
    student.locator("#follow-toggle").click()                      # back in: the lecturer's current view
    student.wait_for_function("() => new URL(location.href).searchParams.get('tab') === 'attention'",
                              timeout=30_000)
    _shows(student, "#follow-bar", "Following room")
