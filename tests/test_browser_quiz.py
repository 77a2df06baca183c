"""A whole class round in a real browser: the lecturer's page opens a room, three students' pages (each its own
browser context: its own session) join and answer while the lecturer's count grows by itself, the reveal shows the
histogram with the true answer's bar, a late answer is refused, the next question clears it; students follow the
lecturer's question; bad input is said on screen; the room code is large in lecture mode."""

from __future__ import annotations

import re
import time

import pytest

from playground import polls
from playground.analysis import exercises as ex


def _quiz(page, url: str, query: str = "") -> None:
    page.goto(url + "?tab=class-quiz" + query)
    page.wait_for_selector("#quiz-question", timeout=30_000)


def _open_room(lecturer) -> str:
    lecturer.get_by_text("Lecturer: open a room and reveal").click()
    lecturer.locator("#quiz-open").click()
    lecturer.wait_for_selector("#quiz-opened .quiz-room b", timeout=30_000)
    code = lecturer.locator("#quiz-opened .quiz-room b").inner_text().replace(" ", "")
    assert re.fullmatch(r"[A-Z0-9]{6}", code)
    return code


def _pick(page, exercise_id: str) -> None:
    """Choose a question in the dropdown, as a user does."""
    page.locator("#quiz-question input").click()
    page.get_by_role("option", name=ex.BY_ID[exercise_id].question, exact=False).first.click()


def _shows(page, selector: str, text: str, timeout: int = 30_000) -> None:
    page.wait_for_function("([s, t]) => (document.querySelector(s)?.innerText || '').includes(t)", arg=[selector, text],
                           timeout=timeout)


def _join(page, code: str) -> None:
    page.locator("#quiz-room textarea, #quiz-room input").first.fill(code)
    page.locator("#quiz-join").click()


def _send(page, guess: str) -> None:
    page.locator("#quiz-number textarea, #quiz-number input").first.fill(guess)
    page.locator("#quiz-send").click()


def _toast(page, text: str) -> None:
    """Gradio's error message, on screen (not only in the network log)."""
    page.wait_for_function("(t) => [...document.querySelectorAll('.toast-body')].some(e => e.innerText.includes(t))",
                           arg=text, timeout=30_000)


@pytest.fixture
def new_page(browser):
    """new_page(width, height): a page of a context of its own (its own session: a lecturer, each student) on the
    session's Chromium; every context is closed after the test."""
    contexts = []

    def make(width: int, height: int):
        contexts.append(browser.new_context(viewport={"width": width, "height": height}))
        return contexts[-1].new_page()

    try:
        yield make
    finally:
        for context in contexts:
            context.close()


def test_a_lecturer_opens_a_room_three_students_answer_and_the_reveal_shows_them(app_url, new_page):
    lecturer = new_page(1400, 1000)
    _quiz(lecturer, app_url)
    code = _open_room(lecturer)
    _shows(lecturer, "#quiz-tally", "0 answer(s)")

    truth = ex.solution("tokens-bpe")[0]         # the first question: BPE tokens of 'unbelievably'
    other = str(int(truth) + 2)
    students = []
    for i, guess in enumerate((other, other, other)):
        student = new_page(400, 850)
        _quiz(student, app_url)
        _join(student, code.lower())
        _shows(student, "#quiz-status", "Joined")
        _send(student, guess)
        _shows(student, "#quiz-verdict", "Sent")
        _shows(lecturer, "#quiz-tally", f"{i + 1} answer(s)", timeout=10_000)   # live: nobody clicks
        _shows(student, "#quiz-tally", "not revealed", timeout=10_000)     # the student's count, no histogram
        students.append(student)

    lecturer.locator("#quiz-reveal").click()
    _shows(lecturer, "#quiz-tally", "The answer: " + truth)
    lecturer.wait_for_selector("#quiz-plot .js-plotly-plot", timeout=30_000)
    bars = lecturer.evaluate("() => document.querySelector('#quiz-plot .js-plotly-plot').data[0]")
    assert dict(zip(bars["x"], bars["y"])) == {truth: 0, other: 3}       # nobody chose the answer: its bar is there
    ticks = lecturer.evaluate("() => [...document.querySelectorAll('#quiz-plot .ytick text')].map(t => t.textContent)")
    assert ticks and all(t.isdigit() for t in ticks), ticks             # whole students only
    assert "nobody chose it" in lecturer.locator("#quiz-plot").inner_text()
    _shows(students[0], "#quiz-tally", "The answer: " + truth, timeout=10_000)   # the students' pages follow

    _send(students[0], truth)                    # too late: the histogram stays the one the class saw
    _toast(students[0], "revealed the answers to this question")
    assert "Sent" not in students[0].locator("#quiz-verdict").inner_text()
    bars = lecturer.evaluate("() => document.querySelector('#quiz-plot .js-plotly-plot').data[0]")
    assert dict(zip(bars["x"], bars["y"])) == {truth: 0, other: 3}

    _pick(lecturer, "tokens-wordpiece")          # the next question: the last histogram goes
    lecturer.wait_for_function("() => !document.querySelector('#quiz-plot .js-plotly-plot')", timeout=10_000)
    _shows(lecturer, "#quiz-tally", "0 answer(s)", timeout=10_000)
    for student in students:
        student.wait_for_function("() => !document.querySelector('#quiz-plot .js-plotly-plot')", timeout=10_000)
        assert "The answer" not in student.locator("#quiz-tally").inner_text()


