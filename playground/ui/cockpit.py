"""The lecturer's cockpit (issue #37): the class's workshop progress, live, in the Class quiz tab's lecturer panel.

The lecturer's page holds the room's key (the quiz tab's `seat`). While "Show live" is ticked, a gr.Timer asks the
room every TICK_SECONDS for playground/rooms/progress.cockpit's data: who joined and where each is, the funnel per
step (reached / answered / answered right) as a figure and as a table (its text alternative), each question's answer
distribution, who asked for hints. A tick whose data did not change sends nothing back. From the same panel the
lecturer reveals a step's answer (the students' pages show it: ui/workshop_room.py), downloads the results (CSV per
student and per question, JSON), and deletes every row the room holds.

Everything a student typed (a nickname, an answer) is escaped before it is shown. The page's events are not queued
and never raise: a refusal (a closed room, a page without the key) is said in the panel's status line. The four
endpoints (`cockpit`, `cockpit_export`, `cockpit_reveal`, `cockpit_delete`; docs/api.md) take the room and its key and
refuse without the key; they are not queued either, so their answers are never shared from the answer cache (ui/cache:
a queued event that reads no gr.State is), which would serve one class's progress as another moment's.
"""

from __future__ import annotations

import html
import json
import shutil
import tempfile
from pathlib import Path

import gradio as gr
from gradio import utils as gr_utils

from playground.figures import cockpit as fc
from playground.rooms import progress
from playground.ui import common, quiz_tab, workshop_tab

TICK_SECONDS = 1.0     # the cockpit is at most this (and one read of the room) behind the class: p95 <= 2 s
NO_KEY = "Open a room first (above): the cockpit shows the room this page opened."
INTRO_MD = """**Cockpit.** The students of your room who walk a workshop (the *Workshops* panel above the tabs: room
code, a nickname, *Join*) appear here: where each is, how many reached, answered and answered right each step, every
question's answers and who asked for a hint. Tick *Show live* to follow them (updated every second while ticked)."""


def _cell(value) -> str:
    """A value as a Markdown table cell: escaped (no HTML survives), its pipes and line breaks kept out."""
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list]) -> str:
    if not rows:
        return ""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def views(data: dict) -> tuple[str, str, str, object]:
    """The cockpit's data as the panel shows it: a summary, the students' table, the funnel's table (the figure's
    text alternative, with each question's answers and hints) and the funnel's figure (of the busiest workshop)."""
    n = data["joined"]
    summary = (f"**{n}** student{'s' if n != 1 else ''} joined room {quiz_tab._shown(data['room'])} "
               f"(closes in {data['closes_in_s'] // 60} min).")
    if not n:
        return summary + " Nobody has joined yet.", "", "", None
    students = _table(["Nickname", "Workshop", "Step", "Answered", "Right", "Hints asked"],
                      [[s["nickname"], s["workshop"] or "—", s["step"] or "—", s["answered"], s["correct"],
                        s["hints"]] for s in data["students"]])
    funnel = _table(["Workshop", "Step", "Reached", "Answered", "Right", "Answers (answer: students)", "Hints",
                     "Revealed"],
                    [[w["workshop"], s["step"], s["reached"], s["answered"], s["correct"],
                      "; ".join(f"{v}: {c}" for v, c in s["answers"].items()) or "—",
                      ", ".join(f"{h['nickname']} ({h['hints']})" for h in s["hints"]) or "—",
                      "yes" if s["revealed"] else "no"]
                     for w in data["workshops"] for s in w["steps"]])
    busiest = max(data["workshops"], key=lambda w: sum(s["reached"] for s in w["steps"]), default=None)
    return summary, students, funnel, fc.funnel_figure(busiest) if busiest else None


def _steps(data: dict) -> list[tuple[str, str]]:
    """The steps the lecturer may reveal: those with answers, as (label, "step|workshop")."""
    return [(f"{w['workshop']}: step {s['step']}" + (" (revealed)" if s["revealed"] else ""),
             f"{s['step']}|{w['workshop']}") for w in data["workshops"] for s in w["steps"] if s["answered"]]


def _args(room, key) -> tuple[str, str]:
    room, key = quiz_tab._text(room, "The room code"), quiz_tab._text(key, "The key")
    if not room.strip():
        raise gr.Error(quiz_tab.NO_ROOM)
    return room, key


# The endpoints: the room and its key, for API callers


def cockpit(room: str = "", key: str = "") -> dict:
    """The room's progress for its lecturer (the key): progress.cockpit's JSON."""
    return quiz_tab._room(progress.cockpit, *_args(room, key))


def cockpit_export(room: str = "", key: str = "") -> dict:
    """The room's results for its lecturer: `students_csv` and `questions_csv` (the files' text) and `results`."""
    data = quiz_tab._room(progress.export, *_args(room, key))
    return {"room": data["room"], "students_csv": progress.students_csv(data),
            "questions_csv": progress.questions_csv(data), "results": data}


