"""The shared answer cache (playground/ui/cache.py): the same inputs give the same answer without waiting for
a model; different inputs are never mixed; notices, state and download files come back as they should."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import gradio as gr
import pytest

from playground.ui import common
from playground.ui.cache import AnswerCache
from playground.ui.workers import Workers


@pytest.fixture
def cache():
    return AnswerCache(max_items=3)


def counting(fn):
    """`fn` that counts its calls in `.calls`."""
    def counted(*args, **kwargs):
        counted.calls += 1
        return fn(*args, **kwargs)

    counted.calls = 0
    return counted


def test_the_same_inputs_are_computed_once_and_different_ones_never_mixed(cache):
    fn = counting(lambda text, n=1: (text.upper() * n, {"n": n}))
    wrapped = cache.wrap(fn, 2, (), Workers(1))
    assert wrapped("a") == ("A", {"n": 1})
    assert wrapped("a") == ("A", {"n": 1}) and fn.calls == 1
    assert wrapped("b") == ("B", {"n": 1}) and wrapped("a", n=2) == ("AA", {"n": 2}) and fn.calls == 3
    assert (cache.hits, cache.misses, len(cache)) == (1, 3, 3)


def test_the_oldest_answer_is_dropped_beyond_the_bound(cache):
    fn = counting(lambda x: x * 2)
    wrapped = cache.wrap(fn, 1, (), Workers(1))
    for x in (1, 2, 3, 4, 1):
        assert wrapped(x) == 2 * x
    assert fn.calls == 5 and len(cache) == 3  # 1 was dropped when 4 came, so it was computed again


def test_the_answers_are_bounded_by_their_bytes_whatever_their_count():
    """A class typing its own sentences fills the cache with new answers: what it holds stays within max_bytes
    (a SmolLM2 attention answer is several MB), least recently used dropped first, the newest always kept."""
    cache = AnswerCache(max_bytes=5 << 20)
    fn = counting(lambda text: text * (1 << 20))  # an answer of 1 MB per character of its input
    wrapped = cache.wrap(fn, 1, (), Workers(1))
    for text in ("a", "bb", "a", "cc"):
        wrapped(text)
    assert len(cache) == 2 and cache.bytes <= 5 << 20          # "bb" went first: "a" had been used since
    wrapped("a")
    assert fn.calls == 3
    wrapped("dddddddddd")                                       # alone over the bound: kept, the rest dropped
    assert len(cache) == 1 and wrapped("dddddddddd") and fn.calls == 4


def test_the_same_new_question_asked_at_once_is_computed_once(cache):
    """A class opening a lecturer's link at the same moment: the callers after the first wait for its answer."""
    fn = counting(lambda text: time.sleep(0.3) or text.upper())
    wrapped = cache.wrap(fn, 1, (), Workers(4))
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(wrapped("new"))) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == ["NEW"] * 5 and fn.calls == 1
    started = []

    def steps(n):
        started.append(n)
        for i in range(n):
            time.sleep(0.1)
            yield f"step {i}"

    streamed = cache.wrap(steps, 1, (), Workers(4))
    finals = []
    threads = [threading.Thread(target=lambda: finals.append(list(streamed(3))[-1])) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert finals == ["step 2"] * 3 and started == [3]  # a generator's callers get its final answer


def test_two_handlers_never_share_answers_and_one_handler_behind_two_events_does(cache):
    a = cache.wrap(lambda x: ("a", x), 1, (), Workers(1))
    b = cache.wrap(lambda x: ("b", x), 1, (), Workers(1))  # another lambda of the same module
    assert a(1) == ("a", 1) and b(1) == ("b", 1) and a(1) == ("a", 1)
    shared = counting(lambda x: x + 1)
    first = cache.wrap(shared, 1, (), Workers(1))
    second = cache.wrap(shared, 1, (), Workers(1))  # e.g. /attention and /attention_1
    assert first(1) == second(1) == 2 and shared.calls == 1


def test_an_answer_of_another_model_version_is_not_served(cache):
    key = cache.key("handler", (1,), {})
    cache.version = "another checkpoint"
    assert cache.key("handler", (1,), {}) != key


def test_notices_are_shown_again_on_a_hit(cache, monkeypatch):
    shown = []
    monkeypatch.setattr(gr, "Warning", shown.append)
    wrapped = cache.wrap(lambda x: common.warn([f"{x} is clamped"]) or x, 1, (), Workers(1))
    wrapped(7)
    wrapped(7)
    assert shown == ["7 is clamped", "7 is clamped"]


def test_a_generator_answers_a_hit_with_its_last_output_only(cache):
    def steps(n):
        for i in range(n):
            yield f"step {i}"

    wrapped = cache.wrap(steps, 1, (), Workers(1))
    assert list(wrapped(3)) == ["step 0", "step 1", "step 2"]
    assert list(wrapped(3)) == ["step 2"]


def test_state_outputs_are_copies_for_each_session(cache):
    wrapped = cache.wrap(lambda: ("view", {"steps": [1, 2]}), 2, (1,), Workers(1))
    first = wrapped()
    second, third = wrapped(), wrapped()
    second[1]["steps"].append(3)
    assert third[1] == {"steps": [1, 2]} and second[1] is not third[1] and first[0] is second[0]


def test_events_that_read_session_state_are_never_cached(cache):
    fn = counting(lambda state: state + 1)
    wrapped = cache.wrap(fn, 1, (), Workers(1), cacheable=False)
    wrapped(1), wrapped(1)
    assert fn.calls == 2 and len(cache) == 0


def test_an_answer_whose_download_file_is_gone_is_computed_again(cache):
    fn = counting(lambda: ("data", common.json_file({"x": 1}, "test")))
    wrapped = cache.wrap(fn, 2, (), Workers(1))
    _, path = wrapped()
    assert wrapped()[1] == path and fn.calls == 1
    Path(path).unlink()
    _, again = wrapped()
    assert fn.calls == 2 and Path(again).is_file()


def test_a_hit_never_waits_for_a_worker_and_a_miss_does(cache):
    workers = Workers(1)
    wrapped = cache.wrap(lambda x: x, 1, (), workers)
    wrapped("cached")
    holding, free = threading.Event(), threading.Event()

    def hold():  # another computation holds the only worker
        with workers.take("another"):
            holding.set()
            free.wait(10)

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(5)
    try:
        assert wrapped("cached") == "cached"
        done = threading.Event()
        threading.Thread(target=lambda: (wrapped("new"), done.set()), daemon=True).start()
        time.sleep(0.2)
        assert not done.is_set(), "a miss computed without a worker"
        assert workers.ahead("new") == 2  # it waits, and a next one would wait behind it
    finally:
        free.set()
    assert done.wait(5)


def test_an_error_is_not_cached(cache):
    calls = []

    def fails(x):
        calls.append(x)
        raise gr.Error("bad input")

    wrapped = cache.wrap(fails, 1, (), Workers(1))
    for _ in range(2):
        with pytest.raises(gr.Error):
            wrapped(1)
    assert len(calls) == 2 and len(cache) == 0


def test_the_app_serves_a_repeated_request_from_the_cache_with_the_same_answer(client, app_url):
    """gradio_client speaks the page's protocol: a repeat is answered from the kept bytes (ui/queuepath.py) or,
    failing that, from the handlers' cache; never computed again."""
    import httpx

    def hits() -> int:
        status = httpx.get(f"{app_url}gradio_api/answer-cache").json()
        return status["queue"]["hits"] + status["handlers"]["hits"]

    before = hits()
    first = client.predict("The bank by the river.", api_name="/normalize")
    other = client.predict("A different sentence entirely.", api_name="/normalize")
    again = client.predict("The bank by the river.", api_name="/normalize")
    assert again[-1] == first[-1] != other[-1]
    assert hits() > before


def test_prewarm_answers_the_pages_initial_values():
    """The served app computes the answers to its defaults at start: a request with the defaults is a hit."""
    import app
    from playground.ui.cache import prewarm

    normalize = next(fn for fn in app.demo.fns.values() if fn.api_name == "normalize")
    prewarm(app.demo, skip={fn.api_name for fn in app.demo.fns.values() if fn.api_name != "normalize"}).join(120)
    hits = app.demo.serving.answers.hits
    normalize.fn(*[block.preprocess(block.postprocess(block.value)) for block in normalize.inputs])
    assert app.demo.serving.answers.hits == hits + 1


def test_a_load_event_whose_answer_the_page_starts_with_no_longer_fires_on_load():
    """prewarm paints the load events' answers (values and gr.State alike): an event whose whole answer is painted
    is no longer sent by every page that opens; one with an answer the page cannot start with still is."""
    from playground.ui.cache import prewarm

    with gr.Blocks() as demo:
        text, steps = gr.Textbox(), gr.State()
        slider, data, shown, later = gr.Slider(maximum=2), gr.JSON(), gr.Textbox(), gr.Textbox()
        painted = demo.load(lambda: ("drawn", [{"step": 1}], gr.skip()), outputs=[text, steps, shown])
        updated = demo.load(lambda: gr.update(maximum=9), outputs=slider)
        read = demo.load(lambda: {"a": 1}, outputs=data)
        data.change(lambda d: str(d), inputs=data, outputs=later)
        followed = demo.load(lambda: "first", outputs=shown)
        followed.then(lambda: "then", outputs=later, queue=False)  # not cached (ui.demo.set_queues: queued only)
        cached_then = demo.load(lambda: "second", outputs=later)
        tail = gr.Textbox()
        cached_then.then(lambda: "after", outputs=tail)
    answers, workers = AnswerCache(), Workers(1)
    for fn in demo.fns.values():
        if fn.queue:
            fn.fn = answers.wrap(fn.fn, len(fn.outputs), (), workers)

    def on_load(event) -> bool:
        return (demo._id, "load") in map(tuple, demo.fns[event["id"]].targets)

    assert all(on_load(e) for e in (painted, updated, read, followed))
    prewarm(demo).join(60)
    assert not on_load(painted) and text.value == "drawn" and steps.value == [{"step": 1}]
    assert not on_load(updated) and slider.maximum == 9  # a new property is the component's own from the start
    assert on_load(read) and on_load(followed)  # an input whose default the API documents, a .then not cached
    assert not on_load(cached_then) and later.value == "second" and tail.value == "after"  # its .then painted too
    config = demo.get_config_file()["dependencies"]
    assert not any(t[1] == "load" for t in config[painted["id"]]["targets"])


def test_an_update_taken_apart_by_gradio_is_whole_again_on_the_next_hit(cache):
    """gradio's postprocessing pops "value" from a returned gr.update: the cached answer must not lose it
    (the gradient tab's LSTM gates plot stayed empty on a hit)."""
    wrapped = cache.wrap(lambda: ("text", gr.update(value="figure", visible=True)), 2, (), Workers(1))
    for _ in range(3):
        _, update = wrapped()
        assert update["value"] == "figure"
        update.pop("value")  # what gradio.blocks.postprocess_update_dict does


def busy(seconds: float) -> None:
    """Compute (not wait) for `seconds` of this thread's CPU time (on the clock, a loaded machine gave it less: the
    computation was then placed as quick)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_an_event_is_placed_by_its_cpu_time_not_by_its_wait():
    """Under a lecture hall's load a quick computation waits for the CPU and takes long on the clock; its CPU time
    places it (it took the slow pool, behind every new generation)."""
    workers = Workers(quick=1, slow=1, threshold=0.05)
    with workers.take("waits") as meter, meter:
        time.sleep(0.2)
    with workers.take("computes") as meter, meter:
        busy(0.2)
    assert not workers.is_slow("waits") and workers.is_slow("computes")


def test_an_event_known_to_be_slow_computes_its_first_time_in_the_slow_pool_then_by_its_own_times(cache):
    """A live probe's first computation (10 s) took the quick pool and lane, where it held the quick questions up and
    imported what the slow lane's trainings import too (ui/demo.SLOW_AT_FIRST). While an event computes, `beside`
    counts it in its own pool."""
    workers = Workers(quick=1, slow=1, threshold=0.05)
    pools = []

    def probe(x):
        pools.append((workers.beside(handler(probe)), workers.beside(handler(tokens))))
        return x

    def tokens(x):
        return x

    def handler(fn):
        return next(name for name, f in cache.functions.items() if f is fn)

    slow, quick = cache.wrap(probe, 1, (), workers, slow=True), cache.wrap(tokens, 1, (), workers)
    slow("first")
    assert pools == [(1, 0)] and workers.is_slow(handler(probe)) and not workers.is_slow(handler(tokens))
    for x in ("a", "b", "c"):   # quick three times more: the median of its own last ones places it again
        slow(x)
    assert not workers.is_slow(handler(probe))


def test_a_quick_miss_never_waits_behind_a_slow_one(cache):
    workers = Workers(quick=1, slow=1, threshold=0.05)
    slow = cache.wrap(lambda x: busy(0.2) or x, 1, (), workers)
    quick = cache.wrap(lambda x: x, 1, (), workers)
    slow("measured"), quick("measured")  # each event's first computation places it
    started = threading.Event()
    thread = threading.Thread(target=lambda: (started.set(), slow("long")), daemon=True)
    thread.start()
    started.wait()
    time.sleep(0.02)
    begun = time.perf_counter()
    assert quick("new") == "new" and time.perf_counter() - begun < 0.1  # did not wait for the slow one
    thread.join()


def test_a_generator_that_waits_for_a_worker_says_how_many_are_ahead(cache):
    """A class's new prompts queue for the slow pool: the page shows the waiting view first, then the steps."""
    workers = Workers(1)

    def steps(x):
        yield f"{x} step 1"
        yield f"{x} step 2"

    wrapped = cache.wrap(steps, 1, (), workers, waiting=lambda ahead, beside: f"{ahead} ahead")
    assert list(wrapped("alone")) == ["alone step 1", "alone step 2"]  # a free worker: no waiting view
    seen, done = [], threading.Event()
    with workers.take("someone else's"):  # the only worker is taken
        threading.Thread(target=lambda: (seen.extend(wrapped("queued")), done.set()), daemon=True).start()
        time.sleep(0.3)
        assert seen == ["1 ahead"]
    assert done.wait(5) and seen == ["1 ahead", "queued step 1", "queued step 2"]
    assert list(wrapped("queued")) == ["queued step 2"]  # the kept answer: its last step, never the waiting view


def test_a_generator_that_starts_beside_others_of_its_pool_says_so_first(cache):
    """A free worker, but another computation of its pool is running (a class's generations share the cores, the slow
    pool's at a lower priority): the page is told at once, before a first step that may take seconds."""
    workers = Workers(2)

    def steps(x):
        yield f"{x} step 1"

    wrapped = cache.wrap(steps, 1, (), workers, waiting=lambda ahead, beside: f"{ahead} ahead, {beside} beside")
    assert list(wrapped("alone")) == ["alone step 1"]  # nothing else running: no waiting view
    with workers.take("someone else's"):
        assert list(wrapped("beside")) == ["0 ahead, 1 beside", "beside step 1"]
        with workers.take("a third"):  # both workers taken: it waits
            seen, done = [], threading.Event()
            threading.Thread(target=lambda: (seen.extend(wrapped("queued")), done.set()), daemon=True).start()
            time.sleep(0.3)
            assert seen == ["1 ahead, 2 beside"]
    assert done.wait(5) and seen == ["1 ahead, 2 beside", "queued step 1"]


def test_a_generator_asked_again_while_the_same_is_computing_says_so_then_shows_its_answer(cache):
    """A class opening one link asks the same new generation many times in a second: it is computed once, and the
    others are told at once (the waiting view with nothing ahead or beside) instead of showing nothing until it ends."""
    workers, started, release = Workers(2), threading.Event(), threading.Event()

    def steps(x):
        started.set()
        release.wait(5)
        yield f"{x} step 1"
        yield f"{x} step 2"

    wrapped = cache.wrap(steps, 1, (), workers, waiting=lambda ahead, beside: f"{ahead} ahead, {beside} beside")
    first, done = [], threading.Event()
    threading.Thread(target=lambda: (first.extend(wrapped("same")), done.set()), daemon=True).start()
    assert started.wait(5)
    again = wrapped("same")
    assert next(again) == "0 ahead, 0 beside"          # at once, while the first computation still runs
    release.set()
    assert list(again) == ["same step 2"] and done.wait(5)  # then the first one's answer, not computed again
    assert first == ["same step 1", "same step 2"]


def test_generating_events_take_the_batched_pool_together_in_the_slow_lane():
    """A generating event (ui/demo.GENERATING) waits on the generation engine, which steps every generation at once:
    its computations take the batched pool, as many together as it has places, and are computed in the slow lane
    (meter.slow); the slow pool's two places stay for the other slow events."""
    workers = Workers(2, 2, batched=8)
    workers.expect_batched("generate")
    assert workers.pool("generate") == "batched" and workers.pool("tokenize") == "quick"
    meters = [workers.take("generate") for _ in range(8)]
    entered = [m.__enter__() for m in meters]
    assert all(meter.slow for meter in entered)
    assert workers.ahead("generate") == 1 and workers.beside("generate") == 8 and workers.ahead("other") == 0
    for m in meters:
        m.__exit__(None, None, None)
    assert workers.ahead("generate") == 0
