"""analysis/exercises.py, figures/quiz.py and ui/quiz_tab.py: every answer computed by the tabs' own code, checked;
a class's round through the handlers (the room's question followed, the live count, no answers after the reveal,
what bad input is told), the histogram, and the API's messages through gradio_client."""

import time
from types import SimpleNamespace

import gradio as gr
import pytest

from playground import polls
from playground.analysis import exercises as ex
from playground.analysis import tokenization
from playground.figures import quiz as fq
from playground.figures.common import ACCENT, MUTED
from playground.ui import quiz_tab


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=lambda e: e.id)
def test_every_exercise_has_a_computed_answer_within_its_choices(exercise):
    answer, why = ex.solution(exercise.id)
    assert answer and why
    if exercise.kind == "choice":
        assert answer in exercise.choices, f"{exercise.id}: the computed answer {answer!r} is not a choice"
    else:
        assert answer == "never" or answer.isdigit()


def test_answers_follow_the_models_not_a_table():
    answer, _ = ex.solution("tokens-bpe")
    assert int(answer) == len(tokenization.load("bpe").encode("unbelievably", add_special_tokens=False).tokens)


def test_check_says_right_or_wrong_and_refuses_nonsense():
    truth, _ = ex.solution("tokens-wordpiece")
    assert ex.check("tokens-wordpiece", f" {truth}.0 ")["correct"]
    assert not ex.check("tokens-wordpiece", str(int(truth) + 1))["correct"]
    for bad in ("many", "1e400", "2.5"):
        with pytest.raises(ValueError, match="whole number"):
            ex.check("tokens-wordpiece", bad)
    with pytest.raises(KeyError):
        ex.check("nope", "1")


def test_the_quiz_handlers_run_a_round():
    listing = quiz_tab.exercise("", "")[1]["exercises"]
    assert {e["id"] for e in listing} == set(ex.BY_ID)
    verdict, result = quiz_tab.exercise("blank", ex.solution("blank")[0])
    assert verdict.startswith("**✓ Right") and result["correct"]
    verdict, question = quiz_tab.exercise("blank", "")        # no guess yet: the question, never the answer
    assert "answer" not in question and question["choices"] and "stays hidden" in verdict
    html, code, seat, data = quiz_tab.poll_open()
    assert code in html.replace(" ", "") and data["key"] == seat["key"] and seat["room"] == code
    truth = ex.solution("tokens-bpe")[0]
    for i, guess in enumerate([truth, truth, str(int(truth) + 1)]):
        quiz_tab.poll_answer(code, "tokens-bpe", guess, None, SimpleNamespace(session_hash=f"student-{i}"))
    md, fig, data = quiz_tab.poll_tally(code, "tokens-bpe", "", False)
    assert fig is None and data["answers"] == 3 and "not revealed" in md
    md, fig, data = quiz_tab.poll_tally(code, "tokens-bpe", "", True, seat)   # the lecturer's page: its key in `seat`
    assert data["counts"] == {truth: 2, str(int(truth) + 1): 1} and data["answer"] == truth and data["final"]
    assert "final" in md and dict(zip(fig.data[0].x, fig.data[0].y)) == data["counts"]


def test_in_a_room_a_check_keeps_the_answer_until_the_reveal():
    """Predict, then reveal: a page in a room (a student's, or the lecturer's projected one) checks a question only
    once the lecturer has revealed it there; the tab's panels keep the same rule. Before, the check said "the answer
    is 2" while the page said it was not revealed, and the student sent 2."""
    _, code, lecturer, _ = quiz_tab.poll_open()
    quiz_tab._lead("tokens-bpe", lecturer)
    _, _, seat, _ = quiz_tab.poll_join(code, {})
    truth = ex.solution("tokens-bpe")[0]
    for page in (seat, lecturer):
        verdict, data = quiz_tab.exercise("tokens-bpe", truth, page)
        assert "stays hidden until the lecturer reveals it" in verdict and "answer" not in data and data["hidden"]
        assert "Right" not in verdict and "why" not in data
    assert "stays hidden" in quiz_tab.exercise("blank", "capital", seat)[0]      # a question the room has not asked
    quiz_tab.poll_tally(code, "tokens-bpe", "", True, lecturer)                  # the reveal
    verdict, data = quiz_tab.exercise("tokens-bpe", truth, seat)
    assert verdict.startswith("**✓ Right") and data["answer"] == truth
    assert quiz_tab.exercise("tokens-bpe", truth, {})[1]["correct"]               # outside a room: at once


