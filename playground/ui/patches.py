"""What the app changes in its libraries and its process, in one place, each applied by an explicit call.

`before_gradio()` must run before gradio is first imported (app.py calls it first thing); `apply()` runs
from `build_demo()`. Importing this module changes nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA = Path("/data")  # where a Hugging Face Space mounts its persistent storage, when it has some


def before_gradio() -> None:
    """A Space's persistent storage used, no telemetry, no hub call unless the app may use the Hub (a Space, or
    PLAYGROUND_HUB=1: SmolLM2's original is downloaded there, playground/hub.py), and a faster gradio import. Only
    takes full effect before gradio (and huggingface_hub, which reads HF_HOME and HF_HUB_OFFLINE once, at its
    import) is imported; afterwards the stub patch is skipped."""
    from playground import hub

    persistent_storage()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if not hub.enabled():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _files_of_this_process()
    if "gradio" not in sys.modules:
        _skip_gradio_stub_rewrite()


def persistent_storage() -> None:
    """On a Space with persistent storage, the Hub's cache and the class's rooms are kept in it: a Space's own disk
    is emptied at each restart, which downloaded SmolLM2's original again (270 MB) and lost every open room. A
    variable set in the Space's settings wins, and a PostgreSQL DATABASE_URL keeps the rooms where it says. Before
    huggingface_hub is imported: it reads HF_HOME once, at its import."""
    if not os.environ.get("SPACE_ID") or not (DATA.is_dir() and os.access(DATA, os.W_OK)):
        return
    os.environ.setdefault("HF_HOME", str(DATA / ".huggingface"))
    if not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("POLLS_DB", str(DATA / "polls.sqlite3"))


def _files_of_this_process() -> None:
    """Gradio writes a view's files (a CSV, a PNG) into one folder shared by every app on the machine, each named by
    a hash of its content, and an app deletes the files it made when it stops (ui/demo.py: delete_cache). Copies of
    this app on one machine (docs/deploying.md: several behind nginx) make the same files under the same names, so a
    copy that stopped deleted the files the others' kept answers still named: their downloads were gone. Each process
    gets a folder of its own in Gradio's, removed when it exits, unless GRADIO_TEMP_DIR says where."""
    import atexit
    import shutil
    import tempfile

    if "GRADIO_TEMP_DIR" in os.environ:
        return
    shared = Path(tempfile.gettempdir()) / "gradio"
    shared.mkdir(exist_ok=True)
    own = tempfile.mkdtemp(prefix=f"nlp-playground-{os.getpid()}-", dir=shared)
    os.environ["GRADIO_TEMP_DIR"] = own
    pid = os.getpid()
    atexit.register(lambda: shutil.rmtree(own, ignore_errors=True) if os.getpid() == pid else None)


def apply() -> None:
    """The process-wide settings of a serving app: two malloc arenas, no per-session value copies, seated sessions
    evicted last, no component rebuilt for a gr.skip() and each constructor's signature read once, Python's lock
    handed over sooner, the server closed without a race on its stop event."""
    _share_malloc_arenas()
    _keep_no_deep_link_copies()
    _evict_the_unseated_first()
    _skip_without_rebuilding()
    _read_each_signature_once()
    _stop_in_the_servers_loop()
    _hand_the_lock_over_sooner()


# Gradio 6.31's frontend, fixed where it is served (ui/pagecache.py): its main bundle (/assets/Blocks-<hash>.js) and
# the module that builds the page's tree (/assets/core-<hash>.js). Each fix is a replacement of one exact piece of
# the minified file; `fix_frontend` leaves a file that lacks the piece unchanged (tests/test_browser_dispatch.py
# fails when Gradio's files no longer have them).
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
FIXES = {"/assets/Blocks-": ((_AGAIN_WHOLE, _AGAIN_ALONE), (_EVERY_STATUS, _CHANGED_STATUS),
                            (_STATE_FIRST, _ARGS_FIRST)),
         "/assets/core-": ((_TREE_BUILT, _TREE_BUILT_AFRESH), (_SCAN_EVERY_DEPENDENCY, _LOOK_UP_THE_INDEX),
                           (_WALK_PER_LOOKUP, _KEPT_PATHS))}


def frontend():
    """The folder of Gradio's frontend as Gradio ships it (a Path), which the app serves with FIXES applied."""
    import gradio

    return Path(gradio.__file__).parent / "templates" / "frontend"


