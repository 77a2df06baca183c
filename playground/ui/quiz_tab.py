"""The Class quiz tab: predict, then reveal. A student commits a guess before the app computes the answer (with the
tabs' own analysis code: analysis/exercises.py); a lecturer opens a room, students join it with its code, and the
lecturer reveals a histogram of the class's guesses beside the true answer (playground/polls.py).

A room carries its lecturer's current question. The lecturer's page opens the room (the room's key stays in that
page's session) and moves it when the lecturer picks another question; a student's page joins with the code, shows
the room's question and follows it. Both ask the room what changed every TICK_SECONDS (gr.Timer, a few SQLite
reads, nothing sent back when nothing changed): the lecturer sees the count grow, the students see the histogram
when it is revealed. Revealing closes the question to answers, so the histogram stays the one the class answered.

Two things about the room's events that are easy to undo by accident:
- They are queued. A refused input (a wrong code, a word where a number goes) is a gr.Error; through the queue the
  page shows its message and ui/demo.clear_on_failure replaces the event's last result ("Sent 4 to room ...") with a
  note. A non-queued event's error reaches Gradio 6.31's page without its text: a bare "Error".
- They read `seat`, this page's place in the quiz (a gr.State, Shared.seat). So does every check of a question (this
  tab's and each tab's panel: `hidden`), which in a room waits for the lecturer's reveal. An event that reads
  per-session state is never answered from the shared answer cache (ui/cache.py) or replayed by ui/fastpath.py, and
  a room's events must not be: the same call gives another answer once a student has answered.
The timer's ticks are not queued (every open page sends one every TICK_SECONDS) and never raise.

Follow me (ui/follow.py) lays its two checkboxes out here, the student's beside the room code and the lecturer's in
the lecturer's panel, and reads this page's `seat` for the room and the key. So does the lecturer's cockpit
(ui/cockpit.py: the room's workshop progress, reveal, export, delete), mounted in the lecturer's panel.
"""

from __future__ import annotations

import html

import gradio as gr

from playground import polls
from playground.analysis import exercises as ex
from playground.figures import quiz as fq
from playground.ui import patches
from playground.ui.common import Shared, stop_after

INTRO_MD = """**Predict, then reveal.** Pick a question, commit your guess, then check it: the answer is computed by the
same code as the tab it is about, from the models in front of you. **In class:** the lecturer opens a room and
projects its code; students type the code and *Join*: the lecturer's question appears and follows the lecturer. Send
your guess; when the lecturer reveals the answers, everyone sees the histogram beside the true one, and the question
takes no more answers (the histogram is final). In a room, *Check my guess* waits for the reveal too. No login: one
answer per browser per question (a new one replaces it until the reveal); rooms close after 3 hours."""

LECTURER_MD = """Open a room and project its code. The room asks the question above; pick another and the students'
pages follow within seconds. The count of answers updates live; the histogram stays hidden until you reveal it (so
nobody follows the crowd), and revealing closes the question to answers."""

NO_ROOM = "Join a room first: type the code on the lecturer's screen (or open one, below, if you teach)."
CHOICES = [(f"{e.tab}: {e.question}", e.id) for e in ex.EXERCISES]
TICK_SECONDS = 2.0   # how stale a page in a room may be: the lecturer's count, a student's question and histogram


def _refuse(message: str) -> gr.Error:
    """A refusal as Gradio shows it; the page renders its text as HTML, and it may quote what the user typed."""
    return gr.Error(html.escape(message, quote=False))


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
        raise _refuse(f"Unknown exercise {exercise_id[:40]!r}; choose from {', '.join(ex.BY_ID)}.")
    return ex.BY_ID[exercise_id]


def _answer(exercise: ex.Exercise, value) -> str:
    try:
        given = ex.normalise(exercise, _text(value, "The answer"))
    except ValueError as err:
        raise _refuse(str(err)) from None
    if not given:
        raise gr.Error("Your answer is empty: type a number or pick a choice first.")
    return given


