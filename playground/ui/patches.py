"""Gradio 6.31's faults that the app works around by patching Gradio, each applied by an explicit call, each checked
first: a patch that no longer applies stops the app with a PatchError that names it, the Gradio installed and what to
do (ui/gradio_check.py). docs/upstream.md lists them all: the fault, the check, the test, the upstream report.

`skip_gradio_stub_rewrite()` runs before gradio's first import (ui/process.before_gradio); `apply()` when a process
is configured to serve the app (ui/process.configure); `fix_frontend(path, body)` where the frontend's files are
served (ui/pagecache.py). Importing this module changes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

from playground.ui.gradio_check import PatchError, count, fields, mentions, original, signature, source


def apply() -> None:
    """Gradio patched for serving the app, each patch checked before it applies (a PatchError if it no longer does):
    the frontend's fixed files (fixed where they are served), no per-session config copies, seated sessions evicted
    last, no component rebuilt for a gr.skip() and each constructor's signature read once, the server closed without
    a race on its stop event, and the import hook's target. A second call checks again and changes nothing more."""
    check_frontend()
    _check_stub_rewrite()
    _keep_no_deep_link_copies()
    _evict_the_unseated_first()
    _skip_without_rebuilding()
    _read_each_signature_once()
    _stop_in_the_servers_loop()


# Gradio 6.31's frontend, fixed where it is served (ui/pagecache.py): its main bundle (/assets/Blocks-<hash>.js) and
# the module that builds the page's tree (/assets/core-<hash>.js). Each fix is a replacement of one exact piece of
# the minified file, found there exactly as often as Gradio 6.31 has it, or the app does not start (check_frontend,
# from apply(); fix_frontend checks each file it fixes again).
#
# The dispatch. `dispatch(e)` runs the dependencies that listen to an event, one after another in the order they
# were wired (the app relies on it: a model's new slider bounds are set before its view reads the sliders). Two
# faults, each measured on a page that opens a lecturer's link (a sentence and a selected word, whose change each
# view follows):
# - A dependency with trigger_mode "always_last" (Gradio's default for change events, and every model view's)
#   that is triggered while it runs waits, and when it ends the page dispatches the *whole event* again, so every
#   other listener of that trigger runs again too. Listeners that take different times then keep deferring and
#   re-sending each other: under load, pages re-sent fill-mask, embeddings, tokenize, gradient flow and attention
#   every few seconds, for ever (issue #31).
# - After every status of every event (pending, each streamed step, complete) it hands each component's loading
#   status to its component again, each found by a walk of the page's tree: a page with ~500 components spent
#   1.3 s of its main thread in it for one sentence applied to every tab.
# Fixed, a dependency that waited runs again alone, with the event's data, and a component is handed its loading
# status only when it changed.
_AGAIN_WHOLE, _AGAIN_ALONE = (b"this.queue.delete(r.id),this.dispatch(e)",
                              b"this.queue.delete(r.id),this.dispatch({...e,type:`fn`,fn_index:r.id})")
_EVERY_STATUS = b"Object.entries(this.loading_stati.current).map("
_CHANGED_STATUS = (b"Object.entries(this.loading_stati.current).filter(([e,t])=>{let s=JSON.stringify(t),m=this._sent||"
                   b"(this._sent=new Map);return m.get(e)!==s&&(m.set(e,s),!0)}).map(")
# The page's opening. Two walks made every page load quadratic in its size (this app: ~1,060 components and ~430
# dependencies; Chromium's profile of one load, 2.4 s of script, had 1.2 s in them):
# - `set_event_args` is called for every target of every dependency and first fetches that component's state, by a
#   walk of the whole tree from its root, before it looks whether the dependency has event arguments at all (this
#   app's have none). Fixed, it returns first when there are none: what it returned then, a function that does
#   nothing, and nothing else.
# - `find_attached_events` runs for every node of the tree and scans every dependency's targets for that node's id.
#   Fixed, the targets are indexed by id once per build of the tree (`postprocess`), in the dependencies' order,
#   each dependency's first event on that id, as the scan found them.
_STATE_FIRST = b"async set_event_args(e,t){let n={},r=await this.get_state_cb?.(e);"
_ARGS_FIRST = (b"async set_event_args(e,t){if(!t||Object.keys(t).length===0)return()=>{};"
               b"let n={},r=await this.get_state_cb?.(e);")
