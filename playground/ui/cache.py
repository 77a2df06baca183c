"""Answers shared by every user: a bounded cache of what an event returned for the same inputs.

A lecture hall asks the same questions: the defaults, the tour's steps, the lecturer's example. Every
event whose inputs hold no per-session state is a pure function of its inputs (seeded ones included:
each seeded computation takes its own torch.Generator), so its answer can be served again to anyone who
sends the same inputs, without waiting for a model. The key is the event's handler, every input, and the
fingerprint of the shipped checkpoints: two requests that differ in anything are never mixed. `prewarm`
computes the answers to the page's initial values when the app starts serving.

What an answer carries besides its outputs is kept too: the notices the handler showed (replayed on a
hit) and, for a generator, only its final output (a hit answers at once). Outputs that are per-session
state (gr.State) are copied for each hit, so no two sessions hold the same object, and so are updates
(gr.update), which gradio's postprocessing takes apart. An answer whose
download file is gone (ui/common.json_file keeps a bounded number) is computed again.

Misses wait for a model worker (ui/workers.py); hits never wait: the queue dispatches every event at once and
only a miss takes a worker. The workers are two pools, so that a quick computation never waits behind a
slow one: an event whose computations take long (generating 200 tokens) takes the slow pool's. A miss whose inputs
are plain data computes where `compute` says (ui/compute.py: in a process beside the server's when it serves).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import inspect
import threading
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import orjson

from playground import checkpoints
from playground.lru import Bounded
from playground.ui import common
from playground.ui.compute import HERE, Here
from playground.ui.workers import Workers


@dataclass(frozen=True)
class Answer:
    outputs: tuple
    notices: tuple[str, ...]
    state: tuple[int, ...]  # positions of the outputs that are gr.State (copied for each hit)


def fingerprint() -> str:
    """The shipped checkpoints as they are: a hash of every card and config (a retrained model changes it)."""
    digest = hashlib.sha256()
    for path in sorted(checkpoints.MODELS_DIR.glob("*/*.json")):
        digest.update(path.relative_to(checkpoints.MODELS_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class AnswerCache:
    """The answers of the last inputs, up to `max_bytes` together (playground/lru.py), least recently used dropped
    first; thread-safe. An answer whose download file is gone is dropped on its next hit and computed again."""

    def __init__(self, max_bytes: int = 96 << 20, max_items: int | None = None, compute: Here = HERE):
        self.version = fingerprint()
        self.compute = compute  # where misses compute (ui/compute.py)
        self.functions: dict[str, object] = {}  # every wrapped function by its handler's name (ui/compute.Child)
        self.workers: dict[int, Workers] = {}    # the pools its functions compute under
        self._answers: Bounded[Answer] = Bounded(max_bytes, max_items,
                                                 valid=lambda answer: all(map(_file_exists, answer.outputs)))
        self._inflight: dict[bytes, threading.Event] = {}  # keys being computed now -> set when done
        self._inflight_lock = threading.Lock()

    @property
    def hits(self) -> int:
        return self._answers.hits

    @property
    def misses(self) -> int:
        return self._answers.misses

    @property
    def bytes(self) -> int:
        return self._answers.bytes

    def key(self, handler: str, args: tuple, kwargs: dict) -> bytes | None:
        """The request's identity, or None when an input cannot be written down exactly (never cached)."""
        # progress is no input (Gradio passes it in its place among the arguments)
        args = [v for v in args if not isinstance(v, gr.Progress)]
        inputs = {k: v for k, v in kwargs.items() if not isinstance(v, gr.Progress)}
        try:
            return orjson.dumps([self.version, handler, args, inputs], option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:
            return None

    def get(self, key: bytes | None) -> Answer | None:
        return self._answers.get(key)

    @contextlib.contextmanager
    def first(self, key: bytes | None):
        """Whether this caller computes `key` (True) or another caller already is and has now finished (False:
        look again). A lecturer's link opened by a whole class at once asks the same new question many times
        in the same second: it is computed once, the others wait for that answer instead of computing it again."""
        if key is None:
            yield True
            return
        with self._inflight_lock:
            running = self._inflight.get(key)
            if running is None:
                running = self._inflight[key] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:
            running.wait(FIRST_WAIT)
            yield False
            return
        try:
            yield True
        finally:
            with self._inflight_lock:
                del self._inflight[key]
            running.set()

    def computing(self, key: bytes | None) -> bool:
        """Whether another caller is computing `key` now (a caller of `first` would wait for it)."""
        with self._inflight_lock:
            return key is not None and key in self._inflight

    def put(self, key: bytes | None, answer: Answer) -> None:
        self._answers.put(key, answer)

    def __len__(self) -> int:
        return len(self._answers)

    def spent(self) -> dict[str, dict]:
        """Where the misses' time went, per handler: computations, mean seconds waiting for a worker, computing, and
        of CPU (the compute process's included)."""
        spent = {}
        for workers in self.workers.values():
            for handler, (n, waiting, computing, cpu) in list(workers.spent.items()):
                spent[handler] = {"computations": n, "waiting": waiting / n, "computing": computing / n, "cpu": cpu / n}
        return spent

    def _where(self, key: bytes | None) -> Here:
        """Where a miss computes: inputs that are plain data (they have a key) may cross to the compute process."""
        return self.compute if key is not None else HERE

    def wrap(self, fn, n_outputs: int, state: tuple[int, ...], workers: Workers, cacheable: bool = True,
             waiting=None, slow: bool = False, batched: bool = False):
        """`fn` answering from the cache when it can and otherwise computing under one of `workers`; the
        same signature (gradio reads it, e.g. for gr.Progress) and the same kind (function or generator).
        Not `cacheable` (it reads per-session state): always computed, under a worker all the same, in this process.
        A miss whose inputs are plain data (it has a key) computes where `self.compute` says. `waiting(ahead, beside)`:
        for a generator, the outputs it shows first when its computation has to wait for a worker (ahead of it: how
        many) or will share the cores with others of its pool (beside it: how many), or (0, 0) when another caller
        is computing the same inputs and it waits for that answer, so the page says so at once. `slow`: its
        computations take seconds, in the slow pool from the first (Workers.expect_slow); `batched`: it generates."""
        handler = f"{fn.__module__}.{fn.__qualname__}@{id(fn)}"  # events that share a handler share its answers
        self.functions[handler] = fn  # what the compute process may run, by this name
        self.workers[id(workers)] = workers
        if slow:
            workers.expect_slow(handler)
        if batched:
            workers.expect_batched(handler)

        def key_of(args, kwargs) -> bytes | None:
            return self.key(handler, args, kwargs) if cacheable else None

        def remember(outputs, notices: list[str]) -> Answer:
            values = (outputs,) if n_outputs == 1 else tuple(outputs)
            return Answer(tuple(_detached(v) for v in values), tuple(notices), state)

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def cached_generator(*args, **kwargs):
                key = key_of(args, kwargs)
                answer = self.get(key)
                if answer is not None:
                    yield replay(answer, n_outputs)
                    return
                if waiting is not None and self.computing(key):  # the same question, asked a moment ago: say so
                    yield waiting(0, 0)  # before waiting for its answer (a class opening one link: many seconds)
                with self.first(key) as mine:
                    answer = None if mine else self.get(key)
                    if answer is not None:  # another caller's computation of the same inputs has answered
                        yield replay(answer, n_outputs)
                        return
                    yield from computed(args, kwargs, key)

            def computed(args, kwargs, key):
                notices, last = [], _DONE
                ahead, beside = workers.ahead(handler), workers.beside(handler)
                if waiting is not None and (ahead or beside):  # a class's new prompts queue, or share: say so
                    yield waiting(ahead, beside)
                with workers.take(handler) as meter, \
                        contextlib.closing(self._where(key).iterate(handler, fn, args, kwargs, meter)) as steps:
                    while True:  # closed when the caller stops reading (a Stop): so is the computation
                        with common.recording_notices() as shown:  # each step may run on another thread
                            outputs = next(steps, _DONE)
                        notices += shown
                        if outputs is _DONE:
                            break
                        yield outputs
                        last = outputs
                if last is not _DONE:
                    self.put(key, remember(last, notices))

            cached_generator.cacheable = cacheable
            return cached_generator

        @functools.wraps(fn)
        def cached(*args, **kwargs):
            key = key_of(args, kwargs)
            answer = self.get(key)
            if answer is not None:
                return replay(answer, n_outputs)
            with self.first(key) as mine:
                answer = None if mine else self.get(key)
                if answer is not None:  # another caller's computation of the same inputs has answered
                    return replay(answer, n_outputs)
                with workers.take(handler) as meter, common.recording_notices() as notices:
                    outputs = self._where(key).call(handler, fn, args, kwargs, meter)
                self.put(key, remember(outputs, notices))
                return outputs

        cached.cacheable = cacheable
        return cached


_DONE = object()
FIRST_WAIT = 600  # seconds a caller waits for another's computation of the same inputs before computing it itself


def replay(answer: Answer, n_outputs: int):
    """A cached answer as the handler returned it: its notices shown again, its state outputs copied."""
    for notice in answer.notices:
        common.toast(notice)
    outputs = tuple(copy.deepcopy(o) if i in answer.state else _detached(o) for i, o in enumerate(answer.outputs))
    return outputs[0] if n_outputs == 1 else outputs


def _detached(output):
    """An output as gradio may change it: an update (gr.update, a dict) is taken apart by gradio's postprocessing
    (it pops "value"), so the cache keeps its own copy and hands out another for each hit."""
    return dict(output) if isinstance(output, dict) else output


def _file_exists(output) -> bool:
    """A download file the app wrote must still be there (other outputs: nothing to check)."""
    return not common.is_download(output) or Path(output).is_file()


def prewarm(demo: gr.Blocks, skip: set[str] = frozenset()) -> threading.Thread:
    """Answer, in a background thread, every cached event for the values the page starts with (what each
    browser sends when it loads the page, and what the API documents as defaults), so the first visitors
    are served from the cache. Each computation takes a model worker like any request; an event that
    fails on its defaults is skipped. `skip`: api_names not worth it (a minute of live training).
    The answers of the page's load events become the components' initial values (`paint`), so a page
    opened afterwards is drawn at once, whatever the queue is doing. A load event whose whole answer is painted
    then no longer fires when a page opens (`answered_on_load`): 200 pages opening within 10 s sent 16 events each,
    3,200 answers to give out on one event loop before anyone clicked (the lecture hall through browsers)."""
    documented = {block._id for fn in demo.fns.values() if fn.api_name and fn.api_visibility == "public"
                  for block in fn.inputs if not isinstance(block, gr.State)}  # their values: the API's defaults
    then = {}  # event -> the events that run after it succeeds (.then, .success)
    for fn in demo.fns.values():
        if fn.trigger_after is not None and not fn.trigger_only_on_failure:
            then.setdefault(fn.trigger_after, []).append(fn)
    on_load = [fn for fn in demo.fns.values() if (demo._id, "load") in map(tuple, fn.targets)]
    opening = {fn._id for fn in _with_what_follows(on_load, then)}  # what a page runs when it opens

    def run() -> None:
        whole = {}  # event run when a page opens -> whether the page now starts with its whole answer
        for fn in demo.fns.values():
            if not getattr(fn.fn, "cacheable", False) or fn.api_name in skip:
                continue
            try:
                outputs = fn.fn(*map(_as_sent, fn.inputs))
                if inspect.isgenerator(outputs):
                    for outputs in outputs:  # noqa: B007 - the last step is the answer
                        pass
            except Exception:  # noqa: BLE001 - a default the handler refuses is answered when asked
                continue
            if fn._id in opening:
                whole[fn._id] = not paint(fn, outputs, skip=documented)
        for fn in on_load:
            if _painted(fn, whole, then):
                answered_on_load(demo, fn)
        if whole:
            demo.config = demo.get_config_file()  # what /config and the page send each new page

    thread = threading.Thread(target=run, name="prewarm", daemon=True)
    thread.start()
    return thread


def _as_sent(block):
    """The component's value as the handler receives it from a page: postprocessed, written as JSON, then read
    back as Gradio reads an input (its data model, if it has one) and preprocessed."""
    from pydantic import BaseModel

    value = block.postprocess(block.value)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if getattr(block, "data_model", None) is not None and value is not None:
        value = block.data_model.model_validate(value)
    return block.preprocess(value)


def _with_what_follows(fns: list, then: dict) -> list:
    """`fns` and every event that runs after one of them succeeds, in turn."""
    found = list(fns)
    for fn in found:
        found += [after for after in then.get(fn._id, ()) if after not in found]
    return found


def _painted(fn, whole: dict, then: dict) -> bool:
    """Whether the page starts with the whole answer of `fn` and of every event that runs after it."""
    return whole.get(fn._id, False) and all(_painted(after, whole, then) for after in then.get(fn._id, ()))


def answered_on_load(demo: gr.Blocks, fn) -> None:
    """`fn` no longer fires when a page opens: its answer to the page's values is what the page starts with. Its
    other triggers, its API and a link's restoring (which follows `restored`, not the page's load) are unchanged."""
    fn.targets = [target for target in fn.targets if tuple(target) != (demo._id, "load")]


def paint(fn, outputs, skip: set[int] = frozenset()) -> list:
    """The event's answer as its output components' initial values, as Gradio stores a component's value
    (postprocessed, files moved to its cache); a gr.State's value is what each new session starts with; an
    update's new properties (a slider's maximum) become the component's. Left as they are: the values of the
    components in `skip` (inputs the API documents: their initial value is the documented default), and bare
    gr.skip()s.
    The outputs of the answer the page does not start with; none when the page starts with the whole answer."""
    from gradio.processing_utils import move_files_to_cache
    from gradio.utils import is_prop_update
    from pydantic import BaseModel

    values = (outputs,) if len(fn.outputs) == 1 else tuple(outputs)
    left = []
    for block, value in zip(fn.outputs, values):
        if isinstance(value, gr.blocks.Block):  # a component returned for its new properties: an update
            value = {**value.constructor_args, "__type__": "update"}
        if is_prop_update(value) and set(value) == {"__type__"}:  # gr.skip(): the output keeps its value
            continue
        if not isinstance(block, gr.components.Component):
            left.append(block)
            continue
        if is_prop_update(value):
            properties = {k: v for k, v in value.items() if k not in ("__type__", "value")}
            if not all(hasattr(block, k) for k in properties):  # as Gradio sends an update's properties
                left.append(block)
                continue
            for k, v in properties.items():  # as Gradio rebuilds the component with them
                setattr(block, k, v)
                block.constructor_args[k] = v
            if "value" not in value:  # new properties only: the output keeps its value
                continue
            value = value["value"]
        if isinstance(block, gr.State):
            block.value = copy.deepcopy(value)
            continue
        if block._id in skip:  # its value is the API's default: painted only when it is that already
            if value != block.value:
                left.append(block)
            continue
        processed = block.postprocess(value)
        if isinstance(processed, BaseModel):
            processed = processed.model_dump()
        block.value = move_files_to_cache(processed, block, postprocess=True, keep_in_cache=True)
    return left
