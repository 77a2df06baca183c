"""Links that restore a view, and lecture mode.

The view is the tab ("top", or "top/sub" for a tab's own sub-tab), the shared sentence and every control a tab registers
with `shared.remember(key, component)`. It lives in the page's URL: a change to any of them rewrites the
query string in the browser (assets/view.js, no server round trip), keeping only what differs from the
defaults, so links stay short. Opening a link runs `restore` on page load: each parameter is checked
against its component (numbers clamped to the slider, choices among the choices, unknown keys ignored,
with one notice), the values are set, and `shared.restored` changes, which the tabs' main views listen
to (a slider moved by code fires no `release`, so they would not redraw otherwise).

Lecture mode (`?lecture=1` or the toggle) is a class on the page: larger type in the UI and in every
plotly figure, thicker lines, and the secondary panels (data, tables: `elem_classes=["advanced"]`)
hidden. The figures are resized in the browser, so the handlers and the API stay the same for everyone.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass
from urllib.parse import unquote_plus

import gradio as gr

from playground.ui.common import Shared, toast

MAX_TEXT = 2_000  # characters of a text box kept in a link
# Keys restored one step after the others, because their value points into another restored value: the
# selected word is a span of the sentence, so its followers must read the link's sentence, not the one before.
AFTER_THE_REST = ("focus",)


def tab_ids(tabs: gr.Tabs) -> list[str]:
    return [child.id for child in tabs.children if isinstance(child, gr.Tab)]


def sub_id(label: str) -> str:
    """A sub-tab's name in links (as assets/view.js makes it):
    "Classic BPE, step by step" -> "classic-bpe-step-by-step"."""
    return re.sub(r"[^a-z0-9]+", "-", label.strip().lower()).strip("-")


def sub_tab_ids(tabs: gr.Tabs) -> dict[str, list[str]]:
    """Each top-level tab's id -> the names of the sub-tabs inside it."""
    def inner(block) -> list[str]:
        found = []
        for child in getattr(block, "children", None) or []:
            if isinstance(child, gr.Tab):
                found.append(sub_id(str(child.label)))
            found += inner(child)
        return found
    return {child.id: inner(child) for child in tabs.children if isinstance(child, gr.Tab)}


def choice_values(component) -> list:
    return [value for _, value in getattr(component, "choices", None) or []]


def coerce(component, raw: str, notices: list[str], key: str, limits: tuple | list | dict | None = None):
    """A query-string value for `component`, or gr.skip() when it does not fit (with a notice). `limits`, when
    given, replaces the component's own range (low, high) or choices (Shared.limit); a dict maps each accepted
    value to the choice it stands for (a model's alias to its id)."""
    if isinstance(component, gr.Checkbox):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
    elif isinstance(component, (gr.Slider, gr.Number)):
        try:
            number = float(raw)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            low, high = limits if limits is not None else (getattr(component, "minimum", None),
                                                           getattr(component, "maximum", None))
            clamped = float(min(max(number, -math.inf if low is None else low), math.inf if high is None else high))
            clamped = int(clamped) if clamped.is_integer() else clamped
            if clamped != number:
                notices.append(f"The link's {key}={raw[:30]} is out of range; using {clamped} ({low} to {high}).")
            return clamped
    elif isinstance(component, gr.CheckboxGroup):
        allowed = {str(v): v for v in choice_values(component)}
        chosen = [allowed[part] for part in raw.split(",") if part in allowed]
        if chosen or not raw:
            return chosen
    elif isinstance(component, (gr.Dropdown, gr.Radio)):
        allowed = limits if isinstance(limits, dict) else {  # a dict: what each raw value stands for (an alias)
            str(v): v for v in (choice_values(component) if limits is None else limits)}
        if raw in allowed:
            return allowed[raw]
    elif isinstance(component, gr.Textbox):
        if len(raw) > MAX_TEXT:
            notices.append(f"The link's {key} was cut to {MAX_TEXT:,} characters.")
        return raw[:MAX_TEXT]
    notices.append(f"The link's {key}={raw[:30]!r} does not fit; the default is kept.")
    return gr.skip()


