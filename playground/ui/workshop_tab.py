"""Workshops on the page: a student picks a workshop (a shipped one, or a file imported here) and walks it step by step.

The panel sits above the tabs, beside the guided tour (ui/demo.py lays it out there and wires it after the tabs):
each step opens a view in some tab, so the step, its question and *Next* must stay on screen whichever tab is open.

A workshop (analysis/workshops.py, docs/workshops.md) is a list of steps, each a view of the app with text, hints and
a question. *Next* and *Previous* apply the step's view with the code that applies a link (view.parse): the tab and
sub-tab, the sentence and every control the view names, then `restored` changes so the tabs redraw, as after a link.
The question sits under the step; *Check* says right or wrong with the answer and why (a tool question's answer is
computed now, on the student's own input where it takes one) and never blocks going on; *Hint* shows the step's hints
one by one. The walk is per page (gr.State). Everything a file says is escaped before it is shown.

Endpoints: `workshop_list` (the shipped workshops), `workshop_load` (a file's text: the validated workshop, or the
messages naming each line and field) and `workshop_check` (a verdict; docs/api.md).
"""

from __future__ import annotations

import html
import threading
from functools import lru_cache
from pathlib import Path

import gradio as gr

from playground.analysis import exercises
from playground.analysis import workshops as w
from playground.rooms import progress
from playground.ui import quiz_tab, view, workshop_form, workshop_room
from playground.ui.common import Shared, full_stop, stop_after

INTRO_MD = """**Workshops.** A lecturer's path through the tabs: each step opens a view of the app, says what to look at
and asks a question you answer by using that view. *Check* tells you whether you are right (and why); it never stops
you going on. Pick a shipped workshop, or import one a lecturer wrote (YAML or JSON: the format is in
docs/workshops.md)."""

START = "Pick a workshop (or import a file) to start."
_shared: Shared | None = None            # the page's Shared, once built: the views are checked and applied with it


def _escape(text: str) -> str:
    """A file's text as Markdown shows it: no HTML tag survives, and `*`, `_` stay the author's emphasis."""
    return html.escape(str(text), quote=False)


def _check_view(params: dict) -> list[str]:
    return view.problems(_shared, params) if _shared is not None else []


def _shipped() -> list[tuple[str, str]]:
    """(title, id) of every shipped workshop, read without computing its answers."""
    found = []
    for path in w.shipped_files():
        try:
            found.append((shipped(path.stem).title, path.stem))
        except (KeyError, w.WorkshopError):   # a broken shipped file is a test failure, never a crash of the page
            continue
    return found


def shipped(name: str) -> w.Workshop:
    """A shipped workshop, its views checked: read once per version of its file (about 80 ms each to read)."""
    path = next((p for p in w.shipped_files() if p.stem == name), None)
    if path is None:
        raise KeyError(name)
    return _read_shipped(name, path.stat().st_mtime_ns, _shared is not None)


@lru_cache(maxsize=64)
def _read_shipped(name: str, _version: int, _with_views: bool) -> w.Workshop:
    return w.load_shipped(name, _check_view)


def _load_text(text: str, name: str) -> w.Workshop:
    """A workshop file, validated with the app's link parser and its tool answers computed: a gr.Error with every
    message (escaped) when it does not load."""
    try:
        return w.load(text, name, _check_view, compute=True)
    except w.WorkshopError as err:
        raise gr.Error(_messages(err.messages)) from None


def _messages(messages: list[str]) -> str:
    shown = "; ".join(html.escape(m, quote=False) for m in messages[:8])
    more = f" (and {len(messages) - 8} more)" if len(messages) > 8 else ""
    return f"This workshop does not load: {shown}{more}"