def student(i: int) -> SimpleNamespace:
    return SimpleNamespace(session_hash=f"follow-{i}")


def test_a_student_who_joins_sees_the_rooms_question_and_follows_it():
    _, code, lecturer, _ = quiz_tab.poll_open()
    md, plot, lecturer, timer = quiz_tab._lead("blank", lecturer)    # right after opening: the lecturer's question
    assert lecturer["question"] == "blank" and timer.active and "**0** answer(s)" in md and plot is None
    status, question, seat, data = quiz_tab.poll_join(code.lower(), {})
    assert question["value"] == "blank" and question["interactive"] is False and data["question"] == "blank"
    assert seat == {"room": code, "key": "", "question": "blank", "shown": None} and "Joined" in status
    assert quiz_tab.poll_question(code, "analogy", lecturer["key"])["question"] == "analogy"   # the API's move
    question, _, _, seat, _ = quiz_tab._tick(seat)                    # within TICK_SECONDS on the student's page
    assert question["value"] == "analogy" and seat["question"] == "analogy"
    with pytest.raises(gr.Error, match="Only the page that opened"):
        quiz_tab.poll_question(code, "blank", "")
    with pytest.raises(gr.Error, match="Only the page that opened"):
        quiz_tab.poll_tally(code, "analogy", "", True, seat)            # a student's page holds no key


def test_the_lecturers_count_is_live_and_a_tick_sends_nothing_new():
    _, code, lecturer, _ = quiz_tab.poll_open()
    _, _, lecturer, _ = quiz_tab._lead("tokens-bpe", lecturer)
    _, md, plot, lecturer, _ = quiz_tab._tick(lecturer)
    assert "**0** answer(s)" in md and plot is None
    quiz_tab.poll_answer(code, "tokens-bpe", "4", None, student(1))
    _, md, plot, lecturer, _ = quiz_tab._tick(lecturer)
    assert "**1** answer(s)" in md and plot is None                   # the count, never the histogram before the reveal
    assert all(isinstance(out, dict) and out.get("__type__") == "update" and len(out) == 1
               for out in quiz_tab._tick(lecturer)), "nothing changed: every output skipped"
    quiz_tab.poll_tally(code, "tokens-bpe", "", True, lecturer)
    _, md, plot, lecturer, _ = quiz_tab._tick(lecturer)
    assert "The answer" in md and plot is not None


def test_answers_after_the_reveal_are_refused_and_the_tally_stays():
    _, code, lecturer, _ = quiz_tab.poll_open()
    quiz_tab.poll_answer(code, "blank", "capital", None, student(2))
    revealed = quiz_tab.poll_tally(code, "blank", "", True, lecturer)[2]
    with pytest.raises(gr.Error, match="revealed the answers to this question"):
        quiz_tab.poll_answer(code, "blank", "city", None, student(3))
    assert quiz_tab.poll_tally(code, "blank", "", False)[2]["counts"] == revealed["counts"] == {"capital": 1}


def test_bad_input_gets_a_message_that_says_what_to_do():
    _, code, _, _ = quiz_tab.poll_open()
    for room, answer, message in [("ABC123", "4", "No room ABC123: check the code your lecturer shows"),
                                  (code, "four", "Your answer should be a number, e.g. 4"),
                                  (code, "2.5", "Your answer should be a whole number, e.g. 4"),
                                  (code, "  ", "Your answer is empty")]:
        with pytest.raises(gr.Error, match=message):
            quiz_tab.poll_answer(room, "tokens-bpe", answer, None, student(4))
    with pytest.raises(gr.Error, match="should be one of: capital, city"):
        quiz_tab.poll_answer(code, "blank", "paris", None, student(4))
    with pytest.raises(gr.Error, match="No room ABC123: check"):
        quiz_tab.poll_join("abc-123")
    with pytest.raises(gr.Error, match="&lt;b&gt;"):                  # what was typed is shown, never run as HTML
        quiz_tab.poll_answer(code, "tokens-bpe", "<b>", None, student(4))


def test_another_question_clears_the_last_ones_results():
    choice, number, verdict, tally, plot = quiz_tab._question_changed("blank")
    assert choice["visible"] and not number["visible"] and verdict == tally == "" and plot is None


