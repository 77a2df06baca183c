"""What every tab's handlers share: coercing UI values, notices, the JSON download."""

from __future__ import annotations

import functools
import html
import inspect
import logging
import math
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import orjson

from playground import checkpoints
from playground.analysis import models
from playground.figures.common import plot_fresh_js, plot_stale_js
from playground.text import MAX_CHARS, clean_text

@dataclass
class Shared:
    """What the tabs share, built once with the page (never per-user data: values live in the browser).

    `sentence` is the box where the text for every tab is typed; `text` (hidden) the sentence as last
    committed, by Enter or by leaving the box: every tab redraws on `text.change`, never on the box's own
    events (with several events listening to a typed Textbox, Gradio 6.31's page re-fires its change and
    input events after the box loses focus, an endless loop; tests/test_browser_focus.py checks it stays
    quiet); `focus` (hidden) the character span "start:end" of the selected word in `text`, or "" for
    none; `restored` (hidden) changes when a link has set the view;
    `tabs` the top-level gr.Tabs (ids from ui.demo.tab_id); `view`
    maps a URL key to each component whose value is part of the view a link restores (a tab registers
    them with `remember`)."""

    sentence: gr.Textbox
    text: gr.Textbox
    focus: gr.Textbox
    restored: gr.Number  # hidden: becomes 1 when a link restored the view; the tabs' main views redraw on it
    tabs: gr.Tabs | None = None
    view: dict[str, gr.components.Component] = field(default_factory=dict)
    relays: dict[str, gr.HTML] = field(default_factory=dict)  # "text", "focus": see `changed`
    limits: dict[str, Callable[[dict[str, str]], tuple | list]] = field(default_factory=dict)  # see `limit`
    follow: object = None   # follow-me's components (ui/follow.Follow); the Class quiz tab lays out its checkboxes
    cockpit: object = None  # the lecturer's cockpit (ui/cockpit.build(seat)), laid out in the quiz's lecturer panel
    seat: object = None     # this page's place in the class quiz (a gr.State: ui/quiz_tab._seat), which every check
    #                         of a quiz question reads (in a room, no answer before the lecturer reveals it)

    def changed(self, name: str):
        """The event that follows a real change of `text` or `focus` (name): what the tabs listen to, never the
        component's own `change`. Gradio 6.31's page fires the change of a state component that an event set (a
        link's sentence and word) again after later answers, with the value it already had, sometimes for ever
        (each page re-sent fill-mask, embeddings, attention, ... every 1-3 s). The page relays a change only
        when the value differs from the one it relayed last (assets/relay.js), as a `select` of a mounted,
        hidden HTML component (ui.demo wires it)."""
        return self.relays[name].select

    def remember(self, prefix: str, **components: gr.components.Component) -> None:
        """Register view components under the URL keys "prefix.name" (just "name" without a prefix)."""
        for name, component in components.items():
            key = f"{prefix}.{name}" if prefix else name
            assert key not in self.view, f"URL key {key!r} is already taken"
            self.view[key] = component

    def limit(self, key: str, limits: Callable[[dict[str, str]], tuple | list]) -> None:
        """A link's value for `key` is checked against limits(the link's query) instead of its component's own
        range or choices: (low, high) for a number, the allowed values for a choice. For a range that depends on
        another control of the same link (the layers of the link's model, not of the deepest one)."""
        assert key in self.view, f"URL key {key!r} is not registered"
        self.limits[key] = limits


def model_ids(listed: list[str]) -> Callable[[dict[str, str]], dict[str, str]]:
    """A link's model checked against `listed` (Shared.limit), an old short id (`gpt`, `smollm2`) read as its id."""
    accepted = {alias: key for alias, key in models.ALIASES.items() if key in listed}
    accepted.update({key: key for key in listed})
    return lambda params: accepted


# How an event that follows the sentence and the selected word is triggered while its last run is still pending:
# run once more afterwards with the latest values. Gradio's default ("once") dropped the second trigger, so a page
# whose sentence and word changed in quick succession (a link) kept the answer to the sentence without the word.
FOLLOW = "always_last"

FIGURE = ["figure-view"]  # elem_classes of an HTML view that is a picture: assets/export.js gives it PNG and SVG

LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]


def checked(fn, components: list, name: str = ""):
    """`fn` refusing, before it runs, an input whose type its component never sends: a list where one choice
    goes, a dict where a number goes, ... (API callers can send anything). The message names the input. The
    handlers then check the values themselves (ranges, choices). Each refusal is one line of the server's log
    (`refused`), under `name` (the endpoint's). Same signature, same kind (gradio reads both)."""
    where = f"/{name}" if name else f"{fn.__name__}()"

    def check(args) -> None:
        for value, component in zip(args, components):
            problem = _type_problem(component, value)
            if problem:
                label = getattr(component, "label", None) or type(component).__name__
                raise gr.Error(f"{label} should be {problem}, not {type(value).__name__} {_shown(value)}.")

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def checked_generator(*args, **kwargs):
            try:
                check(args)
                yield from fn(*args, **kwargs)
            except gr.Error as err:
                refused(err, where)
                raise

        return checked_generator

    @functools.wraps(fn)
    def checked_function(*args, **kwargs):
        try:
            check(args)
            return fn(*args, **kwargs)
        except gr.Error as err:
            refused(err, where)
            raise

    return checked_function