def _find(workshop) -> w.Workshop:
    """A workshop by a shipped id, or a whole file's text (an API caller's own workshop)."""
    if not isinstance(workshop, str) or not workshop.strip():
        raise gr.Error("Name a workshop: one of the ids `workshop_list` gives, or a workshop file's text.")
    if "\n" in workshop or workshop.lstrip().startswith("{"):
        return _load_text(workshop, "workshop.json" if workshop.lstrip().startswith("{") else "workshop.yaml")
    try:
        return shipped(workshop.strip())       # its answers compute: tests/test_workshop_tab.py
    except KeyError:
        known = ", ".join(i for _, i in _shipped())
        raise gr.Error(f"Unknown workshop {html.escape(workshop[:40])!r}; the workshops are {known}.") from None
    except w.WorkshopError as err:
        raise gr.Error(_messages(err.messages)) from None


def workshop_text(workshop) -> tuple[str, w.Workshop]:
    """A shipped id or a file's text as the text a room keeps (the shipped file's own), with the workshop it loads
    as (validated: views checked, tool answers computed); a gr.Error saying why not."""
    found = _find(workshop)
    if "\n" in workshop or workshop.lstrip().startswith("{"):
        return workshop, found
    return next(p for p in w.shipped_files() if p.stem == workshop.strip()).read_text(encoding="utf-8"), found


_room_lock = threading.Lock()


def _room_workshop(text: str) -> w.Workshop:
    """A room's workshop, read once per text on this copy of the app (its tools' answers computed then): the class
    joining at once waits for the first student's reading instead of each computing it."""
    with _room_lock:
        return _read_room_workshop(text)


@lru_cache(maxsize=16)
def _read_room_workshop(text: str) -> w.Workshop:
    return _load_text(text, "room.json" if text.lstrip().startswith("{") else "room.yaml")


def room_workshop(member, restored=0):
    """After a student joins a room: the workshop its lecturer gave the room (kept in the class's database, so the
    same on every copy of the app), opened at its first step; nothing changes when the room has none."""
    member = member if isinstance(member, dict) else {}
    unchanged = [gr.skip()] * (len(_shared.view) + 11)
    try:
        text = progress.workshop_of(member["room"]) if member.get("room") else ""
        return show(_room_workshop(text), 0, restored) if text else unchanged
    except progress.RoomError as err:
        gr.Warning(html.escape(str(err), quote=False))
    except gr.Error as err:                     # a workshop this copy of the app cannot load (an older version)
        gr.Warning(str(err))
    return unchanged


# The endpoints


def workshop_list() -> dict:
    """The shipped workshops: id, title, what it is about, its number of steps and questions."""
    items = []
    for title, wid in _shipped():
        data = w.as_json(shipped(wid))
        items.append({"id": wid, "title": title, "about": data["about"], "n_steps": data["n_steps"],
                      "n_questions": sum(s["question"] is not None for s in data["steps"])})
    return {"workshops": items}


def workshop_load(text: str = "") -> dict:
    """A workshop file's text (YAML or JSON): the validated workshop (its steps, views and questions, never a fixed
    answer), or `ok: false` and the messages, each naming its line and field."""
    if not isinstance(text, str):
        raise gr.Error("The workshop should be a file's text (YAML or JSON).")
    try:
        workshop = w.load(text, "workshop.json" if text.lstrip().startswith("{") else "workshop.yaml",
                          _check_view, compute=True)
    except w.WorkshopError as err:
        return {"ok": False, "messages": err.messages}
    return {"ok": True, "workshop": w.as_json(workshop)}


def _step_of(workshop: w.Workshop, step) -> tuple[int, w.Step]:
    try:
        i = int(float(step))
    except (TypeError, ValueError, OverflowError):
        raise gr.Error(f"The step should be a number from 1 to {len(workshop.steps)}.") from None
    if not 1 <= i <= len(workshop.steps):
        raise gr.Error(f"{workshop.title[:60]} has steps 1 to {len(workshop.steps)}, not {i}.")
    return i, workshop.steps[i - 1]


