"""Follow me (issue #37): the lecturer's page publishes the view it is on, and the pages of the students in the room
who follow apply it, with the code that restores a link (ui/view.Restorer), so a followed view is a link opened.

The lecturer ticks "Follow me" in the Class quiz tab's lecturer panel (the room's key is in that page's `seat`).
Their page publishes its address's query string (assets/follow.js), 150 ms after each change of view (the address
changes with every control, assets/view.js) and every few seconds as a heartbeat; the room keeps the view and a
version (playground/rooms/follow.py). A student's page in the room asks for the room's view: the server holds the
ask until the version moves or WAIT_SECONDS pass (playground/rooms/watch.py: the copy reads the room every 0.1 s
however many pages wait, with no thread held), and the page asks again FOLLOW_SECONDS after each answer. Nothing
new is an answer of nothing (no figure, no write); a new version, when the student follows, sets the controls the
lecturer changed since the view the page applied last (the whole view when the page starts following: what the
lecturer's link leaves at its default is reset too), and the tabs redraw from the answer cache (ui/cache.py): 200
students applying the same view ask the same questions, answered once. The bar above the tabs says whom the page
follows, with one button to step out and back in.

Endpoints (docs/api.md): `follow_lead(room, key, view)` (the lecturer's; refused without the key) and
`follow_view(room, since_version)` -> {room, version, view, lecturer_present} (view null when unchanged).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import parse_qsl

import gradio as gr

from playground import polls
from playground.rooms import follow as rooms_follow
from playground.rooms.watch import WATCH
from playground.ui import quiz_tab
from playground.ui.view import Restorer

FOLLOW_SECONDS = 0.25    # a student's page in a room asks for the lecturer's view again this soon after its last
                         # answer: the server holds the ask until the view changes (rooms/watch.py), so a change
                         # reaches a waiting page at once, and one that came between two asks within this time
PUBLISH_JS = "window.playgroundFollow.register(trigger);"   # assets/follow.js sends the view as this HTML's select
CLEAR = {"version": -1, "seen": -1, "shown": None, "view": None}   # the view applied, its version, the room's
                                                                     # version looked at, what the bar shows


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
    WATCH.forget(state["room"])          # the followers waiting on this copy read the change now
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


def _seated(seat, request: gr.Request):
    """The page joined a room (or left one): its poll runs while it is a student's page in a room, and a wait it
    has on another room ends."""
    WATCH.wake(request.session_hash)
    seat = quiz_tab._seat(seat)
    return gr.Timer(active=bool(seat.get("room")) and not seat.get("key"))


def _follow_changed(request: gr.Request):
    """"Follow the lecturer" ticked or unticked: the page's wait ends, and its next poll applies the view as it
    stands (or stops applying views)."""
    WATCH.wake(request.session_hash)
    return dict(CLEAR)


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


def _params(restorer: Restorer, view: str) -> dict:
    """A followed view as the restorer's parameters: what its link leaves out is at its default (so the whole view
    is the lecturer's), less lecture mode (the projector's large type is the lecturer's, not the students')."""
    params = {**restorer.defaults, **dict(parse_qsl(view, keep_blank_values=True))}
    params.pop("lecture", None)
    return params


def _applied(restorer: Restorer, view: str, state: dict, marker: int) -> tuple[list, bool]:
    """The restorer's outputs that set a followed view, and whether they show a notice. A page that applied a view
    before gets only what changed since (200 followers' answers to one change, each a few values: Gradio's work
    per answer grows with the values it carries), and no banner or dropped-keys update unless a notice is shown or
    must be cleared."""
    params = _params(restorer, view)
    if state.get("view") is None:
        values = restorer.apply(params, marker=marker)
        return values, bool(values[-2]["visible"])
    before = _params(restorer, state["view"])
    values = restorer.apply({key: value for key, value in params.items() if before.get(key) != value}, marker)
    noticed = bool(values[-2]["visible"])
    if not noticed and not state.get("noticed"):
        values[-2:] = [gr.skip(), gr.skip()]
    return values, noticed


def ticker(restorer: Restorer):
    """The student's poll, closed over the view's restorer: `tick(seat, following, state, request)`, which waits for
    the room's next view while the page shows the room as it stands (rooms/watch.py), and `tick_now`, what it
    answers then. Their outputs: the restorer's, then the poll's state, the applied query, the bar and its button."""
    nothing = [gr.skip()] * (len(restorer.outputs) + 4)

    async def tick(seat, following, state, request: gr.Request):
        seat, state = quiz_tab._seat(seat), dict(state or CLEAR)
        if not seat.get("room") or seat.get("key"):
            return nothing
        if state["shown"] is not None and state["shown"][0] == bool(following):   # up to date: wait for a change
            shown = (state.get("seen", state["version"]), state["shown"][1])
            ended = await WATCH.wait(seat["room"], shown, session=request.session_hash)
            if ended == "woken":
                return nothing                # the page changed its inputs: its next tick carries the new ones
            if ended == "changed" and (got := WATCH.latest(seat["room"])) is not None:
                return tick_now(seat, following, state, got)   # the reading the wait saw: no read, no thread
        return await asyncio.to_thread(tick_now, seat, following, state)

    def tick_now(seat, following, state, got: dict | None = None):
        """The answer to the room as it stands (`got`: as `rooms_follow.view(room, -1)` read it; read now if None)."""
        seat, state = quiz_tab._seat(seat), dict(state or CLEAR)
        if not seat.get("room") or seat.get("key"):      # not in a room, or the lecturer's own page
            return nothing
        try:
            got = got or rooms_follow.view(seat["room"], -1)
        except polls.PollError as err:                   # the room closed while the page was open
            return [*nothing[:-4], dict(CLEAR), gr.skip(), gr.update(value=f"⚠ {err}", visible=True),
                    gr.update(visible=False)]
        shown, seen = [bool(following), got["lecturer_present"]], got["version"]
        bar = _bar(got["room"], *shown) if shown != state["shown"] else (gr.skip(), gr.skip())
        if not following or seen == state["version"] or not got["lecturer_present"]:
            if shown == state["shown"] and seen == state.get("seen"):
                return nothing                           # the cheap answer: nothing changed, nothing sent
            # `seen`: the room's version this page has looked at (applied or not), which its next ask waits past
            return [*nothing[:-4], {**state, "shown": shown, "seen": seen}, gr.skip(), *bar]
        values, noticed = _applied(restorer, got["view"], state, marker=2 + seen)
        # `query` is "<version> <view>": a new value for each version, so its change fires even when the lecturer
        # comes back to a view this page applied before (the page opens its sub-tab on that change)
        return [*values, {"version": seen, "seen": seen, "shown": shown, "view": got["view"], "noticed": noticed},
                f"{seen} {got['view']}", *bar]

    return tick, tick_now


def wire(demo: gr.Blocks, f: Follow, restorer: Restorer) -> None:
    """The poll, the publisher, the checkboxes and the bar's button; the endpoints."""
    hidden = dict(queue=False, api_visibility="private", show_progress="hidden")
    f.seat.change(_seated, f.seat, f.timer, **hidden)
    f.timer.tick(ticker(restorer)[0], [f.seat, f.follow_on, f.state],
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
    f.follow_on.change(_follow_changed, None, f.state, **hidden)      # on again: the current view is applied
    f.toggle.click(lambda on: not on, f.follow_on, f.follow_on, **hidden)
    f.publish.select(_publish, [f.seat, f.lead_on], f.lead_md, **hidden)
    f.lead_on.change(None, inputs=f.lead_on, js="(on) => window.playgroundFollow.lead(on)")
    f.lead_on.change(_stop_leading, [f.seat, f.lead_on], f.lead_md, **hidden)
    gr.api(follow_lead, api_name="follow_lead", queue=False)
    gr.api(follow_view, api_name="follow_view", queue=False)