def test_the_histogram_shows_the_true_answer_even_when_nobody_chose_it():
    fig = fq.tally_figure({"6": 1, "3": 2}, "4", "q")
    bars = fig.data[0]
    assert list(bars.x) == ["3", "4", "6"] and list(bars.y) == [2, 0, 1]          # numbers in order, 4 among them
    assert bars.marker.color[1] == ACCENT and set(bars.marker.color[::2]) == {MUTED}
    (note,) = fig.layout.annotations
    assert note.x == 1 and "the answer: nobody chose it" in note.text             # on its bar, not at position 4
    fig = fq.tally_figure({"city": 3}, "capital", "q")                            # a choice: after the others
    assert list(fig.data[0].x) == ["city", "capital"] and fig.layout.annotations[0].x == 1
    fig = fq.tally_figure({"city": 3, "capital": 1}, "capital", "q")
    assert fig.layout.annotations[0].text == "✓ the answer" and fig.data[0].marker.color == (MUTED, ACCENT)


@pytest.mark.parametrize("most", [1, 3, 7, 40, 200])
def test_the_histograms_ticks_are_whole_students(most):
    axis = fq.tally_figure({"3": most, "4": 1}, "4", "q").layout.yaxis
    assert axis.tick0 == 0 and axis.dtick >= 1 and float(axis.dtick).is_integer()
    assert most / axis.dtick <= fq.MAX_TICKS and axis.range[1] > most


def test_the_rooms_events_are_queued_and_never_served_from_the_shared_cache():
    """Queued: a refusal reaches the page with its text. Not cacheable: a room's answers change between two
    identical calls (ui/cache.py and ui/fastpath.py share only events that read no per-session state)."""
    import app

    fns = {fn.api_name: fn for fn in app.demo.fns.values() if fn.api_name}
    for name in ("poll_open", "poll_join", "poll_answer", "poll_tally"):
        assert fns[name].queue and fns[name].fn.cacheable is False, name
    room = [fn for fn in app.demo.fns.values() if (fn.name or "").startswith("poll_") or fn.name in ("_lead", "_tick")]
    assert len(room) == 9 and not any(getattr(fn.fn, "cacheable", False) for fn in room)   # the reveal and the moves too


def test_over_the_api_a_session_in_a_room_checks_only_after_the_reveal(app_url):
    """/exercise reads the session's place in the quiz: a client that joined a room gets no answer before the
    lecturer reveals the question (a client in no room, as a student alone, gets it at once)."""
    from playground.tools.client import session

    lecturer = session(app_url, timeout=None)
    room = lecturer.predict(api_name="/poll_open")[-1]
    lecturer.predict(room["room"], "tokens-wordpiece", room["key"], api_name="/poll_question")
    truth = ex.solution("tokens-wordpiece")[0]
    student = session(app_url, timeout=None)
    assert student.predict(room["room"], api_name="/poll_join")[-1]["question"] == "tokens-wordpiece"
    verdict, data = student.predict("tokens-wordpiece", truth, api_name="/exercise")
    assert "stays hidden" in verdict and "the answer is" not in verdict and "answer" not in data
    alone = session(app_url, timeout=None)   # a session of its own: the shared client may have joined a room before
    assert alone.predict("tokens-wordpiece", truth, api_name="/exercise")[-1]["correct"]   # no room: at once
    lecturer.predict(room["room"], "tokens-wordpiece", room["key"], True, api_name="/poll_tally")
    verdict, data = student.predict("tokens-wordpiece", truth, api_name="/exercise")
    assert data["correct"] and data["answer"] == truth


def test_the_api_says_what_is_wrong(client):
    from gradio_client.exceptions import AppError

    code = client.predict(api_name="/poll_open")[-1]["room"]
    closed, _ = polls.open_room(now=time.time() - polls.ROOM_SECONDS - 5)   # the app's own file (tests/conftest.py)
    for room, answer, message in [("ABC123", "4", "No room ABC123: check the code your lecturer shows"),
                                  (code, "x", "Your answer should be a number, e.g. 4"),
                                  (closed, "4", f"Room {closed} has closed"),
                                  (code, "", "Your answer is empty")]:
        with pytest.raises(AppError, match=message):
            client.predict(room, "tokens-bpe", answer, api_name="/poll_answer")
    assert client.predict(code, "tokens-bpe", "4", api_name="/poll_answer")[-1] == {"room": code, "answers": 1}
    with pytest.raises(AppError, match="No room ABC123"):
        client.predict("ABC123", api_name="/poll_join")
    key = client.predict(api_name="/poll_open")[-1]
    moved = client.predict(key["room"], "blank", key["key"], api_name="/poll_question")
    assert moved["question"] == "blank" and client.predict(key["room"], api_name="/poll_join")[-1]["question"] == "blank"