_TREE_BUILT = b"postprocess(e){this.root=this.traverse(e,["
_TREE_BUILT_AFRESH = b"postprocess(e){this._attached=null;this.root=this.traverse(e,["
_SCAN_EVERY_DEPENDENCY = (b"find_attached_events(e,t){let n=t.filter(t=>t.targets.find(([t])=>t===e.id)).map(t=>{let n="
                          b"t.targets.find(([t])=>t===e.id);return n?n[1]:null}).filter(Boolean);")
_LOOK_UP_THE_INDEX = (b"find_attached_events(e,t){let m=this._attached;if(!m){m=this._attached=new Map;for(let d of t){"
                      b"let s=new Set;for(let[i,v]of d.targets)s.has(i)||(s.add(i),v&&(m.get(i)??m.set(i,[]).get(i))"
                      b".push(v))}}let n=[...m.get(e.id)??[]];")
# Each answer. For every component an event's status or answer reaches (`update_state`) and every input it reads
# (`get_state`), Gradio finds the component by a walk of the tree from its root (`Z`): about 15% of a page's main
# thread when a sentence is applied to every tab. Fixed, the walk is made once and each component's path kept; a
# kept path still in the tree (each node still its parent's child at the same place) is the answer, as ids are
# unique; anything else (a re-rendered part, an id not seen) walks the tree afresh.
_WALK_PER_LOOKUP = (b"function Z(e,t){if(e.id===t)return e;if(e.children)for(let n of e.children){let e=Z(n,t);if(e)"
                    b"return e}return null}")
_KEPT_PATHS = (b"function Z(e,t){let c=Z.c||(Z.c=new WeakMap),m=c.get(e),h=m&&m.get(t);if(h){let[n,x]=h,k=n.length-1,"
               b"o=n[k].id===t;for(let i=1;o&&i<=k;i++)o=n[i-1].children?.[x[i]]===n[i];if(o)return n[k]}m=new Map;"
               b"c.set(e,m);let w=(d,n,x)=>{m.has(d.id)||m.set(d.id,[n,x]);d.children&&d.children.forEach((g,i)=>"
               b"w(g,[...n,g],[...x,i]))};w(e,[e],[0]);h=m.get(t);return h?h[0][h[0].length-1]:null}")


@dataclass(frozen=True)
class Fix:
    """One replacement in a minified file of Gradio's frontend: `old`, found there exactly `count` times, by `new`."""
    patch: str      # its name (ui/gradio_check.PATCHES, docs/upstream.md)
    old: bytes
    new: bytes
    count: int = 1


FIXES = {"/assets/Blocks-": (Fix("always-last-alone", _AGAIN_WHOLE, _AGAIN_ALONE, count=2),
                             Fix("changed-status-only", _EVERY_STATUS, _CHANGED_STATUS),
                             Fix("event-args-first", _STATE_FIRST, _ARGS_FIRST)),
         "/assets/core-": (Fix("attached-events-index", _TREE_BUILT, _TREE_BUILT_AFRESH),
                           Fix("attached-events-index", _SCAN_EVERY_DEPENDENCY, _LOOK_UP_THE_INDEX),
                           Fix("kept-paths", _WALK_PER_LOOKUP, _KEPT_PATHS))}


def frontend():
    """The folder of Gradio's frontend as Gradio ships it (a Path), which the app serves with FIXES applied."""
    import gradio

    return Path(gradio.__file__).parent / "templates" / "frontend"