def _room(call, *args):
    """polls.`call`(*args), its refusal (a wrong code, a closed room, ...) as the page's error message."""
    try:
        return call(*args)
    except polls.PollError as err:
        raise _refuse(str(err)) from None


def _seat(seat) -> dict:
    """This page's place in the quiz: {"room", "key" (the lecturer's page only), "question" (the room's, as this
    page shows it), "shown" (what its tally shows)}. Anything else (a new page, an API caller) is in no room."""
    return dict(seat) if isinstance(seat, dict) else {}


def _shown(code: str) -> str:
    return f"{code[:3]} {code[3:]}"   # as projected: two groups of three are read aloud more easily


def hidden(seat, exercise_id: str) -> str | None:
    """Why a page in a room may not check a question yet, or None: in a room a question's answer stays hidden until
    the lecturer reveals it there (a check would give it away, and the student would send it: predict-then-reveal
    defeated). Outside a room, or once revealed, a check answers at once. A room that has closed or gone refuses."""
    seat = _seat(seat)
    if not seat.get("room") or _room(polls.tally, seat["room"], exercise_id, seat.get("key", ""))["final"]:
        return None
    return (f"🔒 In room {_shown(seat['room'])} the answer stays hidden until the lecturer reveals it: send your "
            "guess to the room now (the Class quiz tab's *Send to the room*), and check it after the reveal.")


def exercise(exercise_id="", answer="", seat=None):
    """Without an exercise: the list of exercises. With one and no answer: the question (the answer stays hidden until
    a guess is committed). With one and an answer: whether it is right, the answer and why; in a room (`seat`, this
    page's or this API session's) not before the lecturer reveals it (`hidden`)."""
    if not exercise_id:
        return "", {"exercises": ex.listing()}
    e = _exercise(exercise_id)
    question = next(q for q in ex.listing() if q["id"] == e.id)
    if not _text(answer, "The answer").strip():
        return f"**{e.question}** Commit a guess, then check it: the answer stays hidden until then.", question
    given = _answer(e, answer)
    why_not = hidden(seat, e.id)
    if why_not:
        return why_not, {**question, "hidden": why_not}
    result = ex.check(e.id, given)
    verdict = "✓ Right" if result["correct"] else "✗ Not quite"
    answer = str(result["answer"])
    return (f"**{verdict}.** You said **{result['given']}**; the answer is **{answer}**{stop_after(answer)} "
            f"{result['why']}"), result


def _revealed_view(data: dict, e: ex.Exercise):
    """A tally the caller may see: the answer, why, and the histogram beside it."""
    truth, why = ex.solution(e.id)
    data = {**data, "answer": truth, "why": why}
    closed = " No more answers are taken: this histogram is final." if data.get("final") else ""
    return (f"**The answer: {truth}.** {why} ({data['answers']} answer(s) in room {data['room']}.{closed})",
            fq.tally_figure(data["counts"], truth, e.question), data)


def poll_open(seat=None):
    """Open a room: its code for the students; its key stays in this page's session (it reveals the answers and moves
    the room from question to question). `data` has the key for an API caller, who must keep it."""
    code, key = _room(polls.open_room)
    html_ = (f'<div class="quiz-room">Room <b>{_shown(code)}</b><br>'
             '<small>students: Class quiz tab → room code → Join</small></div>')
    return html_, code, {"room": code, "key": key, "question": "", "shown": None}, {"room": code, "key": key}


def poll_join(room="", seat=None):
    """Join a room with its code: the room's current question (which the page then follows), how long it stays open."""
    room, seat = _text(room, "The room code"), _seat(seat)
    if not room.strip():
        return NO_ROOM, gr.skip(), seat, {"room": None, "question": None}
    state = _room(polls.status, room)
    key = seat.get("key", "") if seat.get("room") == state["room"] else ""   # the lecturer's own page keeps its key
    question = state["question"] if state["question"] in ex.BY_ID else ""
    seat = {"room": state["room"], "key": key, "question": question, "shown": None}
    if not question:
        return (f"Joined room {_shown(state['room'])}: the lecturer has not chosen a question yet.", gr.skip(), seat,
                state)
    follow = gr.skip() if key else gr.update(value=question, interactive=False)   # the lecturer picks it freely
    return (f"Joined room {_shown(state['room'])}: answer the lecturer's question above, then *Send to the room*.",
            follow, seat, state)


