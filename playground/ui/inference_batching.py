"""The Inference tab's Batching sub-tab: the engine serving SmolLM2 in this process, live (its rows, their positions,
its step time and tokens a second), and an experiment a student runs: the same prompt decoded at batch 1, 2, 4, ...
32 through an engine over the served twin, step time and tokens a second against the batch size, the turn from
memory-bound to compute-bound read from the model's own bytes and FLOPs, and one seeded row alone and in every batch,
bit for bit (serving/batching.py, analysis/batching.py).

Both read the engine, which lives in the process that generates (a server's slow compute process): ui/demo.py places
their events with the generations (GENERATING). The live view asks on its button, or every TICK seconds while "Watch
it live" is ticked; its input is the moment (the page sends the current TICK-second slot), so that a class watching
shares one measurement per slot. The experiment streams its table as each batch size is measured.
"""

from __future__ import annotations

import gradio as gr

from playground.analysis import kv_cache, models
from playground.figures import inference_engine as fe
from playground.serving import batching
from playground.ui.common import (LATEX, Shared, as_int, json_file, refuse_missing_smollm2, text_input,
                                  things_to_try, warn)

TICK = 2.0                 # seconds between the live view's measurements while it is watched
MOMENT_JS = f"() => [Math.floor(Date.now() / {int(TICK * 1000)})]"
MAX_CHARS = 2_000
LARGEST = [str(b) for b in batching.SIZES]
PROMPT = "Once upon a time, in a small village by the sea,"
TRY = [("a story opening", [PROMPT, False]), ("a question, as a chat", ["What is the capital of France?", True]),
       ("a sentence continued", ["The bank raised its interest rates again this spring.", False])]


def _smollm2():
    refuse_missing_smollm2(models.SMOLLM2)
    if models.resolve(models.SMOLLM2) is None:
        raise gr.Error(models.missing())
    return models.get(models.SMOLLM2)


def engine_batch(moment=0):
    """The engine serving SmolLM2 in this process, now: its batch drawn, the text, the data. `moment` only names the
    measurement (the same moment, the same answer)."""
    data = batching.live(_smollm2())
    return fe.live_figure(data), fe.live_markdown(data), data


def batching_experiment(prompt=PROMPT, chat=False, new_tokens=batching.NEW, largest_batch="32", seed=0):
    """The prompt decoded at batch 1, 2, 4, ... `largest_batch`: the figure, the table and the data after each size
    (streamed), then the JSON file."""
    notices: list[str] = []
    prompt = text_input(prompt, notices, MAX_CHARS)
    if not prompt.strip():
        raise gr.Error("Type a prompt for SmolLM2: every row of every batch continues it.")
    if not isinstance(chat, bool):
        raise gr.Error("Chat should be true or false.")
    if str(largest_batch) not in LARGEST:
        raise gr.Error(f"The largest batch is one of {', '.join(LARGEST)}, not {str(largest_batch)[:20]!r}.")
    n = as_int(new_tokens, "New tokens", 1, batching.MAX_NEW, notices)
    seed = as_int(seed, "Seed", 0, 2**31 - 1 - max(batching.SIZES), notices)
    m = _smollm2()
    _, p = kv_cache.fit(m, prompt, chat, notices, batching.MAX_PROMPT)
    warn(notices)
    sizes = tuple(b for b in batching.SIZES if b <= int(largest_batch))
    data = None
    for data in batching.experiment(m, p.ids, n, seed, sizes):
        if data["waiting"]:
            yield gr.skip(), fe.batching_markdown(data), gr.skip(), gr.skip()
            continue
        data["notices"] = notices
        yield fe.batch_figure(data), fe.batching_markdown(data), gr.skip(), data
    yield fe.batch_figure(data), fe.batching_markdown(data), json_file(data, "batching"), data


LIVE_MD = """**The engine, live.** Every SmolLM2 generation on this server, yours and the class's, runs in one batch
(serving/engine.py): a request joins at the next step and leaves the step it ends, and each step advances every row
at once. Each bar is a row: the prompt positions it has read, the tokens it has written and those still to come."""

EXPERIMENT_MD = r"""**The experiment.** Your prompt decoded by $B$ rows at once, $B$ = 1, 2, 4, ... 32, through an
engine of the same code over the same served weights, each row sampling with its own seed. A decode step reads
**every weight once whatever $B$** and does 2 FLOPs per weight **per row**: at small $B$ the step waits for memory and
another row is nearly free; at large $B$ the arithmetic dominates and tokens a second level off. Row 0 has your seed
in every batch: its distributions are compared with those it had alone, bit for bit. The same inputs give the
measurement already made (its time and the machine's load are under the table): change the seed to measure again."""


def _live(shared: Shared) -> None:
    gr.Markdown(LIVE_MD, elem_id="batch-about")
    with gr.Row():
        watch = gr.Checkbox(False, label=f"Watch it live (every {TICK:g} s)", elem_id="batch-watch")
        look = gr.Button("Look now", size="sm", scale=0, elem_id="batch-look")
    moment = gr.Number(0, visible=False, label="Moment")
    with gr.Row():
        with gr.Column(scale=3):
            plot = gr.Plot(label="The engine's batch now", elem_id="batch-live")
        with gr.Column(scale=2):
            text = gr.Markdown(elem_id="batch-live-text", elem_classes=["figure-text"])
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        data = gr.JSON(label="engine_batch")
    timer = gr.Timer(TICK, active=False)
    watch.change(lambda on: gr.Timer(active=bool(on)), watch, timer, queue=False, api_visibility="private",
                 show_progress="hidden")
    gr.on([look.click, timer.tick], engine_batch, inputs=[moment], outputs=[plot, text, data], js=MOMENT_JS,
          api_name="engine_batch", show_progress="hidden")


def _experiment(shared: Shared) -> None:
    gr.Markdown(EXPERIMENT_MD, latex_delimiters=LATEX)
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(PROMPT, label=f"Prompt (its first {batching.MAX_PROMPT} tokens are read)", lines=2,
                                max_lines=6, elem_id="batch-prompt")
            chat = gr.Checkbox(False, label="Chat: the prompt is the user's turn (SmolLM2's template)")
        with gr.Column(scale=2):
            with gr.Row():
                n = gr.Slider(1, batching.MAX_NEW, value=batching.NEW, step=1, label="New tokens per row")
                largest = gr.Dropdown(LARGEST, value=LARGEST[-1], label="Largest batch")
                seed = gr.Number(0, label="Seed (row 0's)", precision=0, minimum=0)
            run = gr.Button("Run the experiment", variant="primary", elem_id="batch-run")
    things_to_try(TRY, [prompt, chat])
    with gr.Row():
        with gr.Column(scale=3):
            plot = gr.Plot(label="Step time and tokens a second against the batch", elem_id="batch-plot")
        with gr.Column(scale=2):
            table = gr.Markdown(elem_id="batch-table", elem_classes=["figure-text"], latex_delimiters=LATEX)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        file = gr.DownloadButton("Download JSON", size="sm")
        data = gr.JSON(label="batching")
    shared.remember("batch", prompt=prompt, chat=chat, n=n, largest=largest, seed=seed)
    run.click(batching_experiment, inputs=[prompt, chat, n, largest, seed], outputs=[plot, table, file, data],
              api_name="batching", show_progress="minimal")   # the table streamed, with the size being measured


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The live engine, then the experiment."""
    _live(shared)
    with gr.Accordion("The experiment: batch 1 to 32", open=True):
        _experiment(shared)
