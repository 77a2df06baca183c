"""analysis/exercises.py and ui/quiz_tab.py: every answer computed by the tabs' own code, checked, and a class's
round through the handlers."""

from types import SimpleNamespace

import gradio as gr
import pytest

from playground.analysis import exercises as ex
from playground.analysis import tokenization
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
    html, code, key, data = quiz_tab.poll_open()
    assert code in html.replace(" ", "") and data["key"] == key
    for i, guess in enumerate(["4", "4", "3"]):
        quiz_tab.poll_answer(code, "tokens-bpe", guess, SimpleNamespace(session_hash=f"student-{i}"))
    md, fig, data = quiz_tab.poll_tally(code, "tokens-bpe", "", False)
    assert fig is None and data["answers"] == 3 and "not revealed" in md
    md, fig, data = quiz_tab.poll_tally(code, "tokens-bpe", key, True)
    assert data["counts"] == {"4": 2, "3": 1} and fig.data[0].y == (1, 2) and data["answer"] == ex.solution("tokens-bpe")[0]
    with pytest.raises(gr.Error, match="no open room"):
        quiz_tab.poll_answer("ZZZZZZ", "tokens-bpe", "4", SimpleNamespace(session_hash="s"))