def workshop_check(workshop: str = "quiz", step: float = 1, answer: str = "", student_input: str = "") -> dict:
    """A verdict on `answer` to a step's question (steps count from 1): `correct`, the `answer` and `why` (a tool
    question's computed now, on `student_input` where it takes one). `workshop` is a shipped id or a file's text.
    Without an answer: the step and its question, never its answer (a guess comes first)."""
    found = _find(workshop)
    i, s = _step_of(found, step)
    if s.question is None:
        raise gr.Error(f"Step {i} of {found.title[:60]} asks no question.")
    if isinstance(answer, str) and not answer.strip() or answer is None:
        step_json = w.as_json(found)["steps"][i - 1]
        return {"workshop": found.id, "step": i, "prompt": s.question.prompt, "answered": False, **step_json}
    try:
        verdict = w.grade(s.question, answer, student_input)
    except ValueError as err:
        raise gr.Error(html.escape(str(err), quote=False)) from None
    return {"workshop": found.id, "step": i, "prompt": s.question.prompt, "answered": True, **verdict}


# The page


def _question_updates(q: w.Question | None):
    """The answer boxes for a question: choices as a radio, a number or a text as a box, the student's own input
    where a tool reads it."""
    if q is None:
        return gr.update(visible=False, value=None), gr.update(visible=False, value=""), \
            gr.update(visible=False, value="")
    return (gr.update(visible=q.kind == "choice", choices=list(q.choices), value=None),
            gr.update(visible=q.kind != "choice", value="",
                      label="Your answer" + (f" (a number, or {', '.join(q.words)})" if q.words else
                                             " (a number)" if q.kind == "number" else "")),
            gr.update(visible=bool(q.input), value="", label=q.input or "Your input"))


def _step_md(workshop: w.Workshop, i: int) -> str:
    s = workshop.steps[i]
    head = full_stop(f"Step {i + 1} of {len(workshop.steps)}" + (f": {_escape(s.title)}" if s.title else ""))
    ask = f"\n\n**Question.** {_escape(s.question.prompt)}" if s.question else ""
    return f"### {_escape(workshop.title)}\n**{head}** {_escape(s.text)}{ask}"


def show(workshop: w.Workshop, i: int, restored) -> list:
    """Step i: its view applied (view.parse, as a link), the step's text and question, the last verdict and hints
    cleared. Notices of a view that no longer fits the app are shown, never raised."""
    s = workshop.steps[i]
    params = w.parse_view(s.view)
    found = view.parse(_shared, params) if params else None
    values = found.values if found else [gr.skip()] * len(_shared.view)
    values = [gr.skip() if key in view.AFTER_THE_REST else value for key, value in zip(_shared.view, values)]
    for notice in (found.notices if found else [])[:3]:
        gr.Warning(html.escape(notice, quote=False))
    bump = gr.update(value=(restored or 0) + 1) if found else gr.skip()
    tab = params.get("tab", "") if found and "tab" not in found.dropped else ""
    return [*values, found.selected if found else gr.skip(), bump, tab,
            {"workshop": workshop, "step": i, "hints": 0}, _step_md(workshop, i), *_question_updates(s.question),
            "", "", {"workshop": workshop.id, "step": i + 1, "of": len(workshop.steps), "view": s.view}]


def _walk(state) -> tuple[w.Workshop | None, int]:
    state = state if isinstance(state, dict) else {}
    return state.get("workshop"), int(state.get("step", 0))


