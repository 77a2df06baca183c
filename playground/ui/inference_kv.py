"""The Inference tab's KV cache sub-tab: the keys and values a generation keeps, measured on SmolLM2 or our GPT over
the student's prompt (analysis/kv_cache.py): their bytes as the text grows, grouped-query attention's saving, a
step's time with and without them, what a second chat turn reuses, and the window past n_positions.

It runs on its button (SmolLM2's passes over the text take a second or two), or when a link sets its controls; the
prompt follows the sentence above without measuring it.
"""

from __future__ import annotations

import gradio as gr

from playground.analysis import kv_cache as kv
from playground.analysis import models
from playground.figures import inference_engine as fe
from playground.serving import engine
from playground.ui.causal_tab import redraw_when_linked
from playground.ui.common import (FOLLOW, LATEX, Shared, as_int, json_file, refuse_missing_smollm2,
                                  smollm2_said_missing, text_input, things_to_try, warn)

GPT = "gpt-shakespeare"
LISTED = [*models.ids("llama"), *models.ids("gpt")]    # SmolLM2 (where offered) and our GPTs: the models with a cache
DEFAULT = LISTED[0] if LISTED else GPT
TRY = [("SmolLM2, a chat", [models.SMOLLM2, True, "Why is the sky blue?"]),
       ("our GPT past its window", [GPT, False, "ROMEO:\nBut soft, what light through yonder window breaks? It is "
                                                "the east, and Juliet is the sun."]),
       ("a long prompt", [models.SMOLLM2, True, "Summarise this: " + "The bank raised its rates again. " * 8])]


def kv_cache(prompt, model=DEFAULT, chat=True, follow_up=kv.FOLLOW_UP, answer_tokens=kv.ANSWER):
    """The cache over the prompt and the answer, then the second turn: the two figures, the text, the data."""
    notices: list[str] = []
    prompt = text_input(prompt, notices, kv.MAX_CHARS)
    if not prompt.strip():
        raise gr.Error("Type a prompt: its keys and values are what the cache keeps, token by token.")
    refuse_missing_smollm2(model)
    name = models.resolve(model)
    if name not in LISTED:
        raise gr.Error(f"Unknown model {str(model)[:40]!r}; choose from {', '.join(LISTED)}.")
    if not isinstance(chat, bool):
        raise gr.Error("Chat should be true or false.")
    follow_up = text_input(follow_up, notices, kv.MAX_CHARS)
    if not follow_up.strip():
        notices.append(f"No second turn typed: using “{kv.FOLLOW_UP}”")
        follow_up = kv.FOLLOW_UP
    n = as_int(answer_tokens, "Answer tokens", 1, kv.MAX_ANSWER, notices)
    try:
        data = kv.measure(models.get(name), prompt, chat, follow_up, n, notices, chunk=engine.CHUNK)
    except kv.KVCacheError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return (fe.kv_growth_figure(data), fe.kv_time_figure(data), fe.kv_markdown(data), json_file(data, "kv_cache"),
            data)


KV_MD = r"""**The KV cache.** Attention at position $t$ reads the keys and values of every position up to $t$, and a
position's $k$ and $v$ depend only on the tokens up to it: once computed they never change, so a generation keeps
them and each new token costs a pass over **one** position instead of the whole text. What it costs is memory: per
token and per layer $2 \times n_{kv} \times d_{head}$ numbers. SmolLM2's **grouped-query attention** has 9 query heads
read 3 key/value heads, so it keeps a third of what multi-head attention would. Every byte below is the cache
tensors' own `nbytes`; every time is measured now, on this server. The answer is greedy; the **second turn** is your
follow-up after it: the conversation so far is the cache's prefix (a **prefix hit**), only the new turn is computed.
Our GPT has a window of 128 characters: past it the positions shift and the cache no longer fits."""


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The view's controls, its outputs and its events (its button; a link that sets its controls)."""
    gr.Markdown(KV_MD, latex_delimiters=LATEX, elem_id="kv-about")
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(str(shared.text.value), label="Prompt (follows the sentence above)", lines=2,
                                max_lines=6, elem_id="kv-prompt")
            follow_up = gr.Textbox(kv.FOLLOW_UP, label="Second turn (your follow-up after the answer)", lines=1,
                                   elem_id="kv-follow-up")
        with gr.Column(scale=2):
            model = gr.Radio([("SmolLM2-135M-Instruct" if name == models.SMOLLM2 else f"our GPT ({name})", name)
                              for name in LISTED], value=DEFAULT, label="Model", elem_id="kv-model")
            model.preprocess = smollm2_said_missing(model.preprocess)   # SmolLM2 where it is missing: why
            chat = gr.Checkbox(True, label="Chat: the prompt is the user's turn (SmolLM2's template)")
            answer = gr.Slider(1, kv.MAX_ANSWER, value=kv.ANSWER, step=1, label="Answer tokens (steps with the cache)")
            run = gr.Button("Measure the cache", variant="primary", elem_id="kv-run")
    things_to_try(TRY, [model, chat, prompt])
    with gr.Row():
        with gr.Column(scale=3):
            growth = gr.Plot(label="The cache's bytes as the text grows", elem_id="kv-growth")
            times = gr.Plot(label="A step with and without the cache", elem_id="kv-times")
        with gr.Column(scale=2):
            table = gr.Markdown(elem_id="kv-table", elem_classes=["figure-text"], latex_delimiters=LATEX)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        file = gr.DownloadButton("Download JSON", size="sm")
        data = gr.JSON(label="kv_cache")
    shared.changed("text")(lambda s: s or gr.skip(), inputs=shared.text, outputs=prompt, api_visibility="private",
                           queue=False, show_progress="hidden", trigger_mode=FOLLOW)
    inputs, outputs = [prompt, model, chat, follow_up, answer], [growth, times, table, file, data]
    shared.remember("kv", model=model, chat=chat, follow_up=follow_up, answer=answer)
    run.click(kv_cache, inputs=inputs, outputs=outputs, api_name="kv_cache", show_progress="full")
    redraw_when_linked(shared, kv_cache, inputs, [model, chat, follow_up, answer], outputs)