REFUSALS = logging.getLogger("playground.refused")


def refused(err: gr.Error, where: str) -> None:
    """A refused call (a gr.Error: a message for the user, nothing wrong in the server) as one line of the server's
    log, instead of the full traceback Gradio prints for every gr.Error that does not say otherwise
    (`print_exception`): a lecturer's log of a class shows a line per refusal. Logged once, where first caught."""
    if err.print_exception:
        err.print_exception = False
        REFUSALS.warning("refused %s: %s", where, " ".join(str(err.message).split())[:300])


def logged_preprocess(demo: gr.Blocks) -> None:
    """The same for what gradio refuses before a handler runs (an input's preprocess: a value not among its
    choices, SmolLM2 where it is missing): the demo's own preprocess_data, wrapped on the instance."""
    preprocess = demo.preprocess_data

    async def preprocess_data(block_fn, *args, **kwargs):
        try:
            return await preprocess(block_fn, *args, **kwargs)
        except gr.Error as err:
            refused(err, f"/{block_fn.api_name}" if block_fn.api_name else "an event")
            raise

    demo.preprocess_data = preprocess_data


_SCALAR = (str, int, float, bool, type(None))


def _type_problem(component, value) -> str | None:
    """What `component` sends, when `value` is not of that type (None: it is)."""
    many = isinstance(component, gr.CheckboxGroup) or (isinstance(component, gr.Dropdown) and component.multiselect)
    if many:
        ok = isinstance(value, (str, type(None))) or (isinstance(value, (list, tuple))
                                                      and all(isinstance(v, _SCALAR) for v in value))
        return None if ok else "a list of choices"
    if isinstance(component, (gr.Dropdown, gr.Radio)):
        return None if isinstance(value, _SCALAR) else "one of its choices"
    if isinstance(component, (gr.Number, gr.Slider, gr.Checkbox)):
        if isinstance(value, _SCALAR):
            return None
        return "a number" if not isinstance(component, gr.Checkbox) else "true or false"
    if isinstance(component, gr.Textbox):
        return None if isinstance(value, (str, type(None))) else "text"
    return None


def as_number(value, name: str) -> float:
    """Any number or numeric string as a float; a clear error for what is not a number at all."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} should be a number, not {str(value)[:30]!r}.") from None
    except OverflowError:  # an integer beyond a float's range, such as 10**400
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number):
        raise gr.Error(f"{name} should be a number, not NaN.")
    return number


def as_int(value, name: str, low: int, high: int, notices: list[str]) -> int:
    """Any number (or numeric string) to an int in [low, high], clamping with a notice."""
    number = as_number(value, name)
    clamped = min(max(number, low), high)
    if clamped != number:
        notices.append(f"{name} {_shown(value)} is out of range; using {int(clamped):,} (allowed: {low:,} to "
                       f"{high:,}).")
    return int(round(clamped))


def as_float(value, name: str, low: float, high: float, notices: list[str]) -> float:
    """Any number (or numeric string) to a float in [low, high], clamping with a notice."""
    number = as_number(value, name)
    clamped = min(max(number, low), high)
    if clamped != number:
        notices.append(f"{name} {_shown(value)} is out of range; using {clamped:g} (allowed: {low:g} to {high:g}).")
    return clamped


def _shown(value) -> str:
    """A value as a notice quotes it: at most 30 characters (str() of a 5,000-digit int would even raise)."""
    if isinstance(value, int) and value.bit_length() > 96:
        return "(a number of over 28 digits)"
    try:
        text = str(value)
    except ValueError:  # a container holding such a number
        return "(too long to show)"
    return text if len(text) <= 30 else text[:29] + "…"


def chosen(values, allowed, what: str) -> list[str]:
    """A multiple-choice input as a list: every item one of `allowed`, at least one item."""
    values = [values] if isinstance(values, str) else list(values or [])
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise gr.Error(f"Unknown {what}s: {', '.join(map(_shown, unknown))}; choose from {', '.join(allowed)}.")
    if not values:
        raise gr.Error(f"Choose at least one {what}.")
    return values


def refuse_missing_smollm2(name) -> None:
    """A call naming SmolLM2 (its id or an alias) where it is not offered is told why and how to add it, the one
    message (models.missing()) on every endpoint that takes a model, not each view's "unknown model"."""
    if isinstance(name, str) and models.typed(name) == models.SMOLLM2 and models.resolve(name) is None:
        raise gr.Error(models.missing())


def smollm2_said_missing(preprocess):
    """A model choice's preprocess, for a component gradio checks against its choices before the handler runs:
    SmolLM2, where it is not offered (and so not a choice), gets its message rather than "not in the list of
    choices". (An instance's method, not a subclass: gradio writes a .pyi file beside any module that defines one.)"""
    def checked_first(payload):
        for value in payload if isinstance(payload, list) else [payload]:
            refuse_missing_smollm2(value)
        return preprocess(payload)

    return checked_first