def layout() -> dict:
    """The workshop panel, above the tabs beside the guided tour: a step's view opens another tab, so the step, its
    question and Next must stay on screen whichever tab is open. `wire` connects it once the tabs exist."""
    with gr.Accordion("Workshops: a lecturer's path through the tabs, step by step", open=False, elem_id="workshop"):
        gr.Markdown(INTRO_MD)
        with gr.Row():
            pick = gr.Dropdown(_shipped(), value=None, label="Workshop", elem_id="workshop-pick", scale=2)
            upload = gr.File(label="Or import a workshop file (YAML or JSON)", file_types=[".yaml", ".yml", ".json"],
                             type="filepath", elem_id="workshop-file", scale=1)
        room = workshop_room.layout()        # in class: the room's code and a nickname (the lecturer's cockpit)
        step_md = gr.Markdown(START, elem_id="workshop-step")
        with gr.Row():
            choice = gr.Radio([], label="Your answer", visible=False, elem_id="workshop-choice")
            answer = gr.Textbox("", label="Your answer", visible=False, elem_id="workshop-answer")
            own = gr.Textbox("", label="Your input", visible=False, elem_id="workshop-input")
        with gr.Row():
            previous = gr.Button("← Previous", size="sm", elem_id="workshop-prev")
            check = gr.Button("Check", variant="primary", size="sm", elem_id="workshop-check")
            hint = gr.Button("Hint", size="sm", elem_id="workshop-hint")
            following = gr.Button("Next →", size="sm", variant="primary", elem_id="workshop-next")
        verdict = gr.Markdown(elem_id="workshop-verdict")
        hints = gr.Markdown(elem_id="workshop-hints")
        room["shown"] = gr.Markdown(elem_id="workshop-revealed")    # a step's answer, once the lecturer reveals it
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            data = gr.JSON(label="workshop")
        tab_path = gr.Textbox("", visible="hidden", elem_id="workshop-tab")   # mounted: the page opens its sub-tab
        form = workshop_form.layout()
    return dict(form=form, pick=pick, upload=upload, previous=previous, following=following, check=check, hint=hint,
                choice=choice, answer=answer, own=own, verdict=verdict, hints=hints, data=data, step_md=step_md,
                tab_path=tab_path, walk=gr.State({}), room=room)


def wire(demo: gr.Blocks, shared: Shared, parts: dict) -> None:
    """The panel's events, once every tab has registered its view's controls, and the three endpoints."""
    global _shared
    _shared = shared
    c = {**parts, "restored": shared.restored}
    outputs = [*shared.view.values(), shared.tabs, shared.restored, c["tab_path"], c["walk"], c["step_md"],
               c["choice"], c["answer"], c["own"], c["verdict"], c["hints"], c["data"]]
    later = [(key, shared.view[key]) for key in view.AFTER_THE_REST if key in shared.view]
    form = {**c["form"], "restored": shared.restored}
    walked = workshop_form.wire(form, outputs, walk_draft, _check_view)
    _wire(demo, c, outputs, later, [walked])


def pick_workshop(workshop_id, restored=0):
    """A shipped workshop chosen in the list: its first step."""
    if not workshop_id:
        return [gr.skip()] * (len(_shared.view) + 11)
    return show(_find(str(workshop_id)), 0, restored)


def read_upload(path) -> str:
    """An uploaded workshop file's text (UTF-8, at most w.MAX_FILE characters and one more, so that an overlong file
    is told as such); a gr.Error when it is not text."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(w.MAX_FILE + 1)
    except (OSError, UnicodeDecodeError):
        raise gr.Error("The file could not be read as UTF-8 text: a workshop is a YAML or JSON text file.") from None


def import_file(path, restored=0):
    """A workshop file imported on the page: read (UTF-8, at most w.MAX_FILE characters), validated, its first step."""
    if not path:
        return [gr.skip()] * (len(_shared.view) + 11)
    return show(_load_text(read_upload(path), Path(str(path)).name), 0, restored)


def walk_draft(draft, restored=0):
    """The lecturer's draft (ui/workshop_form.py) opened in the panel, as an imported file is."""
    return show(_load_text(str(draft or ""), "draft.yaml"), 0, restored)


def go(state, delta: int, restored=0):
    """Next (+1) or Previous (-1): the step's view applied and its question shown. At either end, nothing moves."""
    workshop, i = _walk(state)
    if workshop is None:
        raise gr.Error(START)
    j = min(max(i + delta, 0), len(workshop.steps) - 1)
    if j == i:
        gr.Info("This is the last step." if delta > 0 else "This is the first step.")
        return [gr.skip()] * (len(_shared.view) + 11)
    return show(workshop, j, restored)


