"""Follow me (issue #37): the lecturer's page publishes the view it is on, and the pages of the students in the room
who follow apply it, with the code that restores a link (ui/view.Restorer), so a followed view is a link opened.

The lecturer ticks "Follow me" in the Class quiz tab's lecturer panel (the room's key is in that page's `seat`).
Their page publishes its address's query string (assets/follow.js), 150 ms after each change of view (the address
changes with every control, assets/view.js) and every few seconds as a heartbeat; the room keeps the view and a
version (playground/rooms/follow.py). A student's page in the room polls the room every FOLLOW_SECONDS: an
unchanged version is one database read and an answer of nothing (no figure, no write); a new one, when the student
follows, sets every control of the view, and the tabs redraw from the answer cache (ui/cache.py): 200 students
applying the same view ask the same questions, answered once. The bar above the tabs says whom the page follows,
with one button to step out and back in.

Endpoints (docs/api.md): `follow_lead(room, key, view)` (the lecturer's; refused without the key) and
`follow_view(room, since_version)` -> {room, version, view, lecturer_present} (view null when unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

import gradio as gr

from playground import polls
from playground.rooms import follow as rooms_follow
from playground.ui import quiz_tab
from playground.ui.view import Restorer

FOLLOW_SECONDS = 0.75    # how often a student's page in a room asks for the lecturer's view: a change reaches a
                         # follower within it (p95 ≤ 1 s with the round trip); 200 pages: 267 cheap polls a second
PUBLISH_JS = "window.playgroundFollow.register(trigger);"   # assets/follow.js sends the view as this HTML's select
CLEAR = {"version": -1, "shown": None}


@dataclass
class Follow:
    """The page's follow-me components: the bar above the tabs, the hidden publisher, the poll's timer and state,
    and (made in the Class quiz tab by `controls`) the lecturer's and the student's checkboxes."""

    bar: gr.Markdown
    toggle: gr.Button
    publish: gr.HTML
    timer: gr.Timer
    state: gr.State
    query: gr.Textbox
    lead_on: gr.Checkbox | None = None
    lead_md: gr.Markdown | None = None
    follow_on: gr.Checkbox | None = None
    seat: gr.State | None = None

    def controls(self, seat: gr.State, where: str) -> None:
        """The checkboxes, laid out by the Class quiz tab where it calls this: the student's beside the room code
        (`where` = "student"), the lecturer's in the lecturer's panel ("lecturer")."""
        self.seat = seat
        if where == "student":
            self.follow_on = gr.Checkbox(False, label="Follow the lecturer (your page shows the lecturer's view)",
                                         elem_id="follow-on")
        else:
            self.lead_on = gr.Checkbox(False, label="Follow me: the students who follow see the view I am on",
                                       elem_id="follow-me")
            self.lead_md = gr.Markdown(elem_id="follow-lead-status")


def layout() -> Follow:
    """The bar above the tabs (shown while the page is in a room) and the parts of follow-me nobody sees."""
    with gr.Row(elem_id="follow-row"):
        bar = gr.Markdown("", elem_id="follow-bar", visible=False)
        toggle = gr.Button("Step out", size="sm", scale=0, elem_id="follow-toggle", visible=False)
    return Follow(bar=bar, toggle=toggle,
                  publish=gr.HTML("", visible="hidden", elem_id="follow-publish", js_on_load=PUBLISH_JS),
                  timer=gr.Timer(FOLLOW_SECONDS, active=False), state=gr.State(dict(CLEAR)),
                  query=gr.Textbox("", visible="hidden", elem_id="follow-query"))


def follow_lead(room: str = "", key: str = "", view: str = "") -> dict:
    """The room's lecturer publishes `view` (a link's query string; '' stops leading). Refused without the key."""
    room = quiz_tab._text(room, "The room code")
    if not room.strip():
        raise gr.Error(quiz_tab.NO_ROOM)
    return quiz_tab._room(rooms_follow.lead, room, quiz_tab._text(key, "The key"), quiz_tab._text(view, "The view"))


def follow_view(room: str = "", since_version: int = -1) -> dict:
    """The room's lecturer's view: {room, version, view, lecturer_present}; `view` is null when the version is still
    `since_version` (the follower has it)."""
    room = quiz_tab._text(room, "The room code")
    if not room.strip():
        raise gr.Error(quiz_tab.NO_ROOM)
    return quiz_tab._room(rooms_follow.view, room, since_version)


def _publish(seat, lead_on, evt: gr.SelectData):
    """The lecturer's page sent its view (assets/follow.js): published to the room when "Follow me" is on. Never
    raises: the page sent it by itself."""
    seat = quiz_tab._seat(seat)
    if not lead_on:
        return gr.skip()
    if not seat.get("key"):
        return "Open a room first (above): the students who join it can then follow you."
    try:
        state = rooms_follow.lead(seat["room"], seat["key"], evt.value if isinstance(evt.value, str) else "")
    except polls.PollError as err:
        return f"⚠ {err}"
    return (f"**Following you:** the students of room {quiz_tab._shown(state['room'])} who follow see this view "
            f"(change {state['version']}).")


def _stop_leading(seat, lead_on):
    """"Follow me" unticked: the room's view is cleared, so its followers' pages say the lecturer stopped."""
    seat = quiz_tab._seat(seat)
    if lead_on or not seat.get("key"):
        return gr.skip()
    try:
        rooms_follow.lead(seat["room"], seat["key"], "")
    except polls.PollError as err:
        return f"⚠ {err}"
    return "Not leading: the students' pages stay where they are."


def _bar(room: str, following: bool, present: bool):
    """The bar above the tabs and its button, for a student's page in `room`."""
    shown = quiz_tab._shown(room)
    if following and present:
        text = f"**Following room {shown}:** your page shows the lecturer's view."
    elif following:
        text = f"**Following room {shown}:** your page will show the lecturer's view when they lead."
    else:
        text = f"**Stepped out** of room {shown}'s view: explore freely."
    return (gr.update(value=text, visible=True),
            gr.update(value="Step out" if following else "Follow the lecturer again", visible=True))