def test_in_a_room_check_my_guess_keeps_the_answer_until_the_reveal(app_url, new_page):
    """Before, a student's check said "✗ Not quite… the answer is 2" beside "the lecturer has not revealed it", and
    the student then sent 2."""
    lecturer = new_page(1400, 1000)
    _quiz(lecturer, app_url)
    code = _open_room(lecturer)
    truth = ex.solution("tokens-bpe")[0]
    student = new_page(400, 850)
    _quiz(student, app_url)
    _join(student, code)
    _shows(student, "#quiz-status", "Joined")
    student.locator("#quiz-number textarea, #quiz-number input").first.fill(str(int(truth) + 1))
    student.locator("#quiz-check").click()
    _shows(student, "#quiz-verdict", "stays hidden until the lecturer reveals it")
    assert "the answer is" not in student.locator("#quiz-verdict").inner_text()
    lecturer.locator("#quiz-reveal").click()
    _shows(student, "#quiz-tally", "The answer: " + truth, timeout=10_000)
    student.locator("#quiz-check").click()
    _shows(student, "#quiz-verdict", f"the answer is {truth}")


def test_students_see_the_lecturers_question_and_follow_it(app_url, new_page):
    lecturer = new_page(1400, 1000)
    _quiz(lecturer, app_url)
    _pick(lecturer, "blank")
    code = _open_room(lecturer)
    student = new_page(400, 850)
    _quiz(student, app_url)
    _join(student, code)
    box = student.locator("#quiz-question input")
    student.wait_for_function("(q) => document.querySelector('#quiz-question input').value.includes(q)",
                              arg="Paris is the [MASK]", timeout=30_000)
    assert box.is_disabled(), "the room's question, not one the student picks"
    student.locator("#quiz-choice").wait_for(state="visible", timeout=10_000)   # its answer box: the choices
    _pick(lecturer, "analogy")
    student.wait_for_function("(q) => document.querySelector('#quiz-question input').value.includes(q)",
                              arg="king − man + woman", timeout=10_000)


def test_bad_input_is_said_where_the_student_looks_and_no_stale_sent_stays(app_url, new_page):
    closed, _ = polls.open_room(now=time.time() - polls.ROOM_SECONDS - 5)    # the app's own file (tests/conftest.py)
    student = new_page(400, 850)
    _quiz(student, app_url)
    _join(student, "ABC123")
    _toast(student, "No room ABC123: check the code your lecturer shows")
    _shows(student, "#quiz-status", "No room ABC123: check the code")   # kept in place once the toast fades
    _no_error_pill(student)
    _join(student, closed)
    _toast(student, f"Room {closed} has closed")
    _shows(student, "#quiz-status", f"Room {closed} has closed")
    _no_error_pill(student)
    code, _ = polls.open_room(question="tokens-bpe")
    _join(student, code)
    _shows(student, "#quiz-status", "Joined")
    _send(student, "4")
    _shows(student, "#quiz-verdict", "Sent")
    _send(student, "four")
    _toast(student, "Your answer should be a number, e.g. 4")
    student.wait_for_function("() => !document.querySelector('#quiz-verdict').innerText.includes('Sent')",
                              timeout=10_000)
    _send(student, "")
    _toast(student, "Your answer is empty")
    _no_error_pill(student)