def shipped(prefix: str):
    """Gradio's own file of the frontend that a prefix of FIXES names, as Gradio ships it (a Path: `/assets/core-`
    is its `templates/frontend/assets/core-<hash>.js`)."""
    return next(frontend().glob(prefix.lstrip("/") + "*.js"))


def fix_frontend(path: str, body: bytes) -> bytes:
    """`body` of the frontend's file at `path`, with Gradio's fixes (above) if `path` is one of the fixed files; any
    other file unchanged (tests/test_browser_dispatch.py checks that the files Gradio serves are fixed)."""
    if not path.endswith(".js"):
        return body
    for prefix, fixes in FIXES.items():
        if path.startswith(prefix):
            for old, new in fixes:
                body = body.replace(old, new)
    return body


def _skip_gradio_stub_rewrite() -> None:
    """gradio 6 regenerates the .pyi type stubs of every component class at each import, parsing the
    component's source file with `ast` each time: 2.5 s of CPU of a 6 s import here, for files only
    type checkers read. Turn that one function into a no-op as its module loads (nothing else in
    gradio calls it); startup is one of the budgets."""
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
                module.create_or_modify_pyi = lambda *args, **kwargs: None

            spec.loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, Finder())


def _share_malloc_arenas(arenas: int = 2) -> None:
    """glibc's malloc gives each thread that allocates its own arena, up to 8 per core. Gradio runs the
    handlers on a pool of up to 40 threads, and memory freed in one arena does not serve another thread,
    so the server's resident memory kept growing with the requests it served: over 2,400 requests from 96
    sessions, +20% with glibc's default and +8% with two arenas (what remains is the sessions' own state,
    capped at ui.demo.SESSIONS). Two arenas serve the two queue workers; this is MALLOC_ARENA_MAX, set from inside,
    for the arenas made from now on. Not glibc (macOS, Windows, musl): nothing to do."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    M_ARENA_MAX = -8  # malloc.h
    mallopt(M_ARENA_MAX, arenas)


def _keep_no_deep_link_copies() -> None:
    """Each Gradio session builds `config_values`: the config of every component (416 here: 0.66 MB), and
    keeps a copy of every input and output value since, for gr.DeepLinkButton (their only reader: the
    /gradio_api/deep_link route). This app makes its own links (ui/view.py) and has no such button, so the
    copies only cost: each session held the last figure, table and JSON of every view it had used (the server
    grew with every visitor up to the session capacity), and building the configs took 58% of the server's
    CPU under a lecture hall's load, where every API call without a session is a new session (py-spy: about
    60 ms of a 105 ms request). Sessions keep their components' state and gr.State; just not the copies (an
    update of a component's props still records that component, as Gradio does). The session is made as
    gradio 6.31's SessionState.__init__ makes it, less the configs, and records a component without building its
    config (the first time a session is sent a component's value: 70 configs for a followed view applied whole,
    11 ms of the 16 ms Gradio spent on each of 200 followers' answers)."""
    import datetime
    import os
    from copy import copy

    from gradio.components import State
    from gradio.state_holder import SessionState

    if getattr(SessionState, "_keeps_no_copies", False):  # a second build_demo() in one process
        return

    def init(self, blocks):
        self.blocks_config = copy(blocks.default_config)
        self.config_values = {}
        self.state_data = {}
        self._state_ttl = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600

    def setitem(self, key, value) -> None:      # gradio 6.31's, less the config of the block (0.2-0.4 ms each)
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value

    SessionState.__init__ = init
    SessionState.__setitem__ = setitem
    SessionState._update_config = lambda self, key: None
    SessionState._update_value_in_config = lambda self, key, value: None
    SessionState._keeps_no_copies = True


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
    drops the least recently used session that holds no seat, and a seated one only when every session is seated."""
    from gradio.state_holder import StateHolder

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

    if getattr(Blocks, "_skips_without_rebuilding", False):  # a second build_demo() in one process
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


SWITCH_INTERVAL = 0.0002  # seconds a thread holding Python's lock keeps it when another asks (Python's default: 0.005)


def _hand_the_lock_over_sooner() -> None:
    """A model's step is ~50 torch operations; each lets go of Python's lock (the GIL) while it computes and must
    take it back before the next, and a thread that asks for the lock waits until its holder has had it for the
    switch interval. So a generation beside a busy thread (the server's event loop giving out kept answers, another
    worker drawing a figure) waits up to 5 ms about 10,000 times: measured on the 2-core VM, a new prompt's 200 tokens
    took 0.62 s alone and 110 s beside a thread running Python, 5.3 s with 0.2 ms. Threads running Python then
    switch more often (a few microseconds each time)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