def left_out(name: str, what: str) -> gr.Error:
    """The error for a view whose model is not shipped whole: why (checkpoints.damaged) and how to rebuild it."""
    reason = checkpoints.damaged().get(name, f"models/{name} is not shipped")
    return gr.Error(f"The {what} is not available: {reason}")


def full_stop(text: str) -> str:
    """A sentence as the page shows it, ended by a full stop unless its author already ended it (a workshop step
    titled "Which bank?" reads "Which bank?", not "Which bank?.")."""
    return text if text.rstrip().endswith((".", "?", "!", "…", ":", ";")) else text + "."


def stop_after(text: str) -> str:
    """The full stop a sentence needs after `text` (shown in bold, say): "" when `text` already ends one."""
    return full_stop(text)[len(text):]


def text_input(text, notices: list[str], max_chars: int = MAX_CHARS) -> str:
    """Free text from the UI or an API caller: a string, valid Unicode, at most `max_chars`."""
    if text is not None and not isinstance(text, str):
        raise gr.Error(f"Text should be a string, not {type(text).__name__}.")
    text, more = clean_text(text, max_chars)
    notices.extend(more)
    return text


_recorder = threading.local()  # the notices of the answer being computed on this thread (ui/cache.py keeps them)


_toasts = True  # False in the compute process (ui/compute.py): the server shows its computations' notices


def show_toasts(shown: bool) -> None:
    global _toasts
    _toasts = shown


def toast(notice: str) -> None:
    """A notice as a toast, its text shown as written: Gradio renders toasts as HTML, where FastText's n-gram
    `<st` or a link's `<b>` would be read as a tag and the rest of the notice lost."""
    if _toasts:
        gr.Warning(html.escape(notice, quote=False))


def warn(notices: list[str]) -> None:
    for notice in notices:
        toast(notice)
        recorder = getattr(_recorder, "notices", None)
        if recorder is not None:
            recorder.append(notice)


@contextmanager
def recording_notices():
    """The notices `warn` shows on this thread while the block runs, as a list."""
    previous, _recorder.notices = getattr(_recorder, "notices", None), []
    try:
        yield _recorder.notices
    finally:
        _recorder.notices = previous


# The download files of the last requests, in one folder of this process's own. Gradio copies a returned file
# into its own cache (emptied by the Blocks' delete_cache) as the event completes, so our copy is needed only
# briefly (and by an answer served again from ui/cache.py, which computes it anew once the file is gone);
# without a bound every request would leave one file in the temp folder for good.
_FILES_KEPT = 256
_files: deque[str] = deque()
_files_lock = threading.Lock()
_files_dir: Path | None = None


def things_to_try(examples: list[tuple[str, list]], targets: list) -> list:
    """Three to five one-click examples that make the tab's point: each sets `targets` in the browser (no request,
    so their change events run as if typed). Returns the clicks, for a tab whose inputs have no change event to
    chain its own event after them (`.then(...)`)."""
    clicks = []
    with gr.Row(elem_classes=["try-these"]):
        gr.Markdown("**Things to try:**", elem_classes=["try-label"])
        for label, values in examples:
            shown = values if len(targets) > 1 else values[0]
            clicks.append(gr.Button(label, size="sm", scale=0, min_width=80).click(
                None, None, targets, js=f"() => {orjson.dumps(shown).decode()}", queue=False, api_visibility="private"))
    return clicks


def json_file(data: dict, stem: str) -> str:
    """The data behind a view, as a file to download (Gradio's delete_cache removes it later).
    orjson (a gradio dependency) writes it ~10x faster than json.dump: this runs on every request."""
    with tempfile.NamedTemporaryFile("wb", suffix=".json", prefix=f"{stem}-", dir=downloads_dir(), delete=False) as f:
        f.write(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
    return _keep(f.name)


def downloads_dir() -> Path:
    """The folder of this process's download files, made on first use (the compute process shares the server's)."""
    global _files_dir
    with _files_lock:
        if _files_dir is None:
            _files_dir = Path(tempfile.mkdtemp(prefix="playground-downloads-"))
        return _files_dir


def is_download(value) -> bool:
    """Whether `value` is the path of a download file made by `json_file`."""
    return isinstance(value, str) and _files_dir is not None and value.startswith(str(_files_dir))


def _keep(path: str) -> str:
    """Remember a download file; delete the oldest beyond the last `_FILES_KEPT` (long since copied)."""
    with _files_lock:
        _files.append(path)
        stale = [_files.popleft() for _ in range(len(_files) - _FILES_KEPT)]
    for old in stale:
        Path(old).unlink(missing_ok=True)
    return path


def mark_when_changed(plot: gr.Plot, elem_id: str, inputs: list, what: str, button: str) -> None:
    """A figure dimmed under an out-of-date note in the browser when one of its inputs changes, until it is drawn
    again (figures.common.plot_stale_js)."""
    gr.on([c.change for c in inputs], None, js=plot_stale_js(elem_id, what, button), queue=False,
          api_visibility="private", show_progress="hidden")
    plot.change(None, js=plot_fresh_js(elem_id), queue=False, api_visibility="private", show_progress="hidden")