def check_answer(state, choice, answer, own, seat=None):
    """Check: the verdict, the answer and why. A refused answer (too long, not a number) is said, not raised, so the
    student can go on. The class quiz's own workshop keeps the quiz's rule (`seat`: the page's place in the quiz):
    in a quiz room, no answer before the lecturer reveals it there."""
    workshop, i = _walk(state)
    if workshop is None:
        return START, gr.skip()
    q = workshop.steps[i].question
    if q is None:
        return "This step asks no question: read it, then *Next*.", gr.skip()
    if workshop.id == exercises.QUIZ and q.id in exercises.BY_ID and (why_not := quiz_tab.hidden(seat, q.id)):
        return why_not, {"workshop": workshop.id, "step": i + 1, "hidden": why_not}   # no verdict to record
    given = choice if q.kind == "choice" else answer
    try:
        verdict = w.grade(q, given, own)
    except ValueError as err:
        return f"⚠ {_escape(err)}", gr.skip()
    mark = "✓ Right" if verdict["correct"] else "✗ Not quite"
    computed = " (computed now by the app)" if verdict["computed"] else ""
    why = f" {_escape(verdict['why'])}" if verdict["why"] else ""
    answer = _escape(verdict["answer"])
    return (f"**{mark}.** You said **{_escape(verdict['given'])}**; the answer{computed} is "
            f"**{answer}**{stop_after(answer)}{why}", {"workshop": workshop.id, "step": i + 1, **verdict})


def next_hint(state):
    """The step's hints, one more each time."""
    workshop, i = _walk(state)
    if workshop is None:
        return START, gr.skip()
    shown = min(int(state.get("hints", 0)) + 1, len(workshop.steps[i].hints))
    if not workshop.steps[i].hints:
        return "This step has no hint.", gr.skip()
    lines = "\n".join(f"- {_escape(h)}" for h in workshop.steps[i].hints[:shown])
    more = "" if shown == len(workshop.steps[i].hints) else f"\n\n({len(workshop.steps[i].hints) - shown} more)"
    return f"**Hint{'s' if shown > 1 else ''}:**\n{lines}{more}", {**state, "hints": shown}


def _focus(state):
    """The selected word a step's view names (after the rest, as a link's: view.AFTER_THE_REST)."""
    workshop, i = _walk(state)
    params = w.parse_view(workshop.steps[i].view) if workshop is not None else {}
    if "focus" not in params:
        return gr.skip()
    return view.coerce(_shared.view["focus"], params["focus"], [], "focus")


def _wire(demo: gr.Blocks, c: dict, outputs: list, later: list, more: list) -> None:
    hidden = dict(api_visibility="private")
    joined = workshop_room.wire_join(c["room"], c["walk"], c["own"])
    opened = [*more, joined.success(room_workshop, [c["room"]["member"], c["restored"]], outputs, **hidden),
        c["pick"].input(pick_workshop, [c["pick"], c["restored"]], outputs, **hidden),
        c["upload"].upload(import_file, [c["upload"], c["restored"]], outputs, **hidden),
        c["following"].click(lambda s, r: go(s, +1, r), [c["walk"], c["restored"]], outputs, **hidden),
        c["previous"].click(lambda s, r: go(s, -1, r), [c["walk"], c["restored"]], outputs, **hidden),
    ]
    for event in opened:
        if later:
            event = event.success(_focus, c["walk"], [component for _, component in later], **hidden)
        event.then(None, inputs=c["tab_path"],   # its sub-tab opened; in lecture mode, the view under the step
                   js="(t) => { window.playgroundView.open(t); window.playgroundView.walk('#workshop-step'); }")
    checked = c["check"].click(check_answer, [c["walk"], c["choice"], c["answer"], c["own"], _shared.seat],
                               [c["verdict"], c["data"]], **hidden)
    hinted = c["hint"].click(next_hint, c["walk"], [c["hints"], c["walk"]], **hidden)
    workshop_room.wire(c["room"], c["walk"], c["own"], c["data"], opened, checked, hinted)   # in a room: recorded
    gr.api(workshop_list, api_name="workshop_list", queue=False)
    gr.api(workshop_load, api_name="workshop_load")
    gr.api(workshop_check, api_name="workshop_check")