def cockpit_reveal(room: str = "", key: str = "", workshop: str = "", step: float = 1) -> dict:
    """The lecturer reveals a step's answer to the room: the students' pages show it; it takes no more answers."""
    room, key = _args(room, key)
    return quiz_tab._room(progress.reveal, room, key, quiz_tab._text(workshop, "The workshop"), step)


def cockpit_workshop(room: str = "", key: str = "", workshop: str = "") -> dict:
    """The room's workshop (a shipped id, or a file's text; empty: none), validated, kept with the room: a student
    who joins the room on any copy of the app opens it at its first step."""
    room, key = _args(room, key)
    text, found = workshop_tab.workshop_text(workshop) if str(workshop or "").strip() else ("", None)
    kept = quiz_tab._room(progress.set_workshop, room, key, text)
    return {"room": kept["room"], "workshop": found.id if found else None,
            "title": found.title if found else None, "n_steps": len(found.steps) if found else 0}


def cockpit_delete(room: str = "", key: str = "") -> dict:
    """Every row the room holds (answers, progress, reveals, the room itself), deleted; `rows` counts them."""
    return quiz_tab._room(progress.delete, *_args(room, key))


# The page


def _said(err: Exception) -> str:
    """An error as the lecturer's panel says it (a gr.Error's own message: its str() is the message's repr)."""
    message = err.message if isinstance(err, gr.Error) else str(err)
    return f"⚠ {html.escape(str(message), quote=False)}"


def _lecturer(seat) -> tuple[str, str]:
    seat = quiz_tab._seat(seat)
    return seat.get("room", ""), seat.get("key", "")


def tick(seat, last):
    """Every TICK_SECONDS while live (and once when ticked): the cockpit redrawn, or nothing sent when nothing
    changed but the clock. Never raises: nobody clicked anything."""
    same = gr.skip()
    room, key = _lecturer(seat)
    if not key:
        return NO_KEY, same, same, same, same, same, None, gr.Timer(active=False)
    try:
        data = progress.cockpit(room, key)
    except progress.RoomError as err:                       # the room closed, or its data was deleted
        return _said(err), "", "", None, gr.update(choices=[]), same, None, gr.Timer(active=False)
    moved = {**data, "closes_in_s": None, "students": [{**s, "seen_s_ago": None} for s in data["students"]]}
    if moved == last:
        return same, same, same, same, same, same, same, same
    summary, students, funnel, figure = views(data)
    return summary, students, funnel, figure, gr.update(choices=_steps(data)), data, moved, same


def live(on, seat):
    """The timer runs only while the cockpit is shown live, on the page that holds the room's key."""
    running = bool(on) and bool(_lecturer(seat)[1])
    return gr.Timer(active=running), None    # None: the next tick redraws everything


def reveal(seat, chosen):
    room, key = _lecturer(seat)
    if not key:
        return NO_KEY
    if not chosen or "|" not in str(chosen):
        return "Pick a step to reveal (the steps with answers are listed)."
    step, workshop = str(chosen).split("|", 1)
    try:
        progress.reveal(room, key, workshop, step)
    except progress.RoomError as err:
        return _said(err)
    return (f"Revealed step {html.escape(step)} of {html.escape(workshop)}: the students' pages show its answer, "
            "and it takes no more answers.")


def export(seat):
    """The three downloads: students.csv, questions.csv, results.json (in a folder of their own per export)."""
    room, key = _lecturer(seat)
    if not key:
        return NO_KEY, None
    try:
        data = progress.export(room, key)
    except progress.RoomError as err:
        return _said(err), None
    folder = Path(tempfile.mkdtemp(prefix=f"cockpit-{data['room']}-", dir=common.downloads_dir()))
    files = {"students.csv": progress.students_csv(data), "questions.csv": progress.questions_csv(data),
             "results.json": json.dumps(data, ensure_ascii=False, indent=1)}
    for name, text in files.items():
        (folder / f"room-{data['room']}-{name}").write_text(text, encoding="utf-8")
    return (f"Exported room {data['room']}: {data['joined']} students.",
            [str(folder / f"room-{data['room']}-{name}") for name in files])


def give(seat, workshop_id):
    """The lecturer's page gives its room the workshop picked in the list (None: none)."""
    room, key = _lecturer(seat)
    if not key:
        return NO_KEY
    try:
        text, found = workshop_tab.workshop_text(workshop_id) if workshop_id else ("", None)
        progress.set_workshop(room, key, text)
    except (progress.RoomError, gr.Error) as err:
        return _said(err)
    if found is None:
        return "The room has no workshop now: students who join walk whichever they pick."
    return (f"Room {quiz_tab._shown(room)} walks **{html.escape(found.title)}**: a student who joins opens its first "
            "step, on whichever copy of the app serves them.")


