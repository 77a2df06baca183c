"""The lecturer's cockpit in a real browser: the lecturer's page opens a room and shows its cockpit live; a student's
page (its own browser context: its own session) joins from the Workshops panel with a nickname and walks a
workshop; the cockpit shows that student by itself (no click), with the step and the answer, and an answer that is
HTML is shown as text; the lecturer reveals the step and the student's page shows its answer; the lecturer uploads a
workshop file of their own and the room keeps it."""

from __future__ import annotations

import re

from playground.rooms import progress


def _shows(page, selector: str, text: str, timeout: int = 30_000) -> None:
    page.wait_for_function("([s, t]) => (document.querySelector(s)?.innerText || '').includes(t)", arg=[selector, text],
                           timeout=timeout)


def test_the_cockpit_follows_a_student_and_the_reveal_reaches_them(browser, app_url, tmp_path):
    lecturer, student = (browser.new_context(viewport={"width": 1400, "height": 1000}).new_page() for _ in range(2))
    lecturer.goto(app_url + "?tab=class-quiz")
    lecturer.wait_for_selector("#quiz-lecturer", timeout=120_000)
    lecturer.get_by_text("Lecturer: open a room and reveal").click()
    lecturer.locator("#quiz-open").click()
    lecturer.wait_for_selector("#quiz-opened .quiz-room b", timeout=30_000)
    code = lecturer.locator("#quiz-opened .quiz-room b").inner_text().replace(" ", "")
    assert re.fullmatch(r"[A-Z0-9]{6}", code)
    lecturer.get_by_text("Cockpit: your room's workshop progress").click()
    lecturer.locator("#cockpit-live input").check()
    _shows(lecturer, "#cockpit-summary", "Nobody has joined yet")

    student.goto(app_url)
    student.wait_for_selector("#workshop", timeout=120_000)
    student.get_by_text("Workshops: a lecturer's path through the tabs").click()
    student.locator("#workshop-pick input").click()
    student.get_by_role("option", name="Tokenization: what a model actually reads").click()
    _shows(student, "#workshop-step", "Step 1 of", timeout=90_000)
    student.locator("#workshop-room textarea").fill(code.lower())
    student.locator("#workshop-nickname textarea").fill("Lee")
    student.locator("#workshop-join").click()
    _shows(student, "#workshop-room-status", "as Lee")
    _shows(lecturer, "#cockpit-students", "Lee")                        # by itself: the live cockpit's timer
    student.locator("#workshop-next").click()
    _shows(student, "#workshop-step", "Step 2 of")
    student.locator("#workshop-answer textarea").fill("<b>##</b>")
    student.locator("#workshop-check").click()
    _shows(student, "#workshop-verdict", "Not quite")
    _shows(lecturer, "#cockpit-funnel", "<b>##</b>: 1")                 # the answer as text, never as HTML
    assert lecturer.locator("#cockpit-funnel b").count() == 0

    lecturer.locator("#cockpit-step input").click()
    lecturer.get_by_role("option", name="tokenization: step 2").click()
    lecturer.locator("#cockpit-reveal").click()
    _shows(lecturer, "#cockpit-said", "Revealed step 2 of tokenization")
    _shows(student, "#workshop-revealed", "The lecturer revealed this step's answer: ##")
    assert progress.revealed(code, "tokenization") == [2]

    own = tmp_path / "my-lecture.yaml"                                  # the lecturer's own file, uploaded
    own.write_text("id: mine\ntitle: My own lecture\nsteps:\n  - title: One\n    view: \"tab=tokenization\"\n"
                   "    text: Look at the tokens.\n", encoding="utf-8")
    lecturer.locator("#cockpit-upload input[type=file]").set_input_files(str(own))
    _shows(lecturer, "#cockpit-said", "walks your My own lecture (1 step, from my-lecture.yaml)")
    assert progress.workshop_of(code) == own.read_text(encoding="utf-8")
    for page in (lecturer, student):
        page.context.close()
