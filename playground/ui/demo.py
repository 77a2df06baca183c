"""The app's page: the tabs in the lecture's order, the shared sentence, the tour, links and lecture mode,
the queue and the launch settings. `build_demo()` makes a new gr.Blocks; app.py serves it."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import gradio as gr
from gradio.events import Dependency
from starlette.middleware import Middleware

from playground import checkpoints
from playground.analysis import focus, models
from playground.serving import engine
from playground.text import MAX_CHARS
from playground.ui import (attention_tab, causal_tab, cockpit, embeddings_tab, fastpath, fill_mask_tab, finetune_tab,
                           generation_tab, follow, gradient_tab, inference_tab, queuepath, quiz_tab, seq2seq_tab,
                           tokenization_tab, tour, view, workshop_tab)
from playground.ui.cache import AnswerCache
from playground.ui.compute import Lanes
from playground.ui.workers import Workers, share
from playground.ui.fastpath import CachedCalls
from playground.ui.pagecache import CachedPage
from playground.ui.queuepath import CachedEvents
from playground.ui.common import FOLLOW, Shared, checked, logged_preprocess

ASSETS = checkpoints.ASSETS_DIR
DEFAULT_TEXT = "Tokenizers don't see words: unbelievably, “naïve” 👩‍💻 users tokenize Ελληνικά and مرحبا too."

INTRO = """# NLP Playground
One sentence, from characters to GPT and BERT. Type it once; every view uses it. Hover a token to see it in every
tokenizer."""

# The page's own state that events set and others follow (the committed sentence, the selected word, "a link was
# restored"): in the page but not shown. Not visible=False: Gradio 6.31 does not mount an invisible component, and
# one set by an event (a link's sentence and word) then fired its change again after every later answer, for ever
# (each page re-sent fill-mask, embeddings, generation's prompt, ... every 1-3 s: tests/test_browser_hall.py).
HIDDEN = "hidden"
# A relay's own script (assets/relay.js holds the rest): it registers the HTML component's trigger under its name
RELAY_JS = "window.playgroundRelay.register(%r, trigger);"

# Tabs in the order of the lecture story
TABS = [("Tokenization", tokenization_tab), ("Embeddings", embeddings_tab), ("RNN gradient flow", gradient_tab),
        ("Attention", attention_tab), ("Seq2seq attention", seq2seq_tab), ("Masked-LM fill-in", fill_mask_tab),
        ("Generation", generation_tab), ("Inference", inference_tab), ("Fine-tuning", finetune_tab),
        ("Causal lab", causal_tab), ("Class quiz", quiz_tab)]


def tab_id(title: str) -> str:
    """The id of a top-level tab (for gr.Tabs(selected=...) and links): "RNN gradient flow" -> "rnn-gradient-flow"."""
    return title.lower().replace(" ", "-")


def build_demo() -> gr.Blocks:
    """The page: a new gr.Blocks, its events behind the answer cache and the queue set (set_queues). It changes
    nothing process-wide: ui/process.configure() does, before the app is served."""
    with gr.Blocks(title="NLP Playground", analytics_enabled=False, delete_cache=(3600, 3600)) as demo:
        with gr.Row(equal_height=True, elem_id="header"):
            gr.Markdown(INTRO)
            with gr.Column(scale=0, min_width=180, elem_id="header-controls"):
                lecture = gr.Checkbox(False, label="Lecture mode", elem_id="lecture-toggle")
                copy = gr.Button("Copy link to this view", size="sm", elem_id="copy-link")
        shared = Shared(
            sentence=gr.Textbox(value=DEFAULT_TEXT, label="Your sentence (Enter applies it to every tab)", lines=1,
                                max_lines=12, elem_id="sentence"),
            text=gr.Textbox(value=DEFAULT_TEXT, label="Sentence", visible=HIDDEN, elem_id="sentence-text"),
            focus=gr.Textbox("", visible=HIDDEN, elem_id="focus"),
            restored=gr.Number(0, visible=HIDDEN, elem_id="restored"))
        note = gr.HTML("", elem_id="sentence-note")  # why the box's text was not applied as it is (COMMIT_JS)
        chips = gr.HTML(focus.chips_html(DEFAULT_TEXT, None), elem_id="word-chips", js_on_load=focus.CHIP_CLICK_JS)
        link_notice = gr.HTML("", elem_id="link-notice", visible=False)   # shown when a link asks the impossible
        shared.follow = follow.layout()     # the bar saying whom this page follows (a student's in a room)
        shared.cockpit = cockpit.build      # the Class quiz tab's lecturer panel lays it out (ui/cockpit.py)
        shared.seat = gr.State({})          # this page's place in the class quiz: its tab and each tab's questions
        left_out = [f"Left out: {message}" for message in checkpoints.damaged().values()]
        left_out += [models.missing()] if models.resolve(models.SMOLLM2) is None else []  # its views are left out
        gr.HTML(view.notice_html(left_out, "Some models are missing or damaged; the rest of the app works:"),
                elem_id="models-notice", visible=bool(left_out))
        shared.remember("", text=shared.text, focus=shared.focus)
        tour_panel = tour.layout()
        workshop_panel = workshop_tab.layout()
        _wire_sentence(shared, chips, note)  # first: the chips are redrawn before the tabs' events are sent
        with gr.Tabs(elem_id="tabs", overflow_behavior="wrap") as shared.tabs:  # a phone shows every tab's name
            for title, module in TABS:
                with gr.Tab(title, id=tab_id(title)):
                    module.build(demo, shared)
                    quiz_tab.panel(title, shared.seat)  # the tab's own questions: predict, then reveal
        for block in demo.blocks.values():  # the tabs' own sub-tabs too (on a phone, not behind a "⋯" menu)
            if isinstance(block, gr.Tabs):
                block.overflow_behavior = "wrap"
        follow.wire(demo, shared.follow, view.wire(demo, shared, lecture, copy, link_notice))
        tour.wire(shared, *tour_panel)
        workshop_tab.wire(demo, shared, workshop_panel)
        clear_on_failure(demo)
    demo.serving = set_queues(demo)  # what the middleware and the prewarm are handed (launch_settings, app.serve)
    demo.view = shared.view  # the components a link restores, by URL key (for the tests)
    demo.shared = shared  # what the tabs share (a workshop file's views are checked against it: ui/workshop_tab.py)
    return demo


# The box's text becomes every tab's sentence (in the browser), but not as it is when every view would refuse or
# cut it, each in a toast of its own about tabs not on screen: a blank box is not applied (the tabs keep the last
# sentence), a text longer than a view reads is cut there. Either is said once, under the box (#sentence-note).
_NOTE_HTML = '<div class="notice sentence-notice">%s</div>'
COMMIT_JS = """(s, t) => {
  s = s || "";
  if (/^[\\s\\x1c-\\x1f\\x85]*$/.test(s)) return [t, %s];
  const chars = [...s];  // code points, as Python counts them
  if (chars.length > %d) return [chars.slice(0, %d).join(""), %s.replace("{count}", chars.length.toLocaleString("en"))];
  return [s, ""];
}""" % (json.dumps(_NOTE_HTML % "The box is empty, so nothing was applied: every tab still shows the last sentence "
                               "(its words below). Type a sentence and press Enter."),
        MAX_CHARS, MAX_CHARS,
        json.dumps(_NOTE_HTML % f"Your text has {{count}} characters: every tab reads its first {MAX_CHARS:,}, so only "
                                 "those are applied."))


def _wire_sentence(shared: Shared, chips: gr.HTML, note: gr.HTML) -> None:
    """The typed sentence is committed (Enter, or leaving the box) to `shared.text` (COMMIT_JS), which a link sets
    too and the box mirrors; its words as chips, a click selects one (or clears it) for every tab."""
    gr.on([shared.sentence.submit, shared.sentence.blur], None, inputs=[shared.sentence, shared.text],
          outputs=[shared.text, note], js=COMMIT_JS, queue=False)
    shared.text.change(None, inputs=shared.text, outputs=shared.sentence, js="(s) => s", queue=False)
    for name, component in (("text", shared.text), ("focus", shared.focus), ("restored", shared.restored)):
        shared.relays[name] = gr.HTML("", visible=HIDDEN, elem_id=f"relay-{name}", js_on_load=RELAY_JS % name)
        component.change(None, inputs=component, js=f"(v) => window.playgroundRelay.changed({name!r}, v)")

    def select(text, current, evt: gr.SelectData):
        index = evt.index if isinstance(evt.index, int) else -1
        return focus.toggle(text or "", index, current)

    def show(text, current):
        return focus.chips_html(text or "", focus.parse(current, text or ""))

    chips.select(select, inputs=[shared.text, shared.focus], outputs=shared.focus, queue=False,
                 api_visibility="private")
    gr.on([shared.changed("text"), shared.changed("focus")], show, inputs=[shared.text, shared.focus], outputs=chips,
          queue=False, api_visibility="private", show_progress="hidden", trigger_mode=FOLLOW)
    shared.changed("focus")(None, inputs=[shared.focus], js="(f) => window.playgroundFocus.mark(f)")


# What an event shows, cleared when it fails (a refused input): no answer to the previous input stays beside the
# new one. Its first text output says so; the controls it updates (sliders, state) keep their values. A Stop button
# (elem_classes "stop-button") must carry that class: its cancel reaches the failure handler too.
# How long after a Stop click a failure is taken for that Stop (a live run ends at its next step, which on a busy
# machine takes seconds): what was made is kept
STOP_WINDOW_MS = 15_000
STALE = "⚠ Not shown: the last input was refused (the message says why). Change it and try again."
_NOTE = {gr.HTML: f'<p class="stale-note">{STALE}</p>', gr.Markdown: f"*{STALE}*"}
_CLEARED = (gr.Plot, gr.JSON, gr.DownloadButton, gr.Dataframe, gr.Label, gr.HTML, gr.Markdown)


def clear_on_failure(demo: gr.Blocks) -> None:
    """After each model event that fails, its results cleared in the browser (no request to the server)."""
    read = {block._id for fn in demo.fns.values() for block in fn.inputs}  # inputs are never cleared
    stoppable = {i for fn in demo.fns.values() for i in fn.cancels or ()}
    for fn in list(demo.fns.values()):
        if not fn.queue or fn.fn is None:
            continue
        results = [block for block in fn.outputs if isinstance(block, _CLEARED) and block._id not in read]
        if not results:
            continue
        note = next((i for i, block in enumerate(results) if type(block) in _NOTE), None)
        values = [_NOTE[type(block)] if i == note else None for i, block in enumerate(results)]
        js = f"() => {json.dumps(values)}"
        # Stop cancels it, which Gradio reports as a failure: keep what was made (assets/controls.js)
        if fn._id in stoppable:
            js = f"() => Date.now() - (window.playgroundStoppedAt || 0) < {STOP_WINDOW_MS} ? [] : {json.dumps(values)}"
        Dependency(None, {}, fn._id, None).failure(None, outputs=results, js=js, queue=False,
                                                   api_visibility="private", show_progress="hidden")


# The queue, for a 2-core machine. Every event is dispatched at once; what waits is the computation. An answer
# already given for the same inputs comes from the shared cache (ui/cache.py) without waiting (and an API call's
# from ui/fastpath.py without the queue at all); a new one waits for a model worker: two quick ones (two
# computations at once keep both cores busy, each on its share of the cores: share_cores) and two for the events
# that take long, so that a new sentence's tokens never wait behind a new prompt's 200 generated tokens (with one,
# a class's new prompts queued behind each other: p95 13 s through the page; the model's work runs outside
# Python's lock, so two generations share the cores). The live training (the memory experiment, the Fine-tuning
# tab: up to a minute) has its own single worker. Waiting
# requests hold one of Gradio's handler threads each (THREADS; with Gradio's default of 40, forty waiting misses
# would hold up every cached answer). At most QUEUE_SIZE requests wait to be dispatched; the next is told the queue is
# full at once instead of waiting for minutes.
# Measured with `python -m playground.bench --students 200`: see docs/performance.md.
WORKERS, THREADS, QUEUE_SIZE = (2, 2), 160, 256
LONG_RUNNING = {"memory_experiment", "lora_finetune", "sft", "dpo", "classify_train"}
# seconds from the first computation (the live probe: 9 s of MiniLM features and an optimizer; chain of thought and
# tool calling: SmolLM2's answers), so in the slow pool and its lane from the first, not only once measured
# (Workers.expect_slow): the first probe held the quick lane for 10 s and imported torch.optim's torch._dynamo
# there, 81 MB, a second copy beside the slow lane's trainings' (docs/performance.md)
# The Inference tab's quantization (every format of SmolLM2 built and run in turn: seconds), speculative decoding
# (SmolLM2 decoding a prompt twice) and KV cache (SmolLM2's passes over the text and a second turn) likewise
SLOW_AT_FIRST = {"classify_probe", "chat_tools", "chain_of_thought", "quantization", "speculative", "kv_cache"}
# the Inference tab's engine views read the engine that serves SmolLM2, which lives where the generations run (the
# slow lane): placed with them below (GENERATING), and not answered at start
ENGINE_VIEWS = {"engine_batch", "batching"}
# not answered for the page's defaults when the app starts (ui/fastpath.prewarm): the live trainings, the live probe
# (9 s of MiniLM features), and chain of thought and tool calling, which run SmolLM2 (loaded on first use:
# analysis/models.LARGE; answered at start, it sat in a compute process from the first second: warm app 1,430 MB
# against 1,045 MB without, docs/performance.md).
NOT_AT_START = LONG_RUNNING | SLOW_AT_FIRST | ENGINE_VIEWS
# the events that generate: their computations wait together on the generation engine, up to its rows at once
# (Workers.expect_batched; a model no engine serves decodes alone on the same worker), and the engine's cost
GENERATING = {"generate", "compare_generate", "chat_tools", "chain_of_thought", "smollm2_engine_cost", *ENGINE_VIEWS}
# What an event shows while its computation waits for a model worker (a class's new prompts queue for the slow pool)
WAITING = {"generate": generation_tab.waiting}
ANSWER_BYTES = 48 << 20  # the shared answers, together (most are under 100 kB; SmolLM2's attention, several MB): a
# repeated one is mostly answered from the kept bytes of ui/queuepath.py and ui/fastpath.py before it reaches them


@dataclass(frozen=True)
class Serving:
    """What serving the app shares between its parts, made once by set_queues: the answer cache, the events whose
    answers are shared (those that read no per-session state: ui/queuepath.py and ui/fastpath.py give their kept
    bytes again too), and whether the page's defaults are answered yet (fastpath.prewarm; GET
    /gradio_api/answer-cache reports it). launch_settings() hands it to the middleware."""
    answers: AnswerCache
    cacheable: frozenset[int]   # the fn indexes of the shared events
    api_names: frozenset[str]   # their api_names
    names: frozenset[str]       # every api_name of the app (a call naming another is the caller's mistake: 404)
    warming: threading.Event = field(default_factory=threading.Event)  # set when the prewarm starts (app.serve)
    ready: threading.Event = field(default_factory=threading.Event)    # set when the page's defaults are answered
    parts: dict[str, object] = field(default_factory=dict)  # the middleware that keeps answers, by the path it serves
    #                                                         ("queue": ui/queuepath.py), for the status report


def set_queues(demo: gr.Blocks) -> Serving:
    """Every queued event's handler behind the answer cache and a model worker; the queue's size. Returns what the
    middleware and the prewarm need to know of it."""
    answers = AnswerCache(ANSWER_BYTES)
    cacheable = set()
    quick, training = Workers(*WORKERS, batched=engine.MAX_ROWS), Workers(1, long=True)  # the views', the live runs'
    # where misses compute: here until app.serve() starts the compute processes (ui/compute.py), then there, each
    # computation on its share of the cores (ui/process.configure sets this process's)
    answers.compute = Lanes(answers.functions, threads=share(sum(WORKERS)))
    for index, fn in demo.fns.items():
        if not fn.queue or fn.fn is None:  # browser-only events and unqueued UI plumbing
            continue
        state = tuple(i for i, block in enumerate(fn.outputs) if isinstance(block, gr.State))
        reads_state = any(isinstance(block, gr.State) for block in fn.inputs)
        workers = training if fn.api_name in LONG_RUNNING else quick
        fn.fn = answers.wrap(checked(fn.fn, fn.inputs, fn.api_name or ""), len(fn.outputs), state, workers,
                             cacheable=not reads_state, waiting=WAITING.get(fn.api_name),
                             slow=fn.api_name in SLOW_AT_FIRST, batched=fn.api_name in GENERATING)
        fn.concurrency_id, fn.concurrency_limit = f"answer-{fn._id}", None
        if not reads_state:
            cacheable.add(index)
    logged_preprocess(demo)  # a refused value, one line of the log as a handler's refusal is (checked)
    demo.queue(max_size=QUEUE_SIZE)
    return Serving(answers, frozenset(cacheable),
                   api_names=frozenset(demo.fns[i].api_name for i in cacheable if demo.fns[i].api_name),
                   names=frozenset(fn.api_name for fn in demo.fns.values() if fn.api_name))


def preload() -> None:
    """Load what the tabs load on first use, before app.serve() forks its compute processes (ui/compute.py): they then
    share one copy instead of each loading its own on a student's first question (SmolLM2's tokenizer, read from its
    file, took 3.5 s of a first new sentence's tokenization). The sentence-transformers library's MiniLM is left for
    its first use, and so is SmolLM2 unless its file is on this machine (analysis/models.preload)."""
    from playground.figures import common as figures

    models.preload()
    for key in tokenization_tab.TOKENIZERS:
        tokenization_tab.TOKENIZERS[key]  # noqa: B018 - loaded on first use
    figures.warm()


# System fonts only: a Google font would be fetched from a CDN
THEME = gr.themes.Soft(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "Consolas", "monospace"]).set(
    # WCAG 2.1 AA: text contrast of at least 4.5:1 (measured by tests/test_browser_a11y.py's axe run). Soft's own
    # grey text (neutral 400 on neutral 50: 2.4:1), indigo labels (primary 500 on primary 100: 3.6:1) and white on
    # its primary 500 (4.46:1) fall short; one shade darker each passes in light and dark mode.
    body_text_color_subdued="*neutral_600", body_text_color_subdued_dark="*neutral_400",
    block_label_text_color="*primary_700", block_title_text_color="*primary_700",
    button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
    button_primary_border_color="*primary_600", checkbox_label_background_fill_selected="*primary_600",
    input_placeholder_color="*neutral_500", input_placeholder_color_dark="*neutral_400")
# The page's scripts: one file per concern in assets/ (no CDN; Gradio's HTML component runs no <script>)
HEAD = "\n".join(f"<script>\n{path.read_text(encoding='utf-8')}\n</script>" for path in sorted(ASSETS.glob("*.js")))
# show_error: a value the components themselves refuse (a word where a number goes) reaches the
# user as Gradio's message, not as an anonymous failure
# Gradio keeps every session's components and gr.State in memory, the least recently used dropped beyond the
# capacity (10,000 by default: memory grew with each new visitor for hours). A session costs about 55 kB here (its
# copy of the page's component table; no copy of its values: ui/patches.py), more for what its gr.State holds. 200
# was too few: a class of 200 with its lecturer is 201 sessions, and a dropped session loses its gr.State, the
# lecturer's key or a student's place in the room with it. The store now drops sessions without a seat first
# (patches._evict_the_unseated_first), and holds a class of 200 with room for reloads, a projector and the API
# callers' one-call sessions.
SESSIONS = 1_000
# The app's only uploads are workshop files (at most 200,000 characters: analysis/workshops.MAX_FILE), yet Gradio's
# /gradio_api/upload route takes any file by default: a small cap stops a large POST from filling the disk or memory.
MAX_UPLOAD = "1mb"
# Gradio 6's run history writes every event's inputs and outputs (figures included) into the browser's
# localStorage, re-reading and rewriting the whole history each time: 1.7 s of the page's main thread for one
# sentence applied to every tab (Chrome's profiler, issue #31), while the view on screen waited. It would also keep
# what students typed on a shared lab computer. Off: nothing is recorded and old records are deleted.
RUN_HISTORY = False
LAUNCH = dict(theme=THEME, css_paths=[ASSETS / "style.css"], head=HEAD, ssr_mode=False,
              footer_links=["api", "settings"], show_error=True, state_session_capacity=SESSIONS,
              max_file_size=MAX_UPLOAD, max_threads=THREADS, run_history=RUN_HISTORY)


def launch_settings(demo: gr.Blocks, **overrides) -> dict:
    """gradio's launch() keywords for `demo` (a build_demo()): LAUNCH, the middleware that serves what is the same
    for every visitor without Gradio's per-request work (the page: ui/pagecache.py; answers through the page's
    protocol: ui/queuepath.py; through the plain HTTP API: ui/fastpath.py), each handed the Blocks and its Serving
    (set_queues) rather than finding them in the app it wraps, and `overrides`. A new dict each time: launch() writes
    into its app_kwargs. What the middleware reads and writes of Gradio's private structures is checked first
    (a PatchError if it is no longer there: ui/gradio_check.py)."""
    queuepath.check_gradio(demo)
    fastpath.check_gradio()
    serving = demo.serving
    middleware = [Middleware(CachedPage, blocks=demo), Middleware(CachedEvents, blocks=demo, serving=serving),
                  Middleware(CachedCalls, serving=serving)]
    return {**LAUNCH, "app_kwargs": {"middleware": middleware}, **overrides}