class Restorer:
    """Sets the view from a link's parameters: what opening a link does on page load, and what a page following its
    lecturer does with each view the lecturer publishes (ui/follow.py), so a followed view is a link restored.
    `outputs` are the components `apply` returns values for; `later` those of `apply_later` (AFTER_THE_REST)."""

    def __init__(self, shared: Shared, lecture: gr.Checkbox, banner: gr.HTML):
        self.shared, self.lecture = shared, lecture
        self.keys = list(shared.view)
        self.components = [shared.view[k] for k in self.keys]
        self.ids, self.subs = tab_ids(shared.tabs), sub_tab_ids(shared.tabs)
        self.dropped = gr.Textbox("", visible="hidden", elem_id="link-dropped")  # mounted, as ui.demo.HIDDEN says
        self.later = [(key, shared.view[key]) for key in AFTER_THE_REST if key in shared.view]
        self.outputs = [*self.components, shared.tabs, lecture, shared.restored, banner, self.dropped]
        self.defaults = self._defaults()

    def _defaults(self) -> dict[str, str]:
        """Each view key's default as a link writes it (assets/view.js's `encode`), and the first tab: a link leaves
        out what is at its default, so a followed view starts from these (a view is the whole view, not a change)."""
        defaults = {"tab": self.ids[0]} if self.ids else {}
        for key, component in zip(self.keys, self.components):
            value = component.value
            if value is None or key in AFTER_THE_REST:
                continue
            raw = (",".join(map(str, value)) if isinstance(value, list) else
                   ("1" if value else "0") if isinstance(value, bool) else str(value))
            notices: list[str] = []
            if not isinstance(coerce(component, raw, notices, key), type(gr.skip())) and not notices:
                defaults[key] = raw            # only what restores without a notice
        return defaults

    def apply(self, params: dict[str, str], marker: int = 1, broken: tuple[str, ...] = ()) -> list:
        """Each parameter checked against its component (`parse`: one notice per refusal, three shown), the values
        set, and `restored` set to `marker` (a new value, so the tabs redraw) when any view key was given. `broken`:
        the names of parameters left out because their %-escapes are not text (`link_params`)."""
        found = parse(self.shared, params, self.ids, self.subs)
        notices, dropped = found.notices, found.dropped
        if broken:
            notices.append(f"The link's {_named(broken)} not valid text (a %-escape cut short, as when a link is "
                           "copied in part); ignored.")
            dropped += broken
        lecture_on = gr.skip()
        if "lecture" in params:
            lecture_on = coerce(self.lecture, params["lecture"], notices, "lecture")
            if isinstance(lecture_on, type(gr.skip())):
                dropped.append("lecture")   # refused: the address bar loses it, as it loses any refused key
        for notice in notices[:3]:
            toast(notice)
        restored = len(set(params) & set(self.keys)) > 0
        values = [gr.skip() if key in AFTER_THE_REST else value for key, value in zip(self.keys, found.values)]
        return [*values, found.selected, lecture_on, marker if restored else gr.skip(),
                gr.update(value=notice_html(notices), visible=bool(notices)), ",".join(dropped)]

    def apply_later(self, params: dict[str, str]):
        """The AFTER_THE_REST keys, once the rest is in place (their notices were given with the rest)."""
        values = [coerce(component, params[key], [], key) if key in params else gr.skip()
                  for key, component in self.later]
        return values[0] if len(values) == 1 else values  # gradio takes a single output's value as it is


def wire(demo: gr.Blocks, shared: Shared, lecture: gr.Checkbox, copy: gr.Button, banner: gr.HTML) -> Restorer:
    """Restore on load (what a link got wrong is said in `banner` and dropped from the address bar), rewrite
    the URL on change, copy the link, toggle lecture mode. Returns the Restorer (follow-me applies views with it)."""
    restorer = Restorer(shared, lecture, banner)

    def restore(request: gr.Request):
        params, broken = link_params(request.url.query if request is not None else "")
        return restorer.apply(params, broken=tuple(broken))

    def restore_later(request: gr.Request):
        return restorer.apply_later(link_params(request.url.query)[0] if request is not None else {})

    restored = demo.load(restore, outputs=restorer.outputs, api_visibility="private", queue=False)
    if restorer.later:
        restored = restored.then(restore_later, outputs=[component for _, component in restorer.later],
                                 api_visibility="private", queue=False, show_progress="hidden")
    restored.then(None, inputs=restorer.dropped, js="(keys) => window.playgroundView.restored(keys)")
    for key, component in [*zip(restorer.keys, restorer.components), ("lecture", lecture)]:
        default = json.dumps(component.value, ensure_ascii=False)
        component.change(None, inputs=[component],
                         js=f"(v) => window.playgroundView.set({json.dumps(key)}, v, {default})")
    lecture.change(None, inputs=[lecture], js="(on) => window.playgroundView.lecture(on)")
    copy.click(None, js="() => window.playgroundView.copy()")
    return restorer