def _no_error_pill(page) -> None:
    """No red "Error" pill left in place of the question, the room's line or the verdict (Gradio marks each output
    of a refused event with one until another answer replaces it)."""
    page.wait_for_function("() => !document.querySelector('#quiz-question .error, #quiz-status .error, "
                           "#quiz-verdict .error, #quiz-tally .error')", timeout=10_000)
    assert page.locator("#quiz-question input").is_visible()


def test_a_deleted_room_is_said_in_place_not_as_error_pills(app_url, new_page):
    from playground.rooms import progress

    code, key = polls.open_room(question="tokens-bpe")
    student = new_page(400, 850)
    _quiz(student, app_url)
    _join(student, code)
    _shows(student, "#quiz-status", "Joined")
    progress.delete(code, key)                   # the lecturer deletes the room's data
    _shows(student, "#quiz-tally", f"No room {code}", timeout=10_000)   # the page's next look at the room says so
    _send(student, "4")
    _shows(student, "#quiz-verdict", f"No room {code}")
    student.locator("#quiz-show").click()
    _shows(student, "#quiz-tally", f"No room {code}")
    _no_error_pill(student)


def test_the_room_code_is_large_in_lecture_mode(app_url, new_page):
    page = new_page(1280, 800)
    _quiz(page, app_url, "&lecture=1")
    page.wait_for_function("() => document.body.classList.contains('lecture')", timeout=20_000)
    _open_room(page)
    code = page.locator("#quiz-opened .quiz-room b")
    size = float(code.evaluate("(b) => getComputedStyle(b).fontSize").removesuffix("px"))
    box = code.bounding_box()
    assert size >= 96 and box["width"] < 1280, (size, box)              # big, and still on the screen
    page.evaluate("() => window.playgroundView.lecture(false)")
    assert float(code.evaluate("(b) => getComputedStyle(b).fontSize").removesuffix("px")) < size / 2


def test_each_tab_asks_its_own_questions_at_its_foot(page):
    tab = page.get_by_role("tab", name="Masked-LM fill-in", exact=True)
    tab.click()
    # the first visible panel is this tab's only once the switch is done (a first visit renders the tab: under
    # load, the last tab's panel was still the visible one, and the guess went into its box)
    page.wait_for_function("(t) => t.getAttribute('aria-selected') === 'true'", arg=tab.element_handle(),
                           timeout=20_000)
    page.traffic.settle()
    panel = page.locator(".quiz-panel").filter(has_text="about this tab").locator("visible=true").first
    panel.get_by_text("Predict, then reveal").click()
    box = panel.locator("textarea").last
    for _ in range(5):  # the opened panel's box can be drawn again just after it appears (on a loaded machine, once
        page.traffic.settle()   # in a run of three workers: the value typed into the first drawing was gone; in CI
        box.fill("capital")     # three tries 0.5 s apart were not enough)
        page.traffic.settle()
        if box.input_value() == "capital":
            break
        page.wait_for_timeout(1000)
    visible = page.locator(".quiz-panel").filter(has_text="about this tab").locator("visible=true")
    assert box.input_value() == "capital", [p.inner_text()[:120] for p in visible.all()]   # which panels were shown
    panel.get_by_role("button", name="Check my guess").click()
    truth = ex.solution("blank")[0]
    try:
        page.wait_for_function("(t) => [...document.querySelectorAll('.quiz-panel')].some(p => "
                               "p.innerText.includes('the answer is ' + t))", arg=truth, timeout=120_000)
    except Exception:  # say what the panel showed instead
        raise AssertionError(f"the panel shows: {panel.inner_text()[:600]!r}") from None