def _refused(room):
    """After a room's event was refused: what is wrong with the room (a mistyped code, a room closed or deleted),
    said where the student looks and kept there once the toast fades (the event's outputs would otherwise hold
    Gradio's bare "Error"); nothing when the room is fine (the refusal was about the answer: its toast says so)."""
    try:
        polls.status(_text(room, "The room code"))
    except polls.PollError as err:
        return f"⚠ {html.escape(str(err), quote=False)}"
    except gr.Error:
        pass
    return gr.skip()


def poll_answer(room="", exercise_id="", answer="", seat=None, request: gr.Request = None):
    """Send this browser's guess to a room (answering again replaces it, until the answers are revealed).
    `seat` is not used: reading it keeps the event out of the shared answer cache (the module's docstring)."""
    e = _exercise(exercise_id)
    room = _text(room, "The room code")
    if not room.strip():
        return NO_ROOM, {"room": None, "answers": None}
    given = _answer(e, answer)
    session = getattr(request, "session_hash", None) or ""
    n = _room(polls.answer, room, e.id, session, given)
    return f"Sent **{given}** to room {polls.normalise_code(room)}: {n} answer(s) so far.", {"room": room, "answers": n}


def poll_tally(room="", exercise_id="", key="", reveal=False, seat=None):
    """A room's answers to a question: only their number until its lecturer reveals them. Revealing needs the room's
    key: an API caller sends it, the lecturer's page holds it in `seat`. Once revealed the question takes no more
    answers (polls.answer), so the histogram everyone sees stays the one they answered."""
    e = _exercise(exercise_id)
    room, key, seat = _text(room, "The room code"), _text(key, "The key"), _seat(seat)
    if not room.strip():
        return NO_ROOM, None, {"room": None, "answers": None}
    reveal = reveal is True or reveal in ("true", "True", 1)
    if reveal and not key and seat.get("room") == _room(polls.normalise_code, room):
        key = seat.get("key", "")      # only to reveal: the lecturer's own "show" must not show the answer early
    data = _room(polls.tally, room, e.id, key, reveal)
    if not data["revealed"]:
        return (f"{data['answers']} answer(s) in room {data['room']}; the lecturer has not revealed them yet.", None,
                data)
    return _revealed_view(data, e)


def poll_question(room: str = "", exercise_id: str = "", key: str = "") -> dict:
    """Move a room to a question (the room's key): the pages of the students in it follow within TICK_SECONDS.
    API only (the lecturer's page moves its room when the lecturer picks a question)."""
    room = _text(room, "The room code")
    if not room.strip():
        return {"room": None, "question": None, "message": NO_ROOM}
    e = _exercise(exercise_id)
    return _room(polls.set_question, room, _text(key, "The key"), e.id)


def _count_view(state: dict, lecturer: bool):
    """What a page in a room shows while its question is open: how many answered, and never the histogram (on the
    lecturer's projected page it would sway the rest of the class)."""
    if state["question"] not in ex.BY_ID:
        return f"Room {_shown(state['room'])}: the lecturer has not chosen a question yet.", None
    then = ("Reveal when ready: the histogram stays hidden until then, and the question takes no more answers after."
            if lecturer else "the lecturer has not revealed them yet.")
    return f"**{state['answers']}** answer(s) in room {_shown(state['room'])} so far (live); {then}", None


