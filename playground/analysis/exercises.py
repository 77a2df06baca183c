"""Predict, then reveal: questions a student answers before the app shows the answer, one or two per tab.

The questions are a workshop file, assets/workshops/quiz.yaml (analysis/workshops.py reads it); every answer is
computed when asked by the tool the file names (analysis/workshop_tools.py: the tokenizers, the BPE trace, the heads'
statistics, the gradient flow, the masked LM, the seq2seq evaluation in the card), never written there. An exercise
is a question, the kind of answer it takes (a whole number, or one of a list of choices) and a function that computes
the answer and a sentence that explains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from playground.analysis import workshop_tools, workshops

QUIZ = "quiz"          # assets/workshops/quiz.yaml


@dataclass(frozen=True)
class Exercise:
    id: str
    tab: str
    question: str
    kind: str                                   # "number" (a whole number) or "choice"
    choices: tuple[str, ...] = ()
    solve: Callable[[], tuple[str, str]] = lambda: ("", "")   # -> (the answer, why)


def _exercise(step: workshops.Step) -> Exercise:
    """A step of the quiz's workshop file as an exercise: its question, graded by its tool."""
    q = step.question
    return Exercise(q.id, step.title, q.prompt, q.kind, q.choices,
                    solve=lambda: workshop_tools.compute(q.tool, q.args))


# a question whose model is missing (a damaged checkpoint: the app starts without it and names it) is left out
EXERCISES = [_exercise(s) for s in workshops.load_shipped(QUIZ, models_required=False).steps
             if s.question is not None and not workshop_tools.missing_models(s.question.tool, s.question.args)]
BY_ID = {e.id: e for e in EXERCISES}


def listing() -> list[dict]:
    return [{"id": e.id, "tab": e.tab, "question": e.question, "kind": e.kind, "choices": list(e.choices)}
            for e in EXERCISES]


@lru_cache(maxsize=None)
def solution(exercise_id: str) -> tuple[str, str]:
    """The answer and its explanation, computed once per process (the shipped models do not change)."""
    return BY_ID[exercise_id].solve()


def normalise(exercise: Exercise, value) -> str:
    """A student's answer as it is compared and counted: a whole number, 'never', or one of the choices, lower case.
    An answer that cannot be one (a word where a number goes, a choice the question does not offer) is refused
    with what it should be ('' stays '': the caller says it is empty)."""
    text = " ".join(str(value if value is not None else "").split()).lower()[:40]
    if exercise.kind == "number" and text not in ("never", ""):
        try:
            number = float(text)
        except ValueError:
            raise ValueError("Your answer should be a number, e.g. 4: a whole number (or 'never'), not "
                             f"{text!r}.") from None
        if not np.isfinite(number) or number != int(number) or abs(number) > 10**6:
            raise ValueError(f"Your answer should be a whole number, e.g. 4, not {text!r}.")
        text = str(int(number))
    elif exercise.kind == "choice" and text and text not in {c.lower() for c in exercise.choices}:
        raise ValueError(f"Your answer should be one of: {', '.join(exercise.choices)} (not {text!r}).")
    return text


def check(exercise_id: str, value) -> dict:
    """Whether `value` is the answer, with the answer and why."""
    if exercise_id not in BY_ID:
        raise KeyError(f"Unknown exercise {exercise_id!r}; there are {', '.join(BY_ID)}.")
    exercise = BY_ID[exercise_id]
    given = normalise(exercise, value)
    truth, why = solution(exercise_id)
    return {"id": exercise_id, "question": exercise.question, "given": given, "answer": truth,
            "correct": given == truth.lower(), "why": why}