def ticker(restorer: Restorer):
    """The student's poll, closed over the view's restorer. Its outputs: the restorer's, then the poll's state, the
    applied query, the bar and its button."""
    nothing = [gr.skip()] * (len(restorer.outputs) + 4)

    def tick(seat, following, state):
        seat, state = quiz_tab._seat(seat), dict(state or CLEAR)
        if not seat.get("room") or seat.get("key"):      # not in a room, or the lecturer's own page
            return nothing
        try:
            got = rooms_follow.view(seat["room"], state["version"])
        except polls.PollError as err:                   # the room closed while the page was open
            return [*nothing[:-4], dict(CLEAR), gr.skip(), gr.update(value=f"⚠ {err}", visible=True),
                    gr.update(visible=False)]
        shown = [bool(following), got["lecturer_present"]]
        bar = _bar(got["room"], *shown) if shown != state["shown"] else (gr.skip(), gr.skip())
        if not following or got["view"] is None or not got["lecturer_present"]:
            if shown == state["shown"]:
                return nothing                           # the cheap answer: nothing changed, nothing sent
            return [*nothing[:-4], {**state, "shown": shown}, gr.skip(), *bar]
        params = {**restorer.defaults, **dict(parse_qsl(got["view"], keep_blank_values=True))}
        params.pop("lecture", None)    # the projector's large type is the lecturer's, not the students' laptops
        values = restorer.apply(params, marker=2 + got["version"])   # a new `restored`: the tabs redraw
        # `query` is "<version> <view>": a new value for each version, so its change fires even when the lecturer
        # comes back to a view this page applied before (the page opens its sub-tab on that change)
        return [*values, {"version": got["version"], "shown": shown}, f"{got['version']} {got['view']}", *bar]

    return tick


def wire(demo: gr.Blocks, f: Follow, restorer: Restorer) -> None:
    """The poll, the publisher, the checkboxes and the bar's button; the endpoints."""
    hidden = dict(queue=False, api_visibility="private", show_progress="hidden")
    f.seat.change(lambda s: gr.Timer(active=bool(quiz_tab._seat(s).get("room"))
                                     and not quiz_tab._seat(s).get("key")), f.seat, f.timer, **hidden)
    f.timer.tick(ticker(restorer), [f.seat, f.follow_on, f.state],
                 [*restorer.outputs, f.state, f.query, f.bar, f.toggle], **hidden)
    # the applied view's tab and sub-tab, in the page; its selected word once the sentence is in place
    f.query.change(None, inputs=f.query, js="(q) => q && window.playgroundView.follow(q.slice(q.indexOf(' ') + 1))")
    if restorer.later:
        blank = {key: "" for key, _ in restorer.later}    # no selected word in the lecturer's view: none here

        def later(query):
            if not query:
                return restorer.apply_later({})      # all gr.skip(): nothing was applied
            return restorer.apply_later({**blank, **dict(parse_qsl(query.partition(" ")[2], keep_blank_values=True))})

        f.query.change(later, f.query, [component for _, component in restorer.later], **hidden)
    f.follow_on.change(lambda: dict(CLEAR), None, f.state, **hidden)   # on again: the current view is applied
    f.toggle.click(lambda on: not on, f.follow_on, f.follow_on, **hidden)
    f.publish.select(_publish, [f.seat, f.lead_on], f.lead_md, **hidden)
    f.lead_on.change(None, inputs=f.lead_on, js="(on) => window.playgroundFollow.lead(on)")
    f.lead_on.change(_stop_leading, [f.seat, f.lead_on], f.lead_md, **hidden)
    gr.api(follow_lead, api_name="follow_lead", queue=False)
    gr.api(follow_view, api_name="follow_view", queue=False)