def shipped(prefix: str) -> Path:
    """Gradio's own file of the frontend that a prefix of FIXES names, as Gradio ships it (a Path: `/assets/core-`
    is its `templates/frontend/assets/core-<hash>.js`); a FileNotFoundError unless there is exactly one."""
    found = sorted(frontend().glob(prefix.lstrip("/") + "*.js"))
    if len(found) != 1:
        raise FileNotFoundError(f"Gradio ships {len(found)} files {prefix.lstrip('/')}*.js in {frontend()}, not one")
    return found[0]


def check_frontend() -> None:
    """Every fix of FIXES applies to the files Gradio ships: each file is there, with each replaced text exactly as
    often as expected (a PatchError otherwise: Gradio's unfixed page is never served silently)."""
    for prefix, fixes in FIXES.items():
        try:
            file = shipped(prefix)
        except FileNotFoundError as err:
            raise PatchError(fixes[0].patch, str(err)) from None
        fix_frontend(f"{prefix.rsplit('/', 1)[0]}/{file.name}", file.read_bytes())


def fix_frontend(path: str, body: bytes) -> bytes:
    """`body` of the frontend's file at `path`, with Gradio's fixes (above) if `path` is one of the fixed files; any
    other file unchanged. A fixed file without each replaced text exactly as often as expected is a PatchError."""
    if not path.endswith(".js"):
        return body
    for prefix, fixes in FIXES.items():
        if path.startswith(prefix):
            for fix in fixes:
                count(fix.patch, body, fix.old, fix.count, f"Gradio's {path}")
                body = body.replace(fix.old, fix.new)
    return body


_STUB_PROBLEMS: list[PatchError] = []  # what the import hook found wrong in gradio.component_meta (apply raises it)


def skip_gradio_stub_rewrite() -> None:
    """gradio 6 regenerates the .pyi type stubs of every component class at each import, parsing the
    component's source file with `ast` each time: 2.5 s of CPU of a 6 s import here, for files only
    type checkers read (docs/upstream/pyi-at-import.md). Turn that one function into a no-op as its module loads
    (nothing else in gradio calls it); startup is one of the budgets. A gradio.component_meta without that function
    as the app knows it is left as it is, and apply() raises what was wrong."""
    import importlib.abc
    import importlib.machinery

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "gradio.component_meta":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            exec_module = spec.loader.exec_module

            def exec_and_patch(module):
                exec_module(module)
                try:
                    _check_stub_target(module)
                except PatchError as err:
                    _STUB_PROBLEMS.append(err)
                    return

                def no_stubs(*args, **kwargs) -> None:
                    return None

                no_stubs.gradio = module.create_or_modify_pyi
                module.create_or_modify_pyi = no_stubs

            spec.loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, Finder())


def _check_stub_target(module) -> None:
    """gradio.component_meta (`module`) has create_or_modify_pyi as the hook knows it, called by name when a component
    class is made."""
    signature("pyi-at-import", module, "create_or_modify_pyi", ("component_class", "class_name", "events"))
    mentions("pyi-at-import", module.ComponentMeta.__new__, "create_or_modify_pyi(", "ComponentMeta.__new__")


def _check_stub_rewrite() -> None:
    """What the import hook found wrong, or the hook's target checked now (gradio imported before the hook: nothing
    was patched, yet a Gradio without the target still fails here)."""
    if _STUB_PROBLEMS:
        raise _STUB_PROBLEMS[0]
    from gradio import component_meta

    _check_stub_target(component_meta)


# The fields of a session the app reads and writes (the copy of __setitem__ below, ui/queuepath.py)
_SESSION_FIELDS = ("blocks_config", "state_data", "_state_ttl")


class _NoComponents:
    """A Blocks as SessionState.__init__ reads it, with no component to copy the config of: Gradio 6.31 builds
    `config_values` from the components in `blocks.blocks` only. Anything else is the Blocks' own."""

    def __init__(self, blocks):
        self._blocks = blocks
        self.blocks = MappingProxyType({})

    def __getattr__(self, name):
        return getattr(self._blocks, name)