@dataclass
class Parsed:
    """A link's parameters read against the app's view (`parse`)."""

    values: list            # one per key of shared.view, in its order: the value, or gr.skip() (absent or refused)
    selected: object        # the top-level tabs' update (gr.Tabs(selected=...)), or gr.skip()
    notices: list[str]      # what was refused or changed, one sentence each
    dropped: list[str]      # the keys the address bar should lose (refused, unknown, a tab that does not exist)


# A link's keys that are the page's, not a view's: the tab, lecture mode (ui/lecture.py) and Gradio's own light or
# dark theme (`?__theme=dark`, read by Gradio's frontend)
PAGE_KEYS = frozenset({"tab", "lecture", "__theme"})


def parse(shared: Shared, params: dict[str, str], ids: list[str] | None = None,
          subs: dict[str, list[str]] | None = None) -> Parsed:
    """A link's parameters (the query string as a dict) read against every registered control: what `restore`
    applies when a page opens, what a workshop step applies (ui/workshop_tab.py), and what a workshop file's views
    are checked with. `lecture` is the page's own and is not read here."""
    ids = tab_ids(shared.tabs) if ids is None else ids
    subs = sub_tab_ids(shared.tabs) if subs is None else subs
    notices: list[str] = []
    values, rejected = [], []
    for key, component in shared.view.items():
        limits = shared.limits[key](params) if key in shared.limits and key in params else None
        value = coerce(component, params[key], notices, key, limits) if key in params else gr.skip()
        if component is shared.text and isinstance(value, str) and not value.strip():  # as the box refuses it
            notices.append(f"The link's {key} is empty; the sentence is kept.")
            value = gr.skip()
        if key in params and isinstance(value, type(gr.skip())):
            rejected.append(key)
        values.append(value)
    selected, tab_rejected = _tab(params.get("tab"), ids, subs, notices)
    unknown = sorted(set(params) - set(shared.view) - PAGE_KEYS)
    if unknown:
        notices.append(f"The link's {_named(unknown)} not part of this app's views; ignored.")
    return Parsed(values, selected, notices, rejected + unknown + (["tab"] if tab_rejected else []))


def _named(keys) -> str:
    """Parameter names in a sentence, each quoted (an empty name is seen as ''), with their verb: "key 'foo' is",
    "keys 'a', 'b' are"."""
    names = ", ".join(repr(key[:30]) for key in list(keys)[:5]) + (", ..." if len(keys) > 5 else "")
    return f"key {names} is" if len(keys) == 1 else f"keys {names} are"


def link_params(query: str) -> tuple[dict[str, str], list[str]]:
    """A link's query string as its parameters (the last of a repeated name wins), and the names of those that are
    not text: a %-escape that is not UTF-8 (`%E0%A4%A`, a link cut inside a character) decodes to U+FFFD, here as
    in the browser, which hands the server the page's address re-encoded (`%EF%BF%BD%25A`), so a U+FFFD is all that
    is left of it. Those are left out: they were set as the sentence '�%A'."""
    params, broken = {}, []
    for pair in filter(None, query.split("&")):
        key, _, value = (unquote_plus(part, errors="replace") for part in pair.partition("="))
        if "\ufffd" in key + value:
            broken.append(key)
        else:
            params[key] = value
    return params, broken


def problems(shared: Shared, params: dict[str, str]) -> list[str]:
    """What a view's parameters get wrong, as `parse` says it (a workshop file's steps are checked with this)."""
    return parse(shared, params).notices


def _tab(tab: str | None, ids: list[str], subs: dict[str, list[str]], notices: list[str]):
    """The link's `tab` ("top" or "top/sub") as the tabs' update, and whether it was refused (wholly or its
    sub-tab). The sub-tab itself is opened in the page (assets/view.js)."""
    if tab is None:
        return gr.skip(), False
    top, _, sub = tab.partition("/")
    if top not in ids:
        notices.append(f"The link's tab {top!r} does not exist; choose from {', '.join(ids)}.")
        return gr.skip(), True
    if sub and sub not in subs[top]:
        notices.append(f"The link's sub-tab {sub!r} is not in {top}; "
                       f"choose from {', '.join(subs[top]) or 'none: it has no sub-tabs'}.")
        return gr.Tabs(selected=top), True
    return gr.Tabs(selected=top), False


def notice_html(notices: list[str], title: str = "This link was not followed exactly:") -> str:
    """Notices above the tabs, such as what a link got wrong (every value escaped); nothing when there are none."""
    if not notices:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notices[:8])
    return f'<div class="notice link-notice"><b>{html.escape(title)}</b><ul>{items}</ul></div>'
