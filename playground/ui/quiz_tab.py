"""The Class quiz tab: predict, then reveal. A student commits a guess before the app computes the answer (with the
tabs' own analysis code: analysis/exercises.py); a lecturer opens a room, students join it with its code, and the
lecturer reveals a live histogram of the class's guesses beside the true answer (playground/polls.py)."""

from __future__ import annotations

import gradio as gr

from playground import polls
from playground.analysis import exercises as ex
from playground.figures import quiz as fq
from playground.ui.common import Shared

INTRO_MD = """**Predict, then reveal.** Pick a question, commit your guess, then check it: the answer is computed by the
same code as the tab it is about, from the models in front of you. **In class:** the lecturer opens a room and
projects its code; students type the code and send their guesses; the lecturer reveals the class's answers as a
histogram beside the true one. No login: one answer per browser per question (a new one replaces it); rooms close
after 3 hours."""

NO_ROOM = "Join a room first: type the code on the lecturer's screen (or open one, below, if you teach)."
CHOICES = [(f"{e.tab}: {e.question}", e.id) for e in ex.EXERCISES]


def _text(value, name: str) -> str:
    """A text input from the page or an API caller: a string (a plain number is read as its digits)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or (
            isinstance(value, int) and abs(value) > 10**12):
        raise gr.Error(f"{name} should be text, not {type(value).__name__}.")
    return str(value)


def _exercise(exercise_id) -> ex.Exercise:
    exercise_id = _text(exercise_id, "The exercise")
    if exercise_id not in ex.BY_ID:
        raise gr.Error(f"Unknown exercise {exercise_id[:40]!r}; choose from {', '.join(ex.BY_ID)}.")
    return ex.BY_ID[exercise_id]


def _answer(exercise: ex.Exercise, value) -> str:
    try:
        given = ex.normalise(exercise, _text(value, "The answer"))
    except ValueError as err:
        raise gr.Error(str(err)) from None
    if not given:
        raise gr.Error("Commit a guess first: type a number or pick a choice.")
    return given


def exercise(exercise_id="", answer=""):
    """Without an exercise: the list of exercises. With one and no answer: the question (the answer stays hidden until
    a guess is committed). With one and an answer: whether it is right, the answer and why."""
    if not exercise_id:
        return "", {"exercises": ex.listing()}
    e = _exercise(exercise_id)
    if not _text(answer, "The answer").strip():
        question = next(q for q in ex.listing() if q["id"] == e.id)
        return f"**{e.question}** Commit a guess, then check it: the answer stays hidden until then.", question
    result = ex.check(e.id, _answer(e, answer))
    verdict = "✓ Right" if result["correct"] else "✗ Not quite"
    return f"**{verdict}.** You said **{result['given']}**; the answer is **{result['answer']}**. {result['why']}", result


def poll_open():
    """Open a room: its code for the students, its key for this page (it reveals the answers)."""
    try:
        code, key = polls.open_room()
    except polls.PollError as err:
        raise gr.Error(str(err)) from None
    shown = f"{code[:3]} {code[3:]}"
    return (f'<div class="quiz-room">Room <b>{shown}</b><br><small>students: Class quiz tab → room code</small></div>',
            code, key, {"room": code, "key": key})


def poll_answer(room="", exercise_id="", answer="", request: gr.Request = None):
    """Send this browser's guess to a room (answering again replaces it)."""
    e = _exercise(exercise_id)
    room = _text(room, "The room code")
    if not room.strip():
        return NO_ROOM, {"room": None, "answers": None}
    given = _answer(e, answer)
    session = getattr(request, "session_hash", None) or ""
    try:
        n = polls.answer(room, e.id, session, given)
    except polls.PollError as err:
        raise gr.Error(str(err)) from None
    return f"Sent **{given}** to room {polls.normalise_code(room)}: {n} answer(s) so far.", {"room": room, "answers": n}


def poll_tally(room="", exercise_id="", key="", reveal=False):
    """A room's answers to a question: only their number until its lecturer reveals them (with the room's key)."""
    e = _exercise(exercise_id)
    room, key = _text(room, "The room code"), _text(key, "The key")
    if not room.strip():
        return NO_ROOM, None, {"room": None, "answers": None}
    try:
        data = polls.tally(room, e.id, key, reveal is True or reveal in ("true", "True", 1))
    except polls.PollError as err:
        raise gr.Error(str(err)) from None
    if not data["revealed"]:
        return f"{data['answers']} answer(s) in room {data['room']}; the lecturer has not revealed them yet.", None, data
    truth, why = ex.solution(e.id)
    data = {**data, "answer": truth, "why": why}
    return (f"**The answer: {truth}.** {why} ({data['answers']} answer(s) in room {data['room']})",
            fq.tally_figure(data["counts"], truth, e.question), data)