def _keep_no_deep_link_copies() -> None:
    """Each Gradio session builds `config_values`: the config of every component (416 here: 0.66 MB), and
    keeps a copy of every input and output value since, for gr.DeepLinkButton (their only reader: the
    /gradio_api/deep_link route). This app makes its own links (ui/view.py) and has no such button, so the
    copies only cost: each session held the last figure, table and JSON of every view it had used (the server
    grew with every visitor up to the session capacity), and building the configs took 58% of the server's
    CPU under a lecture hall's load, where every API call without a session is a new session (py-spy: about
    60 ms of a 105 ms request). Sessions keep their components' state and gr.State; just not the copies (an
    update of a component's props still records that component, as Gradio does). The session is made by Gradio's own
    __init__, handed the Blocks without its components (so every field Gradio sets is there, none is dropped), and
    records a component without building its config (the first time a session is sent a component's value: 70
    configs for a followed view applied whole, 11 ms of the 16 ms Gradio spent on each of 200 followers' answers)."""
    from gradio.state_holder import SessionState

    keep_no_config_copies(SessionState)


def keep_no_config_copies(cls) -> None:
    """`_keep_no_deep_link_copies` on `cls` (gradio's SessionState, or a class made like it), checked first."""
    import datetime

    from gradio.components import State

    patch = "session-config-copies"
    gradio_init = signature(patch, cls, "__init__", ("self", "blocks"))
    source(patch, cls, "__setitem__", "49a413d82fc2")    # gradio 6.31's, which `setitem` copies
    signature(patch, cls, "_update_config", ("self", "key"))
    signature(patch, cls, "_update_value_in_config", ("self", "key", "value"))
    _check_no_copies(cls, gradio_init)
    if cls.__dict__.get("_keeps_no_copies", False):   # a second call in one process
        return

    def init(self, blocks):
        gradio_init(self, _NoComponents(blocks))

    def setitem(self, key, value) -> None:      # gradio 6.31's, less the config of the block (0.2-0.4 ms each)
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value

    def update_config(self, key) -> None:
        return None

    def update_value_in_config(self, key, value) -> None:
        return None

    for name, replacement in (("__init__", init), ("__setitem__", setitem), ("_update_config", update_config),
                              ("_update_value_in_config", update_value_in_config)):
        replacement.gradio = original(cls, name)
        setattr(cls, name, replacement)
    cls._keeps_no_copies = True


def _check_no_copies(cls, gradio_init) -> None:
    """Gradio's SessionState.__init__, handed a Blocks without components, runs, copies no config and sets the fields
    the app reads and writes."""
    made = []

    class Config:   # a BlocksConfig with one component, which records any config built
        blocks = {1: None}

        def config_for_block(self, *args):
            made.append(args)
            return {}

    probe, stand_in = object.__new__(cls), _NoComponents(SimpleNamespace(default_config=Config(), blocks={1: None}))
    try:
        gradio_init(probe, stand_in)
    except Exception as err:  # noqa: BLE001 - any failure means the stand-in no longer fits Gradio's __init__
        raise PatchError("session-config-copies", f"SessionState.__init__ fails on a Blocks without components "
                                                  f"({err!r})") from err
    if made or getattr(probe, "config_values", None):
        raise PatchError("session-config-copies", "SessionState.__init__ builds configs of components not in "
                                                  "blocks.blocks: handing it none no longer spares the copies")
    if any(value is stand_in for value in vars(probe).values()):
        raise PatchError("session-config-copies", "SessionState keeps the Blocks it is made with: every session "
                                                  "would keep the stand-in without components")
    fields("session-config-copies", probe, _SESSION_FIELDS, "SessionState")


_SEATS: set[int] = set()     # the gr.State ids that hold a page's place in a room (keep_sessions_holding)