def give_file(seat, path):
    """The lecturer's page gives its room a workshop file of their own (uploaded: YAML or JSON), validated as an
    import is, its tool-computed answers computed now, before the lecture: what does not load is said here, with its
    line and field."""
    if not path:
        return gr.skip()
    room, key = _lecturer(seat)
    if not key:
        return NO_KEY
    try:
        text = workshop_tab.read_upload(path)
        found = workshop_tab._load_text(text, Path(str(path)).name)
        progress.set_workshop(room, key, text)
    except (progress.RoomError, gr.Error) as err:
        return _said(err)
    steps = f"{len(found.steps)} step{'s' * (len(found.steps) != 1)}"
    return (f"Room {quiz_tab._shown(room)} walks your **{html.escape(found.title)}** ({steps}, from "
            f"{html.escape(Path(str(path)).name)}): a student who joins opens its first step, on whichever copy of "
            "the app serves them.")


def delete(seat, sure):
    room, key = _lecturer(seat)
    if not key:
        return NO_KEY, gr.skip()
    if not sure:
        return "Tick *Yes, delete* first: deleting cannot be undone.", gr.skip()
    try:
        done = progress.delete(room, key)
    except progress.RoomError as err:
        return _said(err), gr.skip()
    for folder in common.downloads_dir().glob(f"cockpit-{done['room']}-*"):   # this page's exports of the room too
        shutil.rmtree(folder, ignore_errors=True)
    for copy in _gradio_copies(done["room"]):
        copy.unlink(missing_ok=True)
    return (f"Deleted room {done['room']}: {sum(done['rows'].values())} rows (its answers, progress and the room "
            "itself). Open a new room to go on.", False)


def _gradio_copies(room: str) -> list[Path]:
    """Gradio's own copies of the room's exports: a gr.File's files are copied into Gradio's cache folder (one folder
    per file's hash), where they outlive the server's own files until the server stops."""
    return list(Path(gr_utils.get_upload_folder()).glob(f"*/room-{room}-*"))


def build(seat: gr.State) -> None:
    """The cockpit's panel, laid out where the Class quiz tab calls it (its lecturer panel), and its events."""
    with gr.Accordion("Cockpit: your room's workshop progress", open=False, elem_id="cockpit"):
        gr.Markdown(INTRO_MD)
        on = gr.Checkbox(False, label="Show live (updates every second)", elem_id="cockpit-live")
        summary = gr.Markdown(elem_id="cockpit-summary")
        plot = gr.Plot(label="The funnel: reached, answered, answered right per step", elem_id="cockpit-plot")
        funnel = gr.Markdown(elem_id="cockpit-funnel")
        students = gr.Markdown(elem_id="cockpit-students")
        with gr.Row():
            given = gr.Dropdown(workshop_tab._shipped(), value=None, label="The room's workshop (students who join "
                                "open it)", elem_id="cockpit-workshop", scale=2)
            give_ = gr.Button("Give the room this workshop", elem_id="cockpit-give", scale=1)
        upload = gr.File(label="Or give the room your own workshop file (YAML or JSON; its format: docs/workshops.md)",
                         file_types=[".yaml", ".yml", ".json"], elem_id="cockpit-upload")
        with gr.Row():
            step = gr.Dropdown([], label="A step's answer to reveal", elem_id="cockpit-step", scale=2)
            show = gr.Button("Reveal to the students", elem_id="cockpit-reveal", scale=1)
        with gr.Row():
            download = gr.Button("Export CSV and JSON", elem_id="cockpit-export")
            sure = gr.Checkbox(False, label="Yes, delete", elem_id="cockpit-sure")
            drop = gr.Button("Delete this room's data", variant="stop", elem_id="cockpit-delete")
        files = gr.File(label="Results", file_count="multiple", interactive=False, elem_id="cockpit-files")
        said = gr.Markdown(elem_id="cockpit-said")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            data = gr.JSON(label="cockpit")
    timer, last = gr.Timer(TICK_SECONDS, active=False), gr.State(None)
    quiet = dict(queue=False, api_visibility="private", show_progress="hidden")
    redraw = dict(fn=tick, inputs=[seat, last], outputs=[summary, students, funnel, plot, step, data, last, timer],
                  **quiet)
    on.change(live, [on, seat], [timer, last], **quiet).then(**redraw)
    timer.tick(**redraw)
    show.click(reveal, [seat, step], said, **quiet).then(**redraw)
    download.click(export, seat, [said, files], **quiet)
    give_.click(give, [seat, given], said, **quiet)
    upload.upload(give_file, [seat, upload], said, **quiet)
    drop.click(delete, [seat, sure], [said, sure], **quiet).then(**redraw)
    for fn, name in ((cockpit, "cockpit"), (cockpit_export, "cockpit_export"), (cockpit_reveal, "cockpit_reveal"),
                     (cockpit_workshop, "cockpit_workshop"), (cockpit_delete, "cockpit_delete")):
        gr.api(fn, api_name=name, queue=False)