def _hint(exercise_id):
    e = ex.BY_ID.get(exercise_id, ex.EXERCISES[0])
    what = f"one of: {', '.join(e.choices)}" if e.kind == "choice" else "a whole number, or 'never'"
    return {"label": f"Your guess ({what}): commit it, then check", "value": ""}


def panel(tab: str) -> None:
    """This tab's questions, at its foot: guess, then check (the same answers as the Class quiz tab)."""
    mine = [e for e in ex.EXERCISES if e.tab == tab]
    if not mine:
        return
    with gr.Accordion(f"Predict, then reveal: {len(mine)} question{'s' if len(mine) > 1 else ''} about this tab",
                      open=False, elem_classes=["quiz-panel"]):
        question = gr.Dropdown([(e.question, e.id) for e in mine], value=mine[0].id, label="Question")
        guess = gr.Textbox(**_hint(mine[0].id))
        check = gr.Button("Check my guess", size="sm")
        verdict = gr.Markdown()
    question.change(lambda i: gr.update(**_hint(i)), question, guess, queue=False, api_visibility="private")
    check.click(lambda i, g: exercise(i, g)[0], [question, guess], verdict, api_visibility="private")


def _answer_box(exercise_id):
    e = ex.BY_ID.get(exercise_id, ex.EXERCISES[0])
    return (gr.update(visible=e.kind == "choice", choices=list(e.choices), value=None),
            gr.update(visible=e.kind == "number", value=""))


def build(demo: gr.Blocks, shared: Shared) -> None:
    gr.Markdown(INTRO_MD)
    first = ex.EXERCISES[0]
    question = gr.Dropdown(CHOICES, value=first.id, label="Question", elem_id="quiz-question")
    with gr.Row():
        choice = gr.Radio(list(first.choices), label="Your guess", visible=first.kind == "choice", elem_id="quiz-choice")
        number = gr.Textbox("", label="Your guess (a number, or 'never')", visible=first.kind == "number",
                            elem_id="quiz-number")
    guess = gr.Textbox(visible=False)                       # the committed guess, whichever box it came from
    with gr.Row():
        check = gr.Button("Check my guess", variant="primary", elem_id="quiz-check")
        send = gr.Button("Send to the room", elem_id="quiz-send")
    verdict = gr.Markdown(elem_id="quiz-verdict")
    with gr.Row():
        room = gr.Textbox("", label="Room code (from the lecturer's screen)", elem_id="quiz-room", scale=2)
        show = gr.Button("Show the class's answers", elem_id="quiz-show", scale=1)
    with gr.Accordion("Lecturer: open a room and reveal", open=False, elem_id="quiz-lecturer"):
        opened = gr.HTML(elem_id="quiz-opened")
        key = gr.State("")
        with gr.Row():
            open_room = gr.Button("Open a room", elem_id="quiz-open")
            reveal = gr.Button("Reveal the answers to the class", variant="primary", elem_id="quiz-reveal")
        reveal_flag = gr.Checkbox(True, visible=False)
    tally_md = gr.Markdown(elem_id="quiz-tally")
    tally_plot = gr.Plot(label="The class's answers", elem_id="quiz-plot")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        data = gr.JSON(label="quiz")

    question.change(_answer_box, question, [choice, number], queue=False, api_visibility="private")
    pick = dict(fn=lambda c, n: c if c is not None else n, inputs=[choice, number], outputs=guess, queue=False,
                api_visibility="private")
    check.click(**pick).then(exercise, [question, guess], [verdict, data], api_name="exercise")
    send.click(**pick).then(poll_answer, [room, question, guess], [verdict, data], api_name="poll_answer", queue=False)
    no_key, no_reveal = gr.Textbox("", visible=False), gr.Checkbox(False, visible=False)  # API callers set them
    show.click(poll_tally, [room, question, no_key, no_reveal], [tally_md, tally_plot, data], api_name="poll_tally",
               queue=False)
    open_room.click(poll_open, None, [opened, room, key, data], api_name="poll_open", queue=False)
    reveal.click(poll_tally, [room, question, key, reveal_flag], [tally_md, tally_plot, data], queue=False,
                 api_visibility="private")
