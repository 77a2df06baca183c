"""A student's workshop walk, counted in the lecturer's room: what the lecturer's cockpit (ui/cockpit.py) shows.

In the Workshops panel a student types the room's code and a nickname and joins (anonymous: nothing else is asked).
From then on their page records, as they walk (playground/rooms/progress.py, each record durable before the page
goes on): the step they open, their checked answer and whether it was right (the last one counts), and the hints they
ask for. While in a room the page asks every REVEAL_SECONDS which steps the lecturer revealed, and shows the open
step's answer once it is (a tool question's computed on the student's own input, as *Check* computes it).

Recording never blocks the walk (checks never do, issue #37): these events are not queued, never raise, and say a
refusal (a closed room, an answer after the reveal) in the panel's room line. They read the page's `member` state,
so no answer is shared between pages from the answer cache.
"""

from __future__ import annotations

import html

import gradio as gr

from playground.analysis import workshops as w
from playground.rooms import progress
from playground.ui import patches, quiz_tab
from playground.ui.common import full_stop

REVEAL_SECONDS = 3.0   # how soon a student's page shows a step the lecturer revealed (200 pages: 67 reads a second)
JOINED = ("In room {room} as **{name}**: your lecturer's cockpit shows your nickname, the steps you open, your checked "
          "answers (the last one counts) and the hints you ask for; nothing else.")


def _said(err: Exception) -> str:
    return f"⚠ {html.escape(str(err), quote=False)}"


def _session(request) -> str:
    return getattr(request, "session_hash", None) or ""


def _where(walk, member) -> tuple[w.Workshop | None, int, dict]:
    """The open workshop and step (from 0) and the room this page joined ({} for none)."""
    walk = walk if isinstance(walk, dict) else {}
    member = dict(member) if isinstance(member, dict) else {}
    return walk.get("workshop"), int(walk.get("step", 0)), member


def revealed_md(workshop: w.Workshop, i: int, own) -> str:
    """The step's answer as the lecturer revealed it to the room."""
    q = workshop.steps[i].question
    if q is None:
        return ""
    try:
        answer, why = w.truth(q, own)
    except ValueError as err:
        return f"**The lecturer revealed this step's answer.** {_said(err)}"
    why = f" {html.escape(why, quote=False)}" if why else ""
    shown = full_stop(f"The lecturer revealed this step's answer: {html.escape(str(answer), quote=False)}")
    return f"**{shown}**{why}"


def join(room, name, walk, own, request: gr.Request = None):
    """Join the room under a nickname; the step open now is recorded at once."""
    try:
        joined = progress.join(quiz_tab._text(room, "The room code"), _session(request), name)
    except (progress.RoomError, gr.Error) as err:
        return _said(err), gr.skip(), gr.skip(), gr.skip()
    member = {"room": joined["room"], "nickname": joined["nickname"], "shown": None}
    status = JOINED.format(room=quiz_tab._shown(joined["room"]), name=html.escape(joined["nickname"]))
    refused, shown, recorded = reached(walk, member, own, request)     # the step open now, if any
    if isinstance(refused, str):
        return refused, member, "", gr.Timer(active=True)
    return status, recorded if isinstance(recorded, dict) and "room" in recorded else member, shown, \
        gr.Timer(active=True)


def reached(walk, member, own, request: gr.Request = None):
    """A step opened: recorded, and its answer shown if the lecturer revealed it. (room line, answer, member)"""
    workshop, i, member = _where(walk, member)
    if workshop is None or not member.get("room"):
        return gr.skip(), gr.skip(), gr.skip()
    try:
        progress.reach(member["room"], _session(request), workshop.id, i + 1)
        shown = i + 1 in progress.revealed(member["room"], workshop.id)
    except progress.RoomError as err:
        return _said(err), "", gr.skip()
    member["shown"] = [workshop.id, i + 1] if shown else None
    return gr.skip(), revealed_md(workshop, i, own) if shown else "", member