def keep_sessions_holding(*states) -> None:
    """A session whose `states` hold a value (a page's place in a room: a student's membership, the lecturer's
    key) is evicted last when Gradio's session store is full (`_evict_the_unseated_first`)."""
    _SEATS.update(state._id for state in states)


def _evict_the_unseated_first() -> None:
    """Gradio keeps at most `state_session_capacity` sessions and, beyond it, drops the least recently used, gr.State
    and all. In a class that drops somebody's place in the room: the lecturer's key (then "Open a room first"), or a
    following student, whose page then silently stops following; and every plain API call (a gradio_client call
    without a session) is a session of its own, so callers pushed the class's pages out. Beyond the capacity this
    drops the least recently used session that holds no seat, and a seated one only when every session is seated.
    A copy of Gradio 6.31's StateHolder.update with another victim, checked against Gradio's source at start."""
    from gradio.state_holder import StateHolder

    patch = "seated-eviction"
    source(patch, StateHolder, "update", "609d73e488ce")    # gradio 6.31's, which `update` copies
    fields(patch, StateHolder(), ("lock", "session_data", "capacity", "time_last_used"), "StateHolder")
    if getattr(StateHolder, "_evicts_unseated_first", False):
        return

    def seated(session) -> bool:
        return any(session.state_data.get(i) for i in _SEATS)

    def update(self, session_id: str) -> None:
        with self.lock:
            if session_id in self.session_data:
                self.session_data.move_to_end(session_id)
            while len(self.session_data) > self.capacity:
                victim = next((k for k, v in self.session_data.items() if k != session_id and not seated(v)),
                              next(iter(self.session_data)))
                del self.session_data[victim]
                self.time_last_used.pop(victim, None)

    update.gradio = StateHolder.update
    StateHolder.update = update
    StateHolder._evicts_unseated_first = True


def _skip_without_rebuilding() -> None:
    """Gradio 6.31 turns every update an event returns into a new instance of its component, with its config,
    even a bare gr.skip(), which changes nothing (about 0.4 ms each: the constructor's signature is inspected
    every time). The link's restore answers every page that opens with about 60 of them, one per view it can
    restore (py-spy: 28 ms of the server per page, 70% of it rebuilding); a generation's every streamed step
    has three. A bare skip now passes through as the `{"__type__": "update"}` the page reads as "unchanged";
    the other outputs are postprocessed by Gradio as before."""
    import copy

    from gradio.blocks import Blocks
    from gradio.helpers import skip

    patch = "skip-without-rebuild"
    source(patch, Blocks, "postprocess_data", "5f6a865a3446")   # gradio 6.31's, whose work on plain values is mirrored
    if not _bare_skip(skip()):
        raise PatchError(patch, f"gr.skip() is {skip()!r}, not a bare update")
    if getattr(Blocks, "_skips_without_rebuilding", False):  # a second call in one process
        return
    postprocess_data = Blocks.postprocess_data

    async def without_skips(self, block_fn, predictions, state):
        n = len(block_fn.outputs)
        if n < 2 or block_fn.batch or not isinstance(predictions, (list, tuple)) or len(predictions) != n:
            return await postprocess_data(self, block_fn, predictions, state)
        output = [{"__type__": "update"} for _ in range(n)]
        rest = []
        for i, value in enumerate(predictions):
            if _bare_skip(value):
                continue
            if block_fn.postprocess and _plain(block_fn.outputs[i], value):
                try:          # as Gradio postprocesses it, on the session's instance, without its thread hops
                    block = block_fn.outputs[i]
                    output[i] = (state.get(block._id, block) if state is not None else block).postprocess(value)
                    continue
                except Exception:  # noqa: BLE001 - Gradio's own path says what is wrong, as it would have
                    pass
            rest.append(i)
        if len(rest) == n:
            return await postprocess_data(self, block_fn, predictions, state)
        if rest:
            some = copy.copy(block_fn)
            some.outputs = [block_fn.outputs[i] for i in rest]
            values = [predictions[i] for i in rest]    # one output left: its bare value (Gradio wraps a single one)
            for i, value in zip(rest, await postprocess_data(self, some, values[0] if len(rest) == 1 else values,
                                                             state)):
                output[i] = value
        return output

    without_skips.gradio = postprocess_data     # Gradio's own, which tests compare with
    Blocks.postprocess_data = without_skips
    Blocks._skips_without_rebuilding = True