def _lead(exercise_id, seat):
    """The lecturer's page moves its room to the question it shows (right after opening the room, and whenever the
    lecturer picks another) and starts its live count. A page without the room's key changes nothing."""
    seat = _seat(seat)
    if not seat.get("key"):
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    e = _exercise(exercise_id)
    state = _room(polls.set_question, seat["room"], seat["key"], e.id)
    md, plot = (_revealed_view(polls.tally(seat["room"], e.id, seat["key"]), e)[:2] if state["final"]
                else _count_view(state, lecturer=True))
    return md, plot, {**seat, "question": e.id, "shown": None}, gr.Timer(active=True)


def _tick(seat):
    """Every TICK_SECONDS on a page in a room: what changed there, and gr.skip() for what did not (no figure is sent
    again). A student's page follows the room's question; a closed room says so and stops the timer. Never raises:
    nobody clicked anything."""
    seat, same = _seat(seat), gr.skip()
    if not seat.get("room"):
        return same, same, same, same, gr.Timer(active=False)
    lecturer = bool(seat.get("key"))
    try:
        state = polls.status(seat["room"])
        if not lecturer and state["question"] in ex.BY_ID and state["question"] != seat.get("question"):
            # the lecturer moved on: this page follows, and the question's change clears the last question's results
            return (gr.update(value=state["question"], interactive=False), same, same,
                    {**seat, "question": state["question"], "shown": None}, same)
        shown = [state["question"], state["answers"], state["final"]]
        if shown == seat.get("shown"):
            return same, same, same, same, same
        if state["final"]:
            e = ex.BY_ID[state["question"]]
            md, plot, _ = _revealed_view(polls.tally(seat["room"], e.id, seat.get("key", "")), e)
        else:
            md, plot = _count_view(state, lecturer)
    except polls.PollError as err:                   # the room closed (3 hours) while the page was open
        return gr.update(interactive=True), f"⚠ {err}", None, {}, gr.Timer(active=False)
    return same, md, plot, {**seat, "shown": shown}, same


def _question_changed(exercise_id):
    """Another question: its answer box, and the last question's results cleared (a histogram beside a question it
    does not answer would be read as that question's)."""
    e = ex.BY_ID.get(exercise_id, ex.EXERCISES[0])
    return (gr.update(visible=e.kind == "choice", choices=list(e.choices), value=None),
            gr.update(visible=e.kind == "number", value=""), "", "", None)


def _hint(exercise_id):
    e = ex.BY_ID.get(exercise_id, ex.EXERCISES[0])
    what = f"one of: {', '.join(e.choices)}" if e.kind == "choice" else "a whole number, or 'never'"
    return {"label": f"Your guess ({what}): commit it, then check", "value": ""}


def panel(tab: str, seat: gr.State) -> None:
    """This tab's questions, at its foot: guess, then check (the same answers as the Class quiz tab, and the same
    rule in a room: `seat`, the page's place in the quiz)."""
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
    check.click(lambda i, g, s: exercise(i, g, s)[0], [question, guess, seat], verdict, api_visibility="private")