def answered(walk, member, verdict, request: gr.Request = None):
    """A checked answer (the verdict *Check* just gave) recorded with whether it was right."""
    workshop, i, member = _where(walk, member)
    verdict = verdict if isinstance(verdict, dict) else {}
    if (workshop is None or not member.get("room") or verdict.get("workshop") != workshop.id
            or verdict.get("step") != i + 1 or "correct" not in verdict):
        return gr.skip()
    try:
        progress.answered(member["room"], _session(request), workshop.id, i + 1, verdict["given"],
                          verdict["correct"])
    except progress.RoomError as err:
        return _said(err)
    return gr.skip()


def hinted(walk, member, request: gr.Request = None):
    """The hints on screen, recorded (how many of the step's hints the student asked for)."""
    workshop, i, member = _where(walk, member)
    if workshop is None or not member.get("room") or not workshop.steps[i].hints:
        return gr.skip()
    try:
        progress.hinted(member["room"], _session(request), workshop.id, i + 1, walk.get("hints", 1))
    except progress.RoomError as err:
        return _said(err)
    return gr.skip()


def tick(walk, member, own):
    """Every REVEAL_SECONDS in a room: the open step's answer once the lecturer reveals it; nothing sent otherwise.
    A closed room stops the timer. Never raises."""
    workshop, i, member = _where(walk, member)
    same = gr.skip()
    if not member.get("room"):
        return same, same, same, gr.Timer(active=False)
    if workshop is None or workshop.steps[i].question is None or member.get("shown") == [workshop.id, i + 1]:
        return same, same, same, same
    try:
        shown = i + 1 in progress.revealed(member["room"], workshop.id)
    except progress.RoomError as err:
        return _said(err), same, {}, gr.Timer(active=False)
    if not shown:
        return same, same, same, same
    return same, revealed_md(workshop, i, own), {**member, "shown": [workshop.id, i + 1]}, same


def layout() -> dict:
    """The room row of the Workshops panel: code, nickname, Join, and the room line. The revealed answer's
    Markdown (`shown`) is the caller's to lay out, under the step's verdict."""
    with gr.Row():
        room = gr.Textbox("", label="Room code (in class)", placeholder="from the lecturer's screen",
                          elem_id="workshop-room", scale=2)
        name = gr.Textbox("", label="Nickname (any name you like; no account)", elem_id="workshop-nickname",
                          scale=2)
        join_ = gr.Button("Join", size="sm", elem_id="workshop-join", scale=1)
    status = gr.Markdown(elem_id="workshop-room-status")
    member = gr.State({})
    patches.keep_sessions_holding(member)                   # never the first dropped from a full session store
    return dict(room=room, name=name, join=join_, status=status, member=member,
                timer=gr.Timer(REVEAL_SECONDS, active=False))


QUIET = dict(queue=False, api_visibility="private", show_progress="hidden")


def wire_join(r: dict, walk, own):
    """Joining (the button, or Enter in the nickname): the event, which the caller follows with opening the room's
    workshop (ui/workshop_tab.room_workshop)."""
    return gr.on([r["join"].click, r["name"].submit], join, [r["room"], r["name"], walk, own],
                 [r["status"], r["member"], r["shown"], r["timer"]], **QUIET)


def wire(r: dict, walk, own, verdict, opened: list, checked, hints) -> None:
    """The records: after each step opened (`opened`: the events that show a step), each check (`checked`, whose
    `verdict` output holds the verdict) and each hint (`hints`); the timer that shows a revealed answer."""
    quiet = QUIET
    for event in opened:
        event.success(reached, [walk, r["member"], own], [r["status"], r["shown"], r["member"]], **quiet)
    checked.success(answered, [walk, r["member"], verdict], r["status"], **quiet)
    hints.success(hinted, [walk, r["member"]], r["status"], **quiet)
    r["timer"].tick(tick, [walk, r["member"], own], [r["status"], r["shown"], r["member"], r["timer"]], **quiet)