def _read_each_signature_once() -> None:
    """Gradio 6.31 reads a component constructor's signature (inspect.getfullargspec, about 0.1 ms) every time an
    event's update rebuilds the component for its session: a followed view's first answer rebuilds four (the tabs,
    the link's banner, the follow bar and its button), so 200 followers 800 times. A function's signature does not
    change: each is read once."""
    import functools
    import inspect

    from gradio import component_meta

    patch = "signature-once"
    if getattr(component_meta, "inspect", None) is not inspect and not getattr(component_meta.inspect, "reads_once",
                                                                               False):
        raise PatchError(patch, "gradio.component_meta does not use the inspect module as `inspect`")
    mentions(patch, component_meta.updateable, "inspect.getfullargspec(", "gradio.component_meta.updateable")
    if getattr(component_meta.inspect, "reads_once", False):
        return

    class ReadOnce:
        reads_once = True
        getfullargspec = staticmethod(functools.cache(inspect.getfullargspec))

        def __getattr__(self, name):
            return getattr(inspect, name)

    component_meta.inspect = ReadOnce()


def _stop_in_the_servers_loop() -> None:
    """Gradio 6.31's close() sets the app's stop event, an asyncio.Event that every open stream of answers waits on,
    from the thread that calls it, while the server's loop adds and removes those waiters: once in a test run it
    failed with "deque mutated during iteration", after marking the app stopped and before closing the server, so
    the port stayed open. The event is set in its own loop first; close() then finds it set."""
    import asyncio

    from gradio.blocks import Blocks

    patch = "close-in-loop"
    signature(patch, Blocks, "close", ("self", "verbose"))
    mentions(patch, original(Blocks, "close"), "self.app.stop_event.set()", "Blocks.close")
    if getattr(Blocks.close, "stops_in_its_loop", False):
        return
    close = Blocks.close

    def stop_then_close(self, *args, **kwargs):
        event = getattr(getattr(self, "app", None), "stop_event", None)
        loop = getattr(event, "_loop", None)       # the loop it was first awaited in (None: never awaited)
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:                       # called from a thread without a loop (a script, a test)
            here = None
        if loop is not None and loop.is_running() and loop is not here:
            async def stop():
                event.set()
            try:
                asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
            except Exception:  # noqa: BLE001 - the loop ended meanwhile: Gradio's own close does the rest
                pass
        return close(self, *args, **kwargs)

    stop_then_close.stops_in_its_loop = True
    stop_then_close.gradio = close
    Blocks.close = stop_then_close


def _bare_skip(value) -> bool:
    return type(value) is dict and value == {"__type__": "update"}


def _plain(block, value) -> bool:
    """A plain value (text, a number, a truth value, or a list of them for a CheckboxGroup or Dropdown) for a
    component whose postprocess only casts it. Gradio 6.31 postprocesses each output in a worker thread and then
    looks for files in it in another (about four thread hops a value); a followed view applied whole is 70 such
    values, 14 ms of Gradio's work a page, 3 s for 200 followers' answers at once. These are postprocessed inline,
    by the same `postprocess`. Lists too: two of the view's values are (the tokenizers and the cells chosen), and
    200 answers waiting for their worker threads in turn held every one of them back, the first as the last."""
    import gradio as gr

    kind = type(block)
    if kind in (gr.CheckboxGroup, gr.Dropdown) and type(value) is list:
        return all(type(item) in (str, int, float) for item in value)
    return kind in (gr.Textbox, gr.Number, gr.Slider, gr.Checkbox, gr.Radio, gr.Dropdown) and (
        value is None or type(value) in (str, int, float, bool))