def build(demo: gr.Blocks, shared: Shared) -> None:
    gr.Markdown(INTRO_MD)
    first = ex.EXERCISES[0]
    seat = shared.seat                                      # this page's place in the quiz (_seat)
    patches.keep_sessions_holding(seat)                     # never the first dropped from a full session store
    timer = gr.Timer(TICK_SECONDS, active=False)            # runs while this page is in a room
    question = gr.Dropdown(CHOICES, value=first.id, label="Question", elem_id="quiz-question")
    with gr.Row():
        choice = gr.Radio(list(first.choices), label="Your guess", visible=first.kind == "choice",
                          elem_id="quiz-choice")
        number = gr.Textbox("", label="Your guess (a number, or 'never')", visible=first.kind == "number",
                            elem_id="quiz-number")
    guess = gr.Textbox(visible=False)                       # the committed guess, whichever box it came from
    with gr.Row():
        room = gr.Textbox("", label="Room code", placeholder="from the lecturer's screen, then Join",
                          elem_id="quiz-room",
                          scale=2)
        join = gr.Button("Join", elem_id="quiz-join", scale=1)
    if shared.follow is not None:                           # follow-me (ui/follow.py) wires it with the page
        shared.follow.controls(seat, "student")
    status = gr.Markdown(elem_id="quiz-status")             # which room this page is in
    with gr.Row():
        check = gr.Button("Check my guess", variant="primary", elem_id="quiz-check")
        send = gr.Button("Send to the room", elem_id="quiz-send", interactive=False)   # once in a room
        show = gr.Button("Show the class's answers", elem_id="quiz-show")
    verdict = gr.Markdown(elem_id="quiz-verdict")           # the last guess's: checked, or sent
    with gr.Accordion("Lecturer: open a room and reveal", open=False, elem_id="quiz-lecturer"):
        gr.Markdown(LECTURER_MD)
        opened = gr.HTML(elem_id="quiz-opened")
        with gr.Row():
            open_room = gr.Button("Open a room", elem_id="quiz-open")
            reveal = gr.Button("Reveal the answers to the class", variant="primary", elem_id="quiz-reveal")
        reveal_flag = gr.Checkbox(True, visible=False)
        if shared.follow is not None:
            shared.follow.controls(seat, "lecturer")
        if shared.cockpit is not None:                      # the room's workshop progress (ui/cockpit.build)
            shared.cockpit(seat)
    tally_md = gr.Markdown(elem_id="quiz-tally")
    tally_plot = gr.Plot(label="The class's answers", elem_id="quiz-plot")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        data = gr.JSON(label="quiz")

    question.change(_question_changed, question, [choice, number, verdict, tally_md, tally_plot], queue=False,
                    api_visibility="private", show_progress="hidden")
    pick = dict(fn=lambda c, n: c if c is not None else n, inputs=[choice, number], outputs=guess, queue=False,
                api_visibility="private")
    check.click(**pick).then(exercise, [question, guess, seat], [verdict, data], api_name="exercise")

    # The room's events: queued and reading `seat` (the module's docstring says why)
    seated = dict(fn=lambda s: (gr.Timer(active=bool(_seat(s).get("room"))),
                                gr.update(interactive=bool(_seat(s).get("room")))),
                  inputs=seat, outputs=[timer, send], queue=False, api_visibility="private")
    # a refusal marks only the line that says why (show_progress_on), never the question: Gradio's "Error" pill stays
    # on every output it marked until another answer replaces it, and a wrong room is said there (_refused)
    said = dict(fn=_refused, inputs=room, queue=False, api_visibility="private", show_progress="hidden")
    joined = gr.on([join.click, room.submit], poll_join, [room, seat], [status, question, seat, data],
                   api_name="poll_join", show_progress_on=status)
    joined.success(**seated)
    joined.failure(**said, outputs=status)
    sent = send.click(**pick).then(poll_answer, [room, question, guess, seat], [verdict, data], api_name="poll_answer",
                                   show_progress_on=verdict)
    sent.failure(**said, outputs=verdict)
    no_key, no_reveal = gr.Textbox("", visible=False), gr.Checkbox(False, visible=False)  # API callers set them
    shown = show.click(poll_tally, [room, question, no_key, no_reveal, seat], [tally_md, tally_plot, data],
                       api_name="poll_tally", show_progress_on=tally_md)
    shown.failure(**said, outputs=tally_md)
    lead = dict(fn=_lead, inputs=[question, seat], outputs=[tally_md, tally_plot, seat, timer],
                api_visibility="private")
    open_room.click(poll_open, seat, [opened, room, seat, data], api_name="poll_open").success(**lead)
    question.input(**lead)                                  # the lecturer picks another question: the room follows
    reveal.click(poll_tally, [room, question, no_key, reveal_flag, seat], [tally_md, tally_plot, data],
                 api_visibility="private", show_progress_on=tally_md).failure(**said, outputs=tally_md)
    timer.tick(_tick, seat, [question, tally_md, tally_plot, seat, timer], queue=False, api_visibility="private",
               show_progress="hidden")
    gr.api(poll_question, api_name="poll_question", queue=False)   # API callers move a room (no button: see _lead)
