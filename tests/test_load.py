"""The app under a lecture hall: 20 gradio_client sessions at once over every endpoint, zero errors.

This is the short version (3 requests per user, every endpoint at least twice); the full one, 20 users x
50 requests with p50/p95 per endpoint, and the 2,000-request soak are `python -m playground.bench --load
--soak`.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pytest

from playground.tools import loadtest
from playground.ui import common


@pytest.fixture
def configured():
    """This process configured as a served app's is (ui/process.configure: Gradio's patches, each checked first, the
    switch interval, torch's threads): what the tests that ask for it check is that configuration's doing."""
    from playground.ui import process

    process.configure()


@pytest.mark.timeout(600)
def test_twenty_users_at_once_get_every_endpoint_without_an_error(app_url):
    names = loadtest.endpoint_arguments(app_url)
    assert len(names) >= 25 and "/tokenize" in names and "/generate" in names
    per_user = max(3, -(-len(names) // 20))    # 20 users' requests reach every endpoint (more than 60 of them)
    result = loadtest.run(app_url, users=20, requests_per_user=per_user)
    assert not result.errors, result.errors[:5]
    assert set(result.latencies) == set(names), "every endpoint answered at least once"
    assert result.requests >= 60


def test_download_files_are_bounded(monkeypatch):
    """Each request writes its data as a file; only the most recent ones are kept."""
    monkeypatch.setattr(common, "_FILES_KEPT", 3)
    monkeypatch.setattr(common, "_files", common.deque())
    paths = [common.json_file({"i": i}, "bounded") for i in range(6)]
    assert [Path(p).exists() for p in paths] == [False, False, False, True, True, True]


def test_the_queue_is_set_deliberately():
    """Every queued event is dispatched at once and goes through the shared answer cache, which lets a miss
    compute only under one of the workers (ui/demo.py, ui/cache.py)."""
    import app
    from playground.ui import demo as ui

    queued = [fn for fn in app.demo.fns.values() if fn.queue and fn.fn]
    assert queued and all(fn.concurrency_limit is None and hasattr(fn.fn, "__wrapped__") for fn in queued)
    assert app.demo._queue.max_size == ui.QUEUE_SIZE


def test_a_skip_is_passed_on_without_rebuilding_its_component(configured, monkeypatch):
    """A bare gr.skip() reaches the page as Gradio sends it, {"__type__": "update"}, without Gradio building a new
    instance of its component (ui.patches._skip_without_rebuilding: the link's restore sends ~60 on every page
    open); the other outputs are postprocessed as before."""
    import asyncio

    from gradio.blocks import Blocks

    with gr.Blocks() as demo:
        text, slider, state, number = gr.Textbox(), gr.Slider(), gr.State(), gr.Number()
        gr.Button().click(lambda: None, outputs=[text, slider, state, number])
    fn = next(iter(demo.fns.values()))
    built = []
    init = gr.Textbox.__init__
    monkeypatch.setattr(gr.Textbox, "__init__", lambda self, *a, **k: (built.append(self), init(self, *a, **k))[1])
    out = asyncio.run(Blocks.postprocess_data(demo, fn, [gr.skip(), gr.update(maximum=5, value=2), {"x": 1}, 3], None))
    assert out == [{"__type__": "update"}, {"maximum": 5, "value": 2, "__type__": "update"}, None, 3]
    assert not built, "a Textbox was rebuilt for a skip"


def test_an_update_reads_its_components_signature_once_and_sends_what_gradio_sends(configured, monkeypatch):
    """An update rebuilds its component for the session (Gradio's way), reading the constructor's signature once per
    constructor, not once per update (ui.patches._read_each_signature_once: a followed view's first answer rebuilds
    four, 200 followers 800); what goes out and the session's rebuilt component are as before."""
    import asyncio
    import inspect

    from gradio import component_meta
    from gradio.blocks import Blocks
    from gradio.state_holder import SessionState

    with gr.Blocks() as demo:
        banner, bar = gr.HTML(), gr.Markdown()
        gr.Button().click(lambda: None, outputs=[banner, bar])
    fn = next(iter(demo.fns.values()))

    def answer(shown: str) -> list:
        state = SessionState(demo)
        out = asyncio.run(Blocks.postprocess_data(
            demo, fn, [gr.update(value=shown, visible=True), gr.update(value="**bar**", visible=False)], state))
        assert state[banner._id].visible is True and state[bar._id].visible is False   # the session's own copy
        return out

    getfullargspec = inspect.getfullargspec
    monkeypatch.setattr(inspect, "getfullargspec", lambda f: pytest.fail(f"{f} read again"))
    answers = [answer(shown) for shown in ("<p>one</p>", "<p>two</p>", "<p>three</p>")]
    assert component_meta.inspect.getfullargspec.cache_info().hits >= 6
    monkeypatch.setattr(inspect, "getfullargspec", getfullargspec)
    monkeypatch.setattr(component_meta, "inspect", inspect)                 # Gradio's own reading, every time
    assert answers[-1] == answer("<p>three</p>") and answers[0] != answers[-1]


def test_closing_the_server_sets_its_stop_event_in_the_servers_own_loop(configured):
    """demo.close() sets the app's stop event (an asyncio.Event the pages' heartbeat streams wait on) in the loop
    that waits on it, not from the closing thread, where the loop's own changes to its waiters made it fail once
    ("deque mutated during iteration", the port left open: ui.patches._stop_in_the_servers_loop); its waiter wakes.
    Gradio's close then finds it set (here an app already stopped: close() has nothing more to do)."""
    import asyncio
    import threading
    import time
    from types import SimpleNamespace

    from gradio.blocks import Blocks

    loop = asyncio.new_event_loop()
    server = threading.Thread(target=loop.run_forever, daemon=True)
    server.start()
    try:
        event = asyncio.Event()                                              # bound to `loop` by its first wait
        waiting = asyncio.run_coroutine_threadsafe(event.wait(), loop)       # a heartbeat's wait
        for _ in range(100):
            if event._waiters:
                break
            time.sleep(0.01)
        setters, set_ = [], event.set
        event.set = lambda: (setters.append(threading.current_thread()), set_())[1]
        Blocks.close(SimpleNamespace(app=SimpleNamespace(stop_event=event), is_running=False))
        assert waiting.result(5) is True and setters == [server]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        server.join(5)
        loop.close()


def test_plain_values_are_postprocessed_inline_as_gradio_would(configured, monkeypatch):
    """Plain values for components whose postprocess only casts them are postprocessed without Gradio's thread hops
    (ui.patches._plain: a followed view's 70 values cost 14 ms a page that way, 3 ms this way); what goes out is
    what Gradio's own postprocess_data sends, a value outside a component's choices, lists (a CheckboxGroup's, a
    multiselect Dropdown's) and an update included."""
    import asyncio
    import copy

    import anyio
    from gradio.blocks import Blocks

    with gr.Blocks() as demo:
        outputs = [gr.Textbox(), gr.Number(precision=1), gr.Number(), gr.Slider(0, 10, step=1), gr.Checkbox(),
                   gr.Radio(["a", "b"]), gr.Dropdown(["x", "y"]), gr.Dropdown(["x", "y"], multiselect=True),
                   gr.Textbox(), gr.Markdown(), gr.CheckboxGroup(["p", "q", "r"])]
        gr.Button().click(lambda: None, outputs=outputs)
    fn = next(iter(demo.fns.values()))
    values = ["typed", 3.14159, 7, 4, True, "b", "y", ["x", "z"], None, "**bold**", ["q", "r"]]
    for shown in (values, [gr.skip(), *values[1:]], [*values[:5], gr.update(value="a"), *values[6:]]):
        ours = asyncio.run(Blocks.postprocess_data(demo, fn, copy.deepcopy(shown), None))
        gradio = asyncio.run(Blocks.postprocess_data.gradio(demo, fn, copy.deepcopy(shown), None))
        assert ours == gradio
    hops = []
    real = anyio.to_thread.run_sync
    monkeypatch.setattr(anyio.to_thread, "run_sync", lambda *a, **k: hops.append(a[0]) or real(*a, **k))
    asyncio.run(Blocks.postprocess_data(demo, fn, [*values[:8], "plain", gr.skip(), values[10]], None))
    assert not hops, f"plain values went through Gradio's worker threads: {hops}"


def test_python_s_lock_is_handed_over_within_a_fifth_of_a_millisecond(configured):
    """A new prompt's generation beside a thread that runs Python (the server's event loop under a lecture hall)
    takes Python's lock back about 10,000 times; with Python's default switch interval (5 ms) 200 tokens took 110 s
    instead of 0.6 s (ui.process._hand_the_lock_over_sooner; the bench's row measures it)."""
    import sys

    assert sys.getswitchinterval() <= 0.0002


def test_each_computation_at_once_gets_its_share_of_the_cores(configured):
    """Three computations at once on two cores each run on one of torch's threads (ui.workers.share_cores): with
    torch's default of every core each, their threads spin waiting for each other (a new prompt's 200 tokens
    took 18 s instead of 1.3 s)."""
    import os

    import torch

    from playground.ui import demo as ui

    cores = len(os.sched_getaffinity(0))
    assert torch.get_num_threads() == max(1, cores // sum(ui.WORKERS))


def test_sessions_keep_their_state_but_no_copy_of_every_value(app_url):
    """Gradio 6 copies every value a session is sent for gr.DeepLinkButton, which this app does not use;
    the app turns the copies off (ui.patches._keep_no_deep_link_copies), or each session would hold the last
    figure, table and JSON of every view. Its gr.State still works: a step of the last translation."""
    import app
    from playground.tools.client import session

    client = session(app_url, timeout=None)
    client.predict(api_name="/tokenize")
    client.predict(api_name="/seq2seq")
    client.predict(api_name="/seq2seq_step")  # reads this session's gr.State
    session = app.demo.state_holder[client.session_hash]
    tokenize = next(fn for fn in app.demo.fns.values() if fn.api_name == "tokenize")
    copied = {block._id for block in tokenize.inputs + tokenize.outputs} & set(session.config_values)
    assert not copied, "the inputs and outputs of /tokenize are copied into the session"
    assert session.state_data, "the session keeps its gr.State"


def test_a_full_session_store_drops_the_sessions_without_a_seat_first():
    """Beyond Gradio's session capacity the least recently used session is dropped, gr.State and all; the app drops
    one that holds no place in a room first (ui.patches._evict_the_unseated_first), so neither the lecturer's key
    nor a following student's place is lost to a class one larger than the store, or to plain API callers (each
    call a session of its own). When every session is seated, the least recently used goes, as before."""
    from gradio.state_holder import StateHolder

    from playground.ui import patches

    with gr.Blocks() as demo:
        seat, other = gr.State({}), gr.State(None)
    demo.state_session_capacity = 3                                     # as launch() sets it
    patches.apply()
    patches.keep_sessions_holding(seat)
    holder = StateHolder()
    holder.set_blocks(demo)
    holder["lecturer"][seat._id] = {"room": "ABC123", "key": "k"}      # opened a room first, then quiet
    for caller in ("api-1", "api-2", "api-3", "api-4"):                 # one-call sessions, some with a State
        holder[caller][other._id] = "x"
    assert "lecturer" in holder and list(holder.session_data) == ["lecturer", "api-3", "api-4"]
    for student in ("s1", "s2", "s3"):
        holder[student][seat._id] = {"room": "ABC123"}
    assert list(holder.session_data) == ["s1", "s2", "s3"]              # all seated: least recently used first
    assert holder.session_data["s3"].state_data[seat._id] == {"room": "ABC123"}


@pytest.mark.timeout(600)
def test_a_small_lecture_hall_over_plain_http_gets_every_answer(app_url):
    """The bench's lecture hall (200 students) in small: 12 students clicking every second for 15 s."""
    result = loadtest.lecture_hall(app_url, students=12, think=1.0, seconds=15, seed=3)
    assert not result.errors, result.errors[:3]
    assert result.requests >= 30 and 0 < result.own < result.requests


@pytest.mark.parametrize("sentence", [loadtest.STUDENT_SENTENCES[0], "Tokenization splits words into pieces 🤖 oddly.",
                                      "مرحبا بالعالم"])
def test_a_students_own_sentence_is_valid_input_for_every_main_endpoint(client, sentence):
    import random

    for name in loadtest.LECTURE_ENDPOINTS:
        values = loadtest.own_input(name, sentence, random.Random(0))
        if name == "generate":
            values["max_new_tokens"] = 20
        client.predict(api_name=f"/{name}", **values)  # an error event raises


@pytest.mark.timeout(300)
def test_the_hall_times_a_generation_from_its_first_token_through_the_pages_protocol(app_url):
    """What the bench's hall reads of each generation (loadtest.queue_event's `generation`): its first token (not its
    place in the queue), its end and its steps, through the page's own protocol."""
    import asyncio

    import httpx

    with httpx.Client(base_url=app_url, timeout=60) as client:
        page = loadtest.Page.read(client)
    dependency = page.events[page.by_name["generate"]]
    data = page.data(dependency, {"prompt": "ROMEO:", "max_new_tokens": 12})
    generations: list = []

    async def one() -> tuple:
        async with httpx.AsyncClient(base_url=app_url, timeout=120, headers=loadtest.PAGE_HEADERS) as client:
            return await loadtest.queue_event(client, page, dependency["id"], data, "hall-generation",
                                              generation=generations)

    first, error = asyncio.run(one())
    assert error is None and len(generations) == 1
    _, token, end, steps = generations[0]
    assert 0 < token <= end and steps == 12
